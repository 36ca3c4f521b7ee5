"""An IndexFile's 40-byte header and the rules a query applies to it (trust it? search it?).

Kept apart from ``store.index.index_file`` so that the query walk over several files
(``store.index.query_walk.query_files`` and its compiled twin) applies exactly these rules without
importing the file class; ``store.index.index_file`` re-exports every name.

Layout (big-endian): beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
hashSlotCount i32, indexCount i32.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct(">qqqqii")


class IndexHeader(NamedTuple):
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


def header_problem(header: IndexHeader, hash_slot_num: int, index_num: int, *, last: bool) -> str | None:
    """Why a header cannot be trusted for queries, or None.

    Only states a writer never leaves, even half-way through ``putKey`` (which updates the header
    field by field while readers look): negative values, counts beyond the configured geometry, and
    an older file that is not full (the broker and the builder only start a new file when the last
    one is full). A header that fails this is garbage, and its timestamps must not prune the walk
    over the older files either.
    """
    h = header
    if min(h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset) < 0:
        return "negative timestamp or offset in the header"
    if not 0 <= h.index_count <= index_num:
        return f"indexCount {h.index_count} outside 0..maxIndexNum {index_num}"
    if not 0 <= h.hash_slot_count <= hash_slot_num:
        return f"hashSlotCount {h.hash_slot_count} outside 0..maxHashSlotNum {hash_slot_num}"
    if not last and h.index_count != index_num:
        return f"indexCount {h.index_count} in an older file, which must be full ({index_num})"
    if not last and h.begin_timestamp > h.end_timestamp:
        return f"beginTimestamp {h.begin_timestamp} after endTimestamp {h.end_timestamp}"
    return None


def is_time_matched(header: IndexHeader, begin: int, end: int) -> bool:
    """The broker's ``isTimeMatched``: the file's time span overlaps ``[begin, end]``."""
    b, e = header.begin_timestamp, header.end_timestamp
    return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)
