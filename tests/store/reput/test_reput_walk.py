"""The reput itself: one walk of the CommitLog, fed to recording dispatchers.

The CommitLog is written by ``StoreWriter`` into 4 KiB files, so records roll over to new files
behind blank end-of-file records; what every test expects comes from the writer's own account of
where each record went (``Appended``), never from the reput.
"""

from __future__ import annotations

import itertools
import logging
import threading
from pathlib import Path

import pytest

from store.commitlog import record
from store.commitlog.gaps import CommitLogGapError, index_around, refuse
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.reput.dispatcher import Run, skip_to
from store.reput.walk import Reput
from store.write.writer import Appended, StoreWriter

FILE_SIZE = 4096
RECORDS = 60


class Recorder:
    """A dispatcher that notes every record it is handed, into a log it may share with others."""

    def __init__(
        self, name: str, log: list[tuple[str, int, int]], resume: int = 0, ready: bool = True
    ) -> None:
        self.name = name
        self.log = log
        self.resume = resume
        self.ready = ready
        self.runs: list[tuple[int, int, int]] = []
        self.flushed = 0

    def begin(self) -> bool:
        return self.ready

    def resume_offset(self) -> int:
        return self.resume

    def dispatch(self, run: Run) -> None:
        self.runs.append((run.base, run.pos, run.end))
        pos = run.pos
        while pos < run.end:
            size = int.from_bytes(run.view[pos : pos + 4], "big")
            self.log.append((self.name, run.base + pos, size))
            pos += size
        self.resume = run.base + run.end

    def flush(self) -> None:
        self.flushed += 1


def _write(root: Path, n: int = RECORDS) -> tuple[StoreConfig, list[Appended]]:
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=FILE_SIZE)
    with StoreWriter(config, index=False) as writer:
        appended = [
            writer.append("ReputTopic", b"b" * (40 + i % 70), keys=f"k{i}", queue_id=i % 3) for i in range(n)
        ]
    return config, appended


@pytest.fixture
def store(tmp_path: Path) -> tuple[StoreConfig, list[Appended]]:
    return _write(tmp_path / "store")


def _commitlog(config: StoreConfig) -> CommitLog:
    return CommitLog(config.store_path_commit_log, FILE_SIZE)


def _records(appended: list[Appended]) -> list[tuple[int, int]]:
    return [(a.offset, a.size) for a in appended]


def test_every_record_once_in_order_across_roll_overs(store: tuple[StoreConfig, list[Appended]]) -> None:
    config, appended = store
    files = {a.offset // FILE_SIZE for a in appended}
    assert len(files) >= 4, "the records roll over several files"
    # A blank end-of-file record closes every file but the last: the next file's first record does
    # not start where the previous record ended.
    rolls = [b for a, b in itertools.pairwise(appended) if a.offset + a.size != b.offset]
    assert len(rolls) == len(files) - 1 and all(b.offset % FILE_SIZE == 0 for b in rolls)
    log: list[tuple[str, int, int]] = []
    recorder = Recorder("r", log)
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [recorder])
        assert reput.run_once() == RECORDS
        assert [(o, s) for _n, o, s in log] == _records(appended)
        for base, pos, end in recorder.runs:  # a run never spans files
            assert (base + pos) // FILE_SIZE == (base + end - 1) // FILE_SIZE
        assert reput.run_once() == 0 and len(log) == RECORDS
    finally:
        commitlog.close()


def test_dispatchers_are_fed_in_their_order(store: tuple[StoreConfig, list[Appended]]) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    first, second = Recorder("first", log), Recorder("second", log)
    commitlog = _commitlog(config)
    try:
        Reput(commitlog, [first, second]).run_once()
    finally:
        commitlog.close()
    assert first.runs == second.runs
    # Each run goes to "first" whole, then to "second".
    at = 0
    for base, pos, end in first.runs:
        n = sum(1 for a in appended if base + pos <= a.offset < base + end)
        assert [name for name, _o, _s in log[at : at + 2 * n]] == ["first"] * n + ["second"] * n
        at += 2 * n
    assert at == 2 * RECORDS


def test_resumes_from_the_least_resume_point(store: tuple[StoreConfig, list[Appended]]) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    behind = Recorder("behind", log, resume=appended[20].offset)
    ahead = Recorder("ahead", log, resume=appended[45].offset)
    sitting_out = Recorder("out", log, resume=0, ready=False)
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [behind, ahead, sitting_out])
        assert reput.resume_offset() == 0  # all three
        assert reput.resume_offset([behind, ahead]) == appended[20].offset
        assert reput.run_once() == RECORDS - 20  # the one sitting out holds nobody back
    finally:
        commitlog.close()
    assert [(o, s) for n, o, s in log if n == "behind"] == _records(appended[20:])
    assert [(o, s) for n, o, s in log if n == "ahead"] == _records(appended[20:])  # handed, its to skip
    assert not [e for e in log if e[0] == "out"]


