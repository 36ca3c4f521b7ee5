"""This machine's physical memory, and the part of it the broker counts a pull as reading "in memory".

``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`` and ``accessMessageInMemoryMaxRatio`` (40 by default): a
4.9.7 broker takes a record less than that percent of physical memory behind the CommitLog's end
as still in the page cache (``DefaultMessageStore.checkInDiskByCommitOffset``). Its pulls
(``getMessage``'s ``isTheBatchFull``: the in-memory or in-disk batch limits, "suggest pulling from
slave"), a new consumer group's first offset (``checkInDiskByConsumeOffset``) and, under
``serve --writable``, how much of the CommitLog's tail the writer keeps cached when broker.conf
sets the ratio (``store.config.store_config``) all use the one figure here.
"""

from __future__ import annotations

import os

_PHYSICAL_MEMORY: int | None = None


def total_physical_memory() -> int:
    """``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``: this machine's RAM in bytes (read once)."""
    global _PHYSICAL_MEMORY
    if _PHYSICAL_MEMORY is None:
        try:
            _PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            _PHYSICAL_MEMORY = 8 << 30
    return _PHYSICAL_MEMORY


def in_memory_bytes(ratio: int) -> int:
    """CommitLog bytes behind its end a pull still reads "in memory": ``ratio`` percent of physical
    memory, computed as the broker does (``(long) (TOTAL * (ratio / 100.0))``; not above zero for a
    ratio that is not, when the broker counts nothing as in memory)."""
    return int(total_physical_memory() * (ratio / 100.0))
