"""Progress of the long store walks (issue 35, item 5): ``fsck``, ``rebuild-index`` and
``export-keys`` said nothing for minutes on a large store.

The line itself is checked with a fake clock on a stream that is a terminal and one that is not;
the walks are checked to report the CommitLog bytes they walked, ending at the whole CommitLog; and
the commands are checked to write the line on standard error (the interval lowered to 0 so that a
small store's walk writes it).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import store.progress_line
from clients.cli import main
from clients.testkit.jsonl_store import make_store
from store.check.store_check import check_store
from store.config.store_config import StoreConfig
from store.progress_line import ProgressLine
from store.reput.rebuild import rebuild_index_and_queues

MIB = 1024 * 1024


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_in_a_log_a_line_every_interval_and_the_last_only_after_one() -> None:
    out, clock = io.StringIO(), Clock()
    line = ProgressLine("fsck", 10 * MIB, out, log_interval=10.0, clock=clock)
    line.update(1 * MIB)
    clock.now = 9.9
    line.update(2 * MIB)
    assert out.getvalue() == ""
    clock.now = 10.0
    line.update(5 * MIB)
    clock.now = 15.0
    line.update(6 * MIB)  # within the next interval: not written
    line.finish()
    assert out.getvalue().splitlines() == [
        "fsck                   [###############...............]  50.0% (5.0/10.0 MiB)",
        "fsck                   [##################............]  60.0% (6.0/10.0 MiB)",
    ]
    short, clock = io.StringIO(), Clock()
    quick = ProgressLine("fsck", 10 * MIB, short, clock=clock)
    quick.update(10 * MIB)
    quick.finish()
    assert short.getvalue() == ""  # a walk shorter than one interval leaves a log as it was


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_ended() -> None:
    out, clock = Terminal(), Clock()
    line = ProgressLine("rebuild-index", 4 * MIB, out, tty_interval=0.2, clock=clock)
    clock.now = 0.2
    line.update(1 * MIB)
    clock.now = 0.3
    line.update(2 * MIB)
    clock.now = 0.5
    line.update(4 * MIB)
    line.finish()
    assert out.getvalue() == (
        "\rrebuild-index          [########......................]  25.0% (1.0/4.0 MiB)"
        "\rrebuild-index          [##############################] 100.0% (4.0/4.0 MiB)"
        "\rrebuild-index          [##############################] 100.0% (4.0/4.0 MiB)\n"
    )


@pytest.fixture
def small_store(tmp_path: Path) -> StoreConfig:
    """Three 1 MiB CommitLog files' worth of messages (so the walk has several runs to report)."""
    lines = [{"topic": "Orders", "keys": f"k{i}", "body": "x" * 4000} for i in range(600)]
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=MIB)
    make_store(config, spec)
    return config


def _checked(calls: list[tuple[int, int]], config: StoreConfig) -> None:
    assert calls, "the walk reported no progress"
    total = sum(f.stat().st_size for f in config.store_path_commit_log.iterdir())
    dones = [done for done, _ in calls]
    assert dones == sorted(dones)
    assert {t for _, t in calls} == {calls[-1][1]}
    # the walk ends at the CommitLog's end: every byte of the files but the last one's unwritten tail
    assert 2 * MIB < calls[-1][1] <= total
    assert dones[-1] == calls[-1][1]


def test_fsck_and_the_one_pass_rebuild_report_the_bytes_walked(small_store: StoreConfig) -> None:
    walked: list[tuple[int, int]] = []
    assert check_store(small_store, progress=lambda done, total: walked.append((done, total))).ok
    _checked(walked, small_store)
    rebuilt: list[tuple[int, int]] = []
    rebuild_index_and_queues(small_store, progress=lambda done, total: rebuilt.append((done, total)))
    _checked(rebuilt, small_store)
    assert rebuilt[-1] == walked[-1]


@pytest.mark.parametrize("command", ["fsck", "rebuild-index"])
def test_the_commands_write_the_line_on_stderr(
    command: str,
    small_store: StoreConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(store.progress_line, "LOG_INTERVAL", 0.0)
    assert (
        main([command, "--store", str(small_store.store_path_root_dir), "--mapped-file-size", str(MIB)]) == 0
    )
    captured = capsys.readouterr()
    assert f"{command:<22} [" in captured.err
    assert "100.0%" in captured.err.splitlines()[-1]
    assert "MiB)" not in captured.out  # the report on stdout stays as it was
