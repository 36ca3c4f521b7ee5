"""``CommitLog.refresh(tail=True)``: a writable store's refresh after each put, the same in cost
whatever the number of files.

It checks the files from the one holding the known end on and whether a next file exists, and
everything only every ``FULL_CHECK_EVERY``. Held here: beside a writer that rolls over several
files it finds what the full refresh finds after every put; a cut of the file being written, or a
new file, is seen at once; a cut of an older file is seen once ``FULL_CHECK_EVERY`` has passed (or
at once after a SIGBUS fault), and then exactly as the full refresh sees it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from server.broker.writable_store import WritableStore
from store.commitlog import mapped_files
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord

SIZE = 64 * 1024


def _state(log: CommitLog) -> tuple[object, ...]:
    return log.max_offset, log.settled_end, [(f.start, f.length) for f in log.files]


def _records(n: int, first: int = 0) -> list[StoreRecord]:
    return [
        StoreRecord("T", b"%d" % i * 300, f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i:031d}\x02", queue_id=i % 2)
        for i in range(first, first + n)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WritableStore]:
    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=SIZE)
    with WritableStore(config) as opened:
        opened.create_topic("T", 2)
        yield opened


def test_beside_a_writer_the_tail_refresh_finds_what_the_full_one_finds(
    store: WritableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)  # never the full check by the clock
    directory = store.config.store_path_commit_log
    tail = CommitLog(directory, SIZE)
    full = CommitLog(directory, SIZE)
    try:
        for rec in _records(600):  # ~1 KiB each: the writer rolls over about ten files
            store.put([rec])
            tail.refresh(tail=True)
            full.refresh()
            assert _state(tail) == _state(full)
        assert len(full.files) >= 8
        assert _state(store.reader.commitlog) == _state(full)  # the store's own view, tail-refreshed
    finally:
        tail.close()
        full.close()


def _fresh_state(directory: Path) -> tuple[object, ...]:
    """What a CommitLog opened now (a full refresh) sees."""
    full = CommitLog(directory, SIZE)
    try:
        return _state(full)
    finally:
        full.close()


@contextmanager
def _tail_view(store: WritableStore, records: int) -> Iterator[tuple[CommitLog, Path]]:
    """``records`` put, then a CommitLog view of the store's directory (and the directory)."""
    for rec in _records(records):
        store.put([rec])
    directory = store.config.store_path_commit_log
    view = CommitLog(directory, SIZE)
    try:
        yield view, directory
    finally:
        view.close()


def test_a_cut_of_the_file_being_written_is_seen_at_once(
    store: WritableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)
    with _tail_view(store, 100) as (tail, directory):
        last = tail.files[-1]
        os.truncate(last.path, 100)
        tail.refresh(tail=True)
        assert tail.max_offset <= last.start + 100
        assert _state(tail) == _fresh_state(directory)


def test_a_cut_of_an_older_file_is_seen_after_full_check_every(
    store: WritableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _tail_view(store, 200) as (tail, directory):
        before = _state(tail)
        os.truncate(tail.files[0].path, 100)  # an older file: records the writer is past
        monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)
        tail.refresh(tail=True)
        assert _state(tail) == before, "not looked at between full checks"
        monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 0.0)
        tail.refresh(tail=True)
        assert _state(tail) == _fresh_state(directory) != before


def test_a_sigbus_fault_makes_the_next_tail_refresh_a_full_one(
    store: WritableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _tail_view(store, 200) as (tail, directory):
        os.truncate(tail.files[0].path, 100)
        monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)
        faults = mapped_files.sigbus.fault_count()
        monkeypatch.setattr(mapped_files.sigbus, "fault_count", lambda: faults + 1)
        tail.refresh(tail=True)
        assert _state(tail) == _fresh_state(directory)
        assert tail.files[0].length == 100
