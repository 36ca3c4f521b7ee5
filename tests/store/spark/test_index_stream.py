"""The driver's index writer: the index files the write tasks would write, from entry files that
appear one by one, and a writer left waiting for one that never comes stops when cancelled."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

from store.spark.assign import per_file, split_blob
from store.spark.decode import entries_path
from store.spark.entries import pack_entries
from store.spark.index_stream import IndexStreamWriter
from store.spark.index_writer import write_index_file

SLOTS, INDEX_NUM = 7, 40  # 39 keys a file: the 100 entries below fill 2 files and part of a third


def _ranges(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    offset, ts = 1000, 1_700_000_000_000
    blobs = []
    for size in (0, 17, 30, 1, 0, 52):  # empty ranges and a range crossing two file boundaries
        entries = []
        for _ in range(size):
            offset += rng.randrange(100, 2000)
            ts += rng.randrange(0, 3000)
            entries.append((rng.randrange(0, 1 << 31), offset, ts))
        blobs.append(pack_entries(entries))
    return blobs


def _expected(tmp_path: Path, blobs: list[bytes]) -> list[bytes]:
    """What the write tasks make of the same entries (``write_index_file`` per file)."""
    out = tmp_path / "tasks"
    out.mkdir()
    pieces: dict[int, list] = {}
    first = 0
    for blob in blobs:
        for piece in split_blob(blob, first, per_file(INDEX_NUM)):
            pieces.setdefault(piece.file_no, []).append(piece)
        first += len(blob) // 20
    return [
        Path(write_index_file(out, no, pieces[no], SLOTS, INDEX_NUM).path).read_bytes()
        for no in sorted(pieces)
    ]


def test_the_stream_writes_the_write_tasks_files_as_entry_files_appear(tmp_path: Path) -> None:
    blobs = _ranges(7)
    entries, out = tmp_path / "entries", tmp_path / "out"
    entries.mkdir()
    out.mkdir()
    writer = IndexStreamWriter(out, entries, len(blobs), per_file(INDEX_NUM), SLOTS, INDEX_NUM)
    writer.start()
    for index in (2, 0, 1, 5, 3, 4):  # out of order, as tasks finish: renamed into place whole
        part = tmp_path / f"part-{index}"
        part.write_bytes(blobs[index])
        os.replace(part, entries_path(entries, index))
    writer.join(timeout=30)
    assert not writer.is_alive() and writer.error is None
    assert [w.file_no for w in writer.written] == [0, 1, 2]
    assert [w.keys for w in writer.written] == [39, 39, 22]
    assert [Path(w.path).read_bytes() for w in writer.written] == _expected(tmp_path, blobs)


def test_a_cancelled_stream_stops_waiting(tmp_path: Path) -> None:
    writer = IndexStreamWriter(tmp_path, tmp_path, 3, per_file(INDEX_NUM), SLOTS, INDEX_NUM)
    writer.start()
    threading.Event().wait(0.05)
    assert writer.is_alive()  # range 0's file never appears
    writer.cancel()
    writer.join(timeout=10)
    assert not writer.is_alive() and writer.cancelled and writer.written == [] and writer.error is None
