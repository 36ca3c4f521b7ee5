"""Which index file each entry lands in: the broker's roll-over rule as arithmetic on global numbers.

The broker puts keys one at a time into the last index file and rolls to a new file when ``putKey``
finds it full, so with entries numbered 0, 1, 2, ... in CommitLog order, file ``k`` holds exactly
entries ``[k * per_file, (k + 1) * per_file)`` with ``per_file = maxIndexNum - 1`` (entry 0 of every
file is unused). A new file starts from the previous file's end values, which are those of the
previous file's last entry, so every file can be written on its own once it knows that one entry.
The broker's de-duplication check (``offset < endPhyOffset``) never fires on a from-scratch rebuild
because offsets only grow along the CommitLog.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.spark.entries import ENTRY_SIZE


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of one range's blob that belongs to one index file.

    ``kind`` is ``"entries"`` for entries the file holds, or ``"prev"`` for the single entry that
    ends the previous file (the new file's begin/end header values). ``first`` is the global number
    of the piece's first entry, which orders pieces inside a file.
    """

    file_no: int
    kind: str
    first: int
    blob: bytes


def per_file(max_index_num: int) -> int:
    """Keys one index file holds: entry 0 is never used, so ``maxIndexNum - 1``."""
    if max_index_num < 2:
        raise ValueError(f"maxIndexNum must be at least 2, got {max_index_num}")
    return max_index_num - 1


def prefix_starts(counts: list[int]) -> list[int]:
    """Global number of each range's first entry (ranges in CommitLog order)."""
    starts: list[int] = []
    total = 0
    for count in counts:
        starts.append(total)
        total += count
    return starts


def file_count(total_entries: int, keys_per_file: int) -> int:
    """How many index files ``total_entries`` keys fill (the last one possibly partly)."""
    return -(-total_entries // keys_per_file)


@dataclass(frozen=True, slots=True)
class Span:
    """A run of one range's entries that belongs to one index file, by position: entries
    ``[lo, hi)`` of range ``range_index`` (``kind`` and ``first`` as in ``Piece``). The write stage
    reads them from the range's entry file, so no entry crosses the driver or a shuffle."""

    file_no: int
    kind: str
    first: int
    range_index: int
    lo: int
    hi: int


def cut(count: int, first: int, keys_per_file: int) -> list[tuple[int, str, int, int, int]]:
    """The roll-over rule on ``count`` entries whose first is global number ``first``:
    ``(file_no, kind, global first, lo, hi)`` per piece, ``lo``/``hi`` entry positions in the run.

    Also gives, for every file boundary inside the run, the ``prev`` piece the next file needs.
    """
    pieces: list[tuple[int, str, int, int, int]] = []
    i = 0
    while i < count:
        g = first + i
        file_no = g // keys_per_file
        stop = min(count, (file_no + 1) * keys_per_file - first)
        pieces.append((file_no, "entries", g, i, stop))
        last = first + stop - 1
        if (last + 1) % keys_per_file == 0:
            # The run holds the last entry of file_no: the next file begins from it.
            pieces.append((file_no + 1, "prev", last, stop - 1, stop))
        i = stop
    return pieces


def split_blob(blob: bytes, first: int, keys_per_file: int) -> list[Piece]:
    """Cut a range's blob (whose first entry is global number ``first``) into per-file pieces."""
    return [
        Piece(file_no, kind, g, blob[lo * ENTRY_SIZE : hi * ENTRY_SIZE])
        for file_no, kind, g, lo, hi in cut(len(blob) // ENTRY_SIZE, first, keys_per_file)
    ]


def spans_by_file(counts: list[int], keys_per_file: int) -> dict[int, list[Span]]:
    """Every index file's spans, for ranges of ``counts`` entries (in CommitLog order)."""
    files: dict[int, list[Span]] = {}
    for index, (first, count) in enumerate(zip(prefix_starts(counts), counts, strict=True)):
        for file_no, kind, g, lo, hi in cut(count, first, keys_per_file):
            files.setdefault(file_no, []).append(Span(file_no, kind, g, index, lo, hi))
    return files
