"""``benchmarks.lone_send_cost`` counts what it says it counts: one lone SEND's system calls and time.

Its figures are the per-SEND budget BENCHMARKS.md's h40 section reads (instructions, system calls),
so the subtraction is checked against what a lone SEND must do and nothing else: exactly one
``pwrite`` of the CommitLog record and one of the consume-queue entry, one turn of the loop
(``epoll_wait``), and no read, open or write; every SEND answered (the child checks the answers).
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks import lone_send_cost


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_system_calls_of_a_lone_send_are_its_two_writes_and_one_loop_turn() -> None:
    sends = 60
    many = lone_send_cost.syscalls(lone_send_cost.REPO, sends, 0)
    none = lone_send_cost.syscalls(lone_send_cost.REPO, 0, sends)
    per = {name: (many.get(name, 0) - none.get(name, 0)) / sends for name in set(many) | set(none)}
    assert per["pwrite64"] == pytest.approx(2.0, abs=0.05)  # the record, the queue entry
    assert per["epoll_wait"] == pytest.approx(1.0, abs=0.05)  # the loop's turn between reads
    for name in ("read", "openat", "write"):
        assert abs(per.get(name, 0.0)) < 0.05, name


def test_a_child_times_its_sends() -> None:
    assert 0 < lone_send_cost.cpu_us(lone_send_cost.REPO, 40) < 100_000


def test_the_command_line_refuses_a_zero_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        lone_send_cost.main(["--sends", "0"])
    assert exc.value.code == 2
    assert "--sends" in capsys.readouterr().err
