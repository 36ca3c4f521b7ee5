"""Write one index file from its entries: the work each write task does, with the store's IndexFile.

A task receives every piece of one file (its runs of entries, in any order, and the previous file's
last entry). It creates the file the way the broker creates a successor (begin and end header values
taken from the previous file's end) and replays ``putKey`` for each entry in global order through
``IndexFile.put_hash``, so the layout, slot chains, time differences and header rules all come from
the one implementation the sequential builder uses: ``index_range.put_entries`` (compiled: the same
writer as the builder's compiled loop) puts each run's blob in one call.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from store.index.index_file import IndexFile
from store.index.index_range import put_entries
from store.spark.assign import Piece, Span
from store.spark.decode import entries_path
from store.spark.entries import ENTRY_SIZE, entry_at, entry_count
from store.spark.errors import PipelineError


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """One finished index file in the staging directory, and the values the driver names it by."""

    file_no: int
    path: str
    keys: int
    first_timestamp: int
    end_phy_offset: int
    end_timestamp: int


def part_name(file_no: int) -> str:
    """The staging name of file ``file_no`` until the driver gives it its final name."""
    return f"part-{file_no:010d}"


def write_index_file(
    directory: Path, file_no: int, pieces: Iterable[Piece], hash_slot_num: int, index_num: int
) -> WrittenFile:
    """Create ``part_name(file_no)`` in ``directory`` holding exactly the entries of ``pieces``."""
    runs: list[Piece] = []
    prev: tuple[int, int, int] | None = None
    for piece in pieces:
        if piece.kind == "prev":
            prev = entry_at(piece.blob, 0)
        else:
            runs.append(piece)
    if not runs:
        raise PipelineError(f"index file {file_no} has no entries")
    if file_no > 0 and prev is None:
        raise PipelineError(f"index file {file_no} is missing the previous file's last entry")
    runs.sort(key=lambda p: p.first)
    path = Path(directory) / part_name(file_no)
    _, prev_offset, prev_ts = prev if prev is not None else (0, 0, 0)
    index_file = IndexFile.create(
        path, hash_slot_num, index_num, end_phy_offset=prev_offset, end_timestamp=prev_ts
    )
    keys = 0
    first_ts = -1
    try:
        for run in runs:
            if not run.blob:
                continue
            if first_ts < 0:
                first_ts = entry_at(run.blob, 0)[2]
            put = put_entries(index_file, run.blob)
            keys += put
            if put < entry_count(run.blob):
                raise PipelineError(f"index file {file_no} overflowed after {keys} keys")
        index_file.flush()
        header = index_file.header
    finally:
        index_file.close()
    return WrittenFile(file_no, str(path), keys, first_ts, header.end_phy_offset, header.end_timestamp)


def write_spans(
    directory: str, entries_dir: str, file_no: int, spans: list[Span], hash_slot_num: int, index_num: int
) -> WrittenFile:
    """Write index file ``file_no`` from its ``spans``, read from the decode tasks' entry files
    (``decode.decode_range_to_file``): a write task's whole input is this small list."""
    pieces = []
    for span in spans:
        size = (span.hi - span.lo) * ENTRY_SIZE
        with open(entries_path(entries_dir, span.range_index), "rb") as fh:
            blob = os.pread(fh.fileno(), size, span.lo * ENTRY_SIZE)
        if len(blob) != size:
            raise PipelineError(f"the entries of range {span.range_index} are cut short")
        pieces.append(Piece(span.file_no, span.kind, span.first, blob))
    return write_index_file(Path(directory), file_no, pieces, hash_slot_num, index_num)
