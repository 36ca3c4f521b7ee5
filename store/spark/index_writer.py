"""Write one index file from its entries: the work each write task does, with the store's IndexFile.

A task receives every piece of one file (its runs of entries, in any order, and the previous file's
last entry). It creates the file the way the broker creates a successor (begin and end header values
taken from the previous file's end) and replays ``putKey`` for each entry in global order through
``IndexFile.put_hash``, so the layout, slot chains, time differences and header rules all come from
the one implementation the sequential builder uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from store.index.index_file import IndexFile
from store.spark.assign import Piece
from store.spark.entries import ENTRY, entry_at
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
        put = index_file.put_hash
        for run in runs:
            for key_hash, offset, store_ts in ENTRY.iter_unpack(run.blob):
                if not put(key_hash, offset, store_ts):
                    raise PipelineError(f"index file {file_no} overflowed after {keys} keys")
                if first_ts < 0:
                    first_ts = store_ts
                keys += 1
        index_file.flush()
        header = index_file.header
    finally:
        index_file.close()
    return WrittenFile(file_no, str(path), keys, first_ts, header.end_phy_offset, header.end_timestamp)


def write_partition(
    pieces: Iterable[tuple[int, Piece]], directory: str, hash_slot_num: int, index_num: int
) -> list[WrittenFile]:
    """Spark ``mapPartitions`` body: a partition holds the pieces of one (or more) files."""
    by_file: dict[int, list[Piece]] = {}
    for file_no, piece in pieces:
        by_file.setdefault(file_no, []).append(piece)
    return [
        write_index_file(Path(directory), file_no, file_pieces, hash_slot_num, index_num)
        for file_no, file_pieces in sorted(by_file.items())
    ]