def test_a_budget_slices_the_walk_and_the_next_pass_goes_on(
    store: tuple[StoreConfig, list[Appended]],
) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    recorder = Recorder("r", log)
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [recorder])
        slices = []
        while read := reput.run_once(max_records=7):
            slices.append(read)
    finally:
        commitlog.close()
    assert slices == [7] * (RECORDS // 7) + [RECORDS % 7]
    assert [(o, s) for _n, o, s in log] == _records(appended)


def test_follows_a_growing_commitlog(tmp_path: Path) -> None:
    config = StoreConfig.for_store(tmp_path / "live", mapped_file_size_commit_log=FILE_SIZE)
    log: list[tuple[str, int, int]] = []
    recorder = Recorder("r", log)
    writer = StoreWriter(config, index=False)
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [recorder])
        appended = []
        for batch in range(5):
            appended += [writer.append("Live", b"x" * 90, keys=f"b{batch}-{i}") for i in range(9)]
            commitlog.refresh()
            assert reput.run_once() == 9
        assert [(o, s) for _n, o, s in log] == _records(appended)
    finally:
        commitlog.close()
        writer.close()


def _files(config: StoreConfig) -> list[Path]:
    return sorted(config.store_path_commit_log.iterdir())


def _gap_store(tmp_path: Path) -> tuple[StoreConfig, list[Appended], list[Appended]]:
    """A store whose second CommitLog file is gone: (config, records before, records after it)."""
    config, appended = _write(tmp_path / "gap")
    missing = _files(config)[1]
    start = int(missing.name)
    missing.unlink()
    before = [a for a in appended if a.offset < start]
    after = [a for a in appended if a.offset >= start + FILE_SIZE]
    return config, before, after


def test_following_waits_at_a_gap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config, before, after = _gap_store(tmp_path)
    log: list[tuple[str, int, int]] = []
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [Recorder("r", log)])
        with caplog.at_level(logging.WARNING):
            assert reput.run_once() == len(before)
            assert reput.run_once() == 0
    finally:
        commitlog.close()
    assert [(o, s) for _n, o, s in log] == _records(before)
    stalls = [r.getMessage() for r in caplog.records if "following the CommitLog stops" in r.getMessage()]
    assert len(stalls) == 1 and f"resume at offset {after[0].offset}" in stalls[0]


def test_a_rebuild_refuses_a_gap(tmp_path: Path) -> None:
    config, before, after = _gap_store(tmp_path)
    log: list[tuple[str, int, int]] = []
    commitlog = _commitlog(config)
    try:
        with pytest.raises(CommitLogGapError) as err:
            Reput(commitlog, [Recorder("r", log)], on_gap=refuse).run_once()
    finally:
        commitlog.close()
    gap = err.value.gap
    assert (gap.start, gap.resume) == (before[-1].offset + before[-1].size, after[0].offset)
    assert [(o, s) for _n, o, s in log] == _records(before)


def test_a_rebuild_around_gaps_walks_both_sides(tmp_path: Path) -> None:
    config, before, after = _gap_store(tmp_path)
    log: list[tuple[str, int, int]] = []
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [Recorder("r", log)], on_gap=index_around)
        assert reput.run_once() == len(before) + len(after)
    finally:
        commitlog.close()
    assert [(o, s) for _n, o, s in log] == _records(before + after)
    assert [(g.start, g.resume) for g in reput.gaps] == [
        (before[-1].offset + before[-1].size, after[0].offset)
    ]


def test_a_corrupt_record_is_skipped_as_the_commitlog_walk_skips_it(tmp_path: Path) -> None:
    config, appended = _write(tmp_path / "corrupt")
    bad = appended[5]
    path = config.store_path_commit_log / f"{bad.offset - bad.offset % FILE_SIZE:020d}"
    data = bytearray(path.read_bytes())
    body_at = data.find(b"b" * 45, bad.offset % FILE_SIZE)
    assert bad.offset % FILE_SIZE < body_at < bad.offset % FILE_SIZE + bad.size
    data[body_at] ^= 0xFF  # BODYCRC no longer matches
    path.write_bytes(bytes(data))
    log: list[tuple[str, int, int]] = []
    commitlog = _commitlog(config)
    try:
        reput = Reput(commitlog, [Recorder("r", log)], on_gap=index_around)
        reput.run_once()
    finally:
        commitlog.close()
    assert [(o, s) for _n, o, s in log] == _records(appended[:5] + appended[6:])
    assert [(g.start, g.resume) for g in reput.gaps] == [(bad.offset, bad.offset + bad.size)]


