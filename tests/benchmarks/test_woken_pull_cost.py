"""``benchmarks.woken_pull_cost`` measures what it says: a held pull woken and answered per cycle.

Its child checks that each cycle's held pull was answered SUCCESS with the message (else it fails);
here: the woken cycle costs more than the lone SEND's, this checkout answers the woken pull in the
SEND's own turn (no loop turn between the SEND's read and the pull's answer), and the probe counts
the calls between the SEND's ``notify_queue`` and the answer.
"""

from __future__ import annotations

import pytest

from benchmarks import woken_pull_cost


def test_a_woken_cycle_is_answered_in_the_sends_turn_and_probed() -> None:
    woken = woken_pull_cost.run_child(woken_pull_cost.REPO, 40, True, calls=True)
    assert woken["turns"] == 0
    assert 0 < woken["python_calls"] < 1000
    assert 0 < woken["notify_to_answer_us_p50"] <= woken["notify_to_answer_us_p99"]
    lone = woken_pull_cost.run_child(woken_pull_cost.REPO, 40, False)
    assert "turns" not in lone and 0 < lone["us_per_cycle"] < 100_000


def test_the_command_line_refuses_a_zero_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        woken_pull_cost.main(["--cycles", "0"])
    assert exc.value.code == 2
    assert "--cycles" in capsys.readouterr().err
