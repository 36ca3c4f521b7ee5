"""A consume queue file's written end is the broker's: the first entry, scanning forward, whose
commitLogOffset is negative or whose size is not positive (4.9.7 ``ConsumeQueue.recover``), even when
a valid-looking garbage entry sits exactly where a binary search over the entries would probe.

Expected ends come from that rule applied by hand to the bytes each test writes (entries 0..N-1
valid, entry N zeros), not from the code under test."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from store.consumequeue.builder import ConsumeQueueBuilder
from store.consumequeue.consume_queue import ConsumeQueue
from tests.support.store_copy import queues_rebuilt_in_files_of

FILE_SIZE = 300_000 * 20
ENTRIES = 72
NAME = "java-4.9.7-a"


def _entry(commit_log_offset: int, size: int, tags_code: int = 0) -> bytes:
    """One entry as the format lays it out: commitLogOffset i64, size i32, tagsCode i64, big endian."""
    return struct.pack(">qiq", commit_log_offset, size, tags_code)


GARBAGE = _entry(123, 77)


def _probes(units: int) -> list[int]:
    """The entries a binary search for the first invalid one over ``units`` probes when every probe
    but the first answers "invalid" (first principles: lo=0, hi=units, mid=(lo+hi)//2)."""
    out, lo, hi = [], 0, units
    while lo < hi:
        mid = (lo + hi) // 2
        out.append(mid)
        hi = mid
    return out


def _write_full(path: Path, data: bytes) -> None:
    """The whole file written, every block allocated (a copy without holes: ``cp --sparse=never``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _queue_bytes(count: int, garbage_at: dict[int, bytes], size: int = FILE_SIZE) -> bytes:
    data = bytearray(size)
    for i in range(count):
        data[i * 20 : i * 20 + 20] = _entry(1000 + i * 100, 100, i)
    for unit, raw in garbage_at.items():
        data[unit * 20 : unit * 20 + len(raw)] = raw
    return bytes(data)


@pytest.mark.parametrize("unit", [150_000, 75_000, 150_001, 299_999, ENTRIES + 1])
def test_garbage_at_a_probe_point_of_a_file_without_holes(tmp_path: Path, unit: int) -> None:
    """72 entries, then zeros, then one valid-looking entry at entry ``unit`` of a 6 MB file with no
    holes: the end is 72 (the broker's). Before, garbage at 150,000 (the search's first probe) made
    the end 150,001, so reads served entries 72..150,000, which were never written."""
    path = tmp_path / "T" / "0" / ("0" * 20)
    _write_full(path, _queue_bytes(ENTRIES, {unit: GARBAGE}))
    queue = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
    try:
        assert queue.max_offset == ENTRIES
        assert queue.entry(ENTRIES - 1) is not None
        assert queue.entry(ENTRIES) is None
        assert queue.entry(unit) is None
        assert [e.commit_log_offset for e in queue.entries(ENTRIES - 2, 32)] == [
            1000 + (ENTRIES - 2) * 100,
            1000 + (ENTRIES - 1) * 100,
        ]
    finally:
        queue.close()


def test_garbage_at_a_probe_point_before_the_first_hole(tmp_path: Path) -> None:
    """The same inside the file system block the entries end in (a sparse file: data up to the first
    hole, 4 KiB or more): garbage where the search over that block probes first."""
    path = tmp_path / "T" / "0" / ("0" * 20)
    path.parent.mkdir(parents=True)
    block = 64 * 1024
    units = block // 20 + 1  # the search covers the entries that start before the hole
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, FILE_SIZE)
        os.pwrite(fd, _queue_bytes(ENTRIES, {units // 2: GARBAGE}, block), 0)
    finally:
        os.close(fd)
    queue = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
    try:
        assert queue.max_offset == ENTRIES
    finally:
        queue.close()


def test_garbage_at_every_probe_point_at_once(tmp_path: Path) -> None:
    """Garbage at each entry the search would visit (150,000, 75,000, ... down to 73): still 72."""
    garbage = {u: GARBAGE for u in _probes(300_000) if u > ENTRIES}
    path = tmp_path / "T" / "0" / ("0" * 20)
    _write_full(path, _queue_bytes(ENTRIES, garbage))
    queue = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
    try:
        assert queue.max_offset == ENTRIES
    finally:
        queue.close()


def test_a_hole_in_the_middle_of_a_full_looking_file(tmp_path: Path) -> None:
    """Entries 0..299,999 written except entry 1000 (zeros: a torn write the broker never finished):
    the end is 1000, as the broker's scan stops there, though every probe of a search sees valid
    entries. The next file is then past the end (ignored)."""
    data = bytearray(_queue_bytes(300_000, {}))
    data[1000 * 20 : 1001 * 20] = bytes(20)
    path = tmp_path / "T" / "0" / ("0" * 20)
    _write_full(path, bytes(data))
    _write_full(path.with_name(f"{FILE_SIZE:020d}"), _queue_bytes(5, {}))
    queue = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
    try:
        assert queue.max_offset == 1000
        assert queue.file_starts == [0]
    finally:
        queue.close()


def test_the_builder_resumes_at_the_brokers_end_not_after_garbage(stores_dir: Path, tmp_path: Path) -> None:
    """The builder's resume over a queue whose 6 MB file has no holes and garbage at entry 150,000:
    it takes the end where the entries end, clears the garbage (one warning) and writes nothing, so
    the files are Java's entries zero padded. Before, it took the end as 150,001 and kept the garbage
    as an entry."""
    dst = tmp_path / NAME
    config, expected = queues_rebuilt_in_files_of(stores_dir, NAME, dst, FILE_SIZE)
    target = sorted(expected)[0]
    end = -(-len(expected[target].rstrip(b"\0")) // 20)
    assert end < 150_000
    full = config.consume_queue_dir / target
    data = bytearray(full.read_bytes())
    data[150_000 * 20 : 150_001 * 20] = GARBAGE
    full.unlink()
    _write_full(full, bytes(data))
    builder = ConsumeQueueBuilder(config)
    try:
        topic, qid, _ = target.split("/")
        assert builder.queue_ends()[(topic, int(qid))] == end
        builder.run_once()
    finally:
        builder.close()
    assert builder.entries_written == 0
    root = config.consume_queue_dir
    assert {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()} == expected
