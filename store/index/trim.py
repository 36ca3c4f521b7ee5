"""Dropping IndexFiles that index only records past the CommitLog's end, when a writer opens a store.

When the CommitLog lost its tail (a file cut short, the last files removed), IndexFiles created after
the cut index only records that are gone: every entry points at or past the end. The index builder
rolls back such entries in the newest file (``IndexBuilder._repair``), but refuses a newest file none
of whose entries points at a record, since that is also what an index over another store looks like.
A writer knows the CommitLog is this store's (it holds the store's lock), so before the builder
opens, it removes the newest files whose first entry (``beginPhyOffset``) is at or past the end; the
builder then repairs the file before them and indexes new records from there.

The 4.9.7 broker trims nothing here: its recovery truncates the consume queues only
(``truncateDirtyLogicFiles``), and its ``IndexService.buildIndex`` skips every record below the last
file's ``endPhyOffset``, so messages written where the lost ones were are not found by key there.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from store.errors import StoreError
from store.index.index_file import IndexFile, header_problem

__all__ = ["drop_index_files_past"]

log = logging.getLogger("store.index")


def drop_index_files_past(index_dir: Path, hash_slot_num: int, index_num: int, end: int) -> list[Path]:
    """Remove the newest IndexFiles whose every entry points at or past CommitLog offset ``end``."""
    try:
        names = sorted(n for n in os.listdir(index_dir) if n.isdigit())
    except FileNotFoundError:
        return []
    dropped: list[Path] = []
    for name in reversed(names):
        path = index_dir / name
        try:
            f = IndexFile.open(path, hash_slot_num, index_num)
        except StoreError:
            break  # not ours to judge here: the builder and fsck report it
        try:
            h = f.header
            damaged = header_problem(h, hash_slot_num, index_num, last=not dropped) is not None
        finally:
            f.close()
        if damaged or h.begin_phy_offset < end:
            break  # a damaged header is left to the builder's repair and to fsck
        path.unlink()
        dropped.append(path)
    if dropped:
        log.warning(
            "the CommitLog ends at offset %d, before every record %d index file(s) point at (%s): removed, "
            "so the records written from here are indexed (the broker would keep them and skip indexing "
            "below their end)",
            end,
            len(dropped),
            ", ".join(p.name for p in reversed(dropped)),
        )
    return dropped