def test_run_forever_flushes_the_dispatchers_once_caught_up(
    store: tuple[StoreConfig, list[Appended]],
) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    recorder = Recorder("r", log)
    commitlog = _commitlog(config)
    stop = threading.Event()

    class StopAfterFlush(Recorder):
        def flush(self) -> None:
            super().flush()
            stop.set()

    last = StopAfterFlush("last", log)
    try:
        Reput(commitlog, [recorder, last]).run_forever(stop, interval=0.01)
    finally:
        commitlog.close()
    assert (recorder.flushed, last.flushed) == (1, 1)
    assert [(o, s) for n, o, s in log if n == "r"] == _records(appended)


def test_skip_to_finds_the_first_record_at_or_after_an_offset(
    store: tuple[StoreConfig, list[Appended]],
) -> None:
    config, appended = store
    first_file = [a for a in appended if a.offset < FILE_SIZE]
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    run = Run(memoryview(data), 0, 0, first_file[-1].offset + first_file[-1].size)
    assert skip_to(run, first_file[3].offset) == first_file[3].offset
    assert skip_to(run, first_file[3].offset + 1) == first_file[4].offset  # inside a record: the next
    assert skip_to(run, FILE_SIZE * 5) == run.end


@pytest.mark.parametrize("impl", ["compiled", "reference"])
def test_whole_run_stops_at_the_blank_end_of_file_record(
    store: tuple[StoreConfig, list[Appended]], impl: str
) -> None:
    config, appended = store
    whole_run = record.whole_run if impl == "compiled" else record.whole_run_reference
    first_file = [a for a in appended if a.offset < FILE_SIZE]
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    blank_at = first_file[-1].offset + first_file[-1].size
    assert whole_run(data, 0, len(data), 0, len(data), 1 << 40) == (blank_at, len(first_file))
    assert whole_run(data, 0, len(data), 0, len(data), 4) == (first_file[4].offset, 4)
    # A soft end inside a record: the record that starts before it is taken whole.
    assert whole_run(data, 0, len(data), 0, first_file[2].offset + 1, 1 << 40) == (first_file[3].offset, 3)
    # Checked at its own PHYSICALOFFSET: the same bytes under another base are not records.
    assert whole_run(data, 0, len(data), FILE_SIZE, len(data), 1 << 40) == (0, 0)
    # A hard end cutting a record short stops before it.
    assert whole_run(data, 0, first_file[6].offset + 10, 0, len(data), 1 << 40) == (first_file[6].offset, 6)


class StoppingScanner(Recorder):
    """A ``Scanner`` that takes whole records itself but refuses the one at ``refuse`` (as the index
    refuses a record whose fields do not decode), and declines runs starting before ``decline_until``."""

    def __init__(
        self, name: str, log: list[tuple[str, int, int]], refuse: int, decline_until: int = 0
    ) -> None:
        super().__init__(name, log)
        self.refuse = refuse
        self.decline_until = decline_until
        self.scanned: list[tuple[int, int]] = []

    def scan(self, run: Run, max_records: int) -> tuple[int, int] | None:
        if run.base + run.pos < self.decline_until:
            return None
        end = (
            run.end if not run.base + run.pos <= self.refuse < run.base + run.end else self.refuse - run.base
        )
        stop, n = record.whole_run(run.view, run.pos, end, run.base, end, max_records)
        if n:
            self.scanned.append((run.base + run.pos, run.base + stop))
            self.dispatch(Run(run.view, run.base, run.pos, stop))
        return stop, n


def test_a_scanner_finds_the_runs_and_the_reput_walks_what_it_refuses(
    store: tuple[StoreConfig, list[Appended]],
) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    recorder = Recorder("r", log)
    scanner = StoppingScanner("s", log, refuse=appended[10].offset)
    commitlog = _commitlog(config)
    try:
        assert Reput(commitlog, [recorder, scanner]).run_once() == RECORDS
    finally:
        commitlog.close()
    assert [(o, s) for n, o, s in log if n == "r"] == _records(appended)
    assert [(o, s) for n, o, s in log if n == "s"] == _records(appended)
    assert scanner.scanned and scanner.scanned[0] == (0, appended[10].offset)
    assert scanner.runs[1] == (appended[10].offset, 0, appended[10].size)  # handed alone, checked
    # The scanner took each run first: every record reached it before the other dispatcher.
    assert log.index(("s", appended[3].offset, appended[3].size)) < log.index(
        ("r", appended[3].offset, appended[3].size)
    )


def test_a_scanner_behind_nobody_declines_and_the_reput_checks_the_run(
    store: tuple[StoreConfig, list[Appended]],
) -> None:
    config, appended = store
    log: list[tuple[str, int, int]] = []
    scanner = StoppingScanner("s", log, refuse=-1, decline_until=FILE_SIZE)
    commitlog = _commitlog(config)
    try:
        assert Reput(commitlog, [scanner]).run_once() == RECORDS
    finally:
        commitlog.close()
    assert [(o, s) for _n, o, s in log] == _records(appended)
    assert all(start >= FILE_SIZE for start, _end in scanner.scanned)
    assert len(scanner.scanned) < len(scanner.runs)
