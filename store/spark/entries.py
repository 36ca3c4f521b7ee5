"""The packed index entry the pipeline ships between stages: key hash, CommitLog offset, store time.

A range of the CommitLog decodes into one ``bytes`` blob of these 20-byte records, in CommitLog
order. Shipping blobs instead of Python tuples keeps the shuffle to a few large objects (no per-key
pickling) and lets any later stage slice a run of entries by arithmetic alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from store.index.index_range import PACKED

# key hash (i32, already Math.abs'ed), CommitLog offset (i64), store timestamp in ms (i64): the
# layout ``index_range`` packs into a bytearray target, so a decode task's blob is its output as is.
ENTRY = PACKED
ENTRY_SIZE = ENTRY.size


def pack_entries(entries: Iterator[tuple[int, int, int]] | list[tuple[int, int, int]]) -> bytes:
    """Pack ``(hash, offset, store_ts)`` triples into one blob, order kept."""
    out = bytearray()
    pack = ENTRY.pack
    for key_hash, offset, store_ts in entries:
        out += pack(key_hash, offset, store_ts)
    return bytes(out)


def entry_count(blob: bytes) -> int:
    """How many entries a blob holds."""
    return len(blob) // ENTRY_SIZE


def entry_at(blob: bytes, index: int) -> tuple[int, int, int]:
    """The ``index``-th entry of a blob."""
    return ENTRY.unpack_from(blob, index * ENTRY_SIZE)


def iter_entries(blob: bytes) -> Iterator[tuple[int, int, int]]:
    """Every entry of a blob, in order."""
    return ENTRY.iter_unpack(blob)
