"""A queue takes its own builder's appends to its last file without listing its directory.

``ConsumeQueue.refresh_written(start, wrote, fd)`` moves the written end to ``wrote`` only in the
case it names: the file the builder wrote is the last one mapped, the same inode (still linked) at
the same size, its first and last seen entries as the last look saw them, valid entries up to
``wrote`` and none at it. Every other case answers False with nothing changed, and the full
``refresh`` then finds what the broker's rules give. The files here are written by hand, so each
case is exactly the one named.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.consumequeue.consume_queue import ConsumeQueue, entry_bytes

FILE_SIZE = 8 * 20  # 8 entries a file


def _entry(i: int) -> bytes:
    return entry_bytes(1000 + 100 * i, 100, i)


@pytest.fixture
def queue_dir(tmp_path: Path) -> Path:
    d = tmp_path / "consumequeue" / "T" / "0"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def writer(queue_dir: Path) -> Iterator[int]:
    """The first file, 2 entries written, sized as the builder sizes it; its descriptor."""
    fd = os.open(queue_dir / f"{0:020d}", os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, FILE_SIZE)
    os.pwrite(fd, _entry(0) + _entry(1), 0)
    yield fd
    os.close(fd)


def _open(queue_dir: Path) -> ConsumeQueue:
    return ConsumeQueue(queue_dir.parent.parent, "T", 0, FILE_SIZE)


def test_appended_entries_are_taken_without_a_listing(
    queue_dir: Path, writer: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = _open(queue_dir)
    assert queue.max_offset == 2
    os.pwrite(writer, _entry(2) + _entry(3), 40)
    listed: list[object] = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: listed.append(p) or real(p))
    assert queue.refresh_written(0, 80, writer)
    assert listed == []
    assert queue.max_offset == 4
    assert [e.tags_code for e in queue.entries(0, 10)] == [0, 1, 2, 3]
    assert queue._files[-1].mtime_ms == os.fstat(writer).st_mtime_ns // 1_000_000
    # the file filled to its end: taken too (the next entry starts a new file)
    os.pwrite(writer, b"".join(_entry(i) for i in range(4, 8)), 80)
    assert queue.refresh_written(0, FILE_SIZE, writer)
    assert queue.max_offset == 8
    queue.close()


def test_entries_the_map_does_not_hold_as_said_are_refused(queue_dir: Path, writer: int) -> None:
    queue = _open(queue_dir)
    # said written, not there (the write did not reach this file)
    assert not queue.refresh_written(0, 60, writer)
    assert queue.max_offset == 2
    # a valid entry past the end said (another writer's): the full refresh reads it
    os.pwrite(writer, _entry(2) + _entry(3), 40)
    assert not queue.refresh_written(0, 60, writer)
    assert queue.max_offset == 2
    # not whole entries, past the file, behind the end
    for wrote in (70, FILE_SIZE + 20, 20):
        assert not queue.refresh_written(0, wrote, writer)
    queue.refresh()
    assert queue.max_offset == 4
    queue.close()


def test_a_first_entry_overwritten_in_place_is_refused(queue_dir: Path, writer: int) -> None:
    queue = _open(queue_dir)
    os.pwrite(writer, entry_bytes(5, 100, 99), 0)  # other bytes over the first entry, same inode
    os.pwrite(writer, _entry(2), 40)
    assert not queue.refresh_written(0, 60, writer)
    assert queue.max_offset == 2
    queue.close()


def test_a_new_file_replaced_or_deleted_file_is_refused(queue_dir: Path, writer: int) -> None:
    queue = _open(queue_dir)
    # the builder's appends went to another file than the last one mapped (a new file started)
    fd = os.open(queue_dir / f"{FILE_SIZE:020d}", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, FILE_SIZE)
        os.pwrite(fd, _entry(8), 0)
        assert not queue.refresh_written(FILE_SIZE, 20, fd)
    finally:
        os.close(fd)
    # a descriptor of another inode, and the mapped file unlinked under its descriptor
    other = queue_dir.parent / "other"
    other.write_bytes(_entry(0) + _entry(1) + _entry(2) + bytes(FILE_SIZE - 60))
    fd = os.open(other, os.O_RDONLY)
    try:
        assert not queue.refresh_written(0, 60, fd)
    finally:
        os.close(fd)
    os.pwrite(writer, _entry(2), 40)
    os.unlink(queue_dir / f"{0:020d}")
    assert not queue.refresh_written(0, 60, writer)
    assert queue.max_offset == 2
    queue.close()


def test_a_file_grown_or_cut_is_refused(queue_dir: Path, writer: int) -> None:
    queue = _open(queue_dir)
    os.pwrite(writer, _entry(2), 40)
    os.ftruncate(writer, FILE_SIZE + 20)
    assert not queue.refresh_written(0, 60, writer)
    os.ftruncate(writer, FILE_SIZE - 20)
    assert not queue.refresh_written(0, 60, writer)
    assert queue.max_offset == 2
    queue.close()


def test_a_first_entry_overwritten_in_the_tick_of_an_append_is_caught_later(
    queue_dir: Path, writer: int
) -> None:
    """A full refresh looks at a file's entries only when its mtime moved; an overwrite of its first
    entry in the same mtime tick as an append the refresh then reads must not become the entry it
    compares against: the next refresh that sees the mtime move finds it."""
    queue = ConsumeQueue(queue_dir.parent.parent, "T", 0, FILE_SIZE, repair=True)
    path = queue_dir / f"{0:020d}"
    seen_ns = queue._files[-1].mtime_ms * 1_000_000
    os.pwrite(writer, entry_bytes(5, 100, 99), 0)  # other bytes over the first entry
    os.pwrite(writer, _entry(2), 40)  # and an append, in the same tick
    os.utime(path, ns=(seen_ns, seen_ns))
    queue.refresh()
    assert queue.failed_checks == 0  # not looked at: the mtime did not move
    os.pwrite(writer, _entry(3), 60)
    os.utime(path, ns=(seen_ns + 10**9, seen_ns + 10**9))
    queue.refresh()
    assert queue.failed_checks == 1
    assert queue.entry(0) is None  # the file is not answered from; it is rebuilt from the CommitLog
    queue.close()
