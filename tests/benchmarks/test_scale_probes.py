"""``benchmarks.scale_probes`` measures what it says, at sizes small enough for the suite: every held
pull woken by the SEND is answered (in its turn or the next ones), the receive hands out what it
read, and the command line refuses what it cannot run."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks import scale_probes


def test_every_woken_pull_is_answered_and_the_sends_turn_is_measured() -> None:
    report = asyncio.run(scale_probes._held_pulls(300, 3, pulse=False))
    assert report["answered_in_all"] == 300
    assert 1 <= report["answered_in_the_sends_turn"] <= 300  # type: ignore[operator]
    assert report["send_turn_ms"] > 0  # type: ignore[operator]
    pulse = asyncio.run(scale_probes._held_pulls(300, 3, pulse=True))
    assert pulse["answered"] == 0  # a pulse with nothing new answers nobody


def test_the_other_probes_report_their_sizes() -> None:
    assert scale_probes.probe_offsets(200)["saves"] == 3
    routes = scale_probes.probe_routes(20, 5)
    assert routes["watched"] == 100 and routes["unknown_topics_kept_mb"] < 1  # type: ignore[operator]
    receive = scale_probes.probe_receive(1024)
    assert receive["messages"] == 32 and receive["records_mib"] == round(32 * 1024 / 2**20, 1)
    assert scale_probes.probe_refresh(50)["opened_queues"] == 50
    assert scale_probes.probe_groups(300)["groups"] == 300


def test_the_command_line_refuses_an_unknown_probe_and_a_zero_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["--only", "woken,nothing"], ["--held", "0"]):
        with pytest.raises(SystemExit) as exc:
            scale_probes.main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "nothing" in err and "--held" in err
