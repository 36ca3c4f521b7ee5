"""The read behind VIEW_MESSAGE_BY_ID: the record at one CommitLog offset, checked and copied out.

``copy_record`` is the whole of it in one call, kept here as a plain function over the maps (no file
objects, no logging) so that a compiled twin (``store/commitlog/_view_read_fast.c``, loaded through
``protocol.accel``) can replace it name for name: a VIEW is the cheapest request the server answers,
and in Python the bisect, the file's size check and the slicing cost more than the rest of the
request. The function below is the readable reference; the tests check that both agree on the
golden store and on hostile input.

The rules are ``CommitLog.read_record``'s (the broker's ``selectOneMessageByOffset``): the size word
is read at ``offset`` and the record must lie within the written data; an offset inside a record
yields None or that garbage size's bytes only if they fit, never an error. Two things are added:

- the answer is a copy (``bytes``): the server copies a record before queuing it anyway (a view would
  pin the map while the answer waits in a socket buffer), and copying here saves making the view;
- a size over ``max_size`` is no record: the server cannot send a frame that large, and such a size
  can only be a garbage word read inside a record (up to 2 GiB), so it is refused before anything is
  copied.

Safe-length contract (``store/commitlog/mapped_files.py``): the file's current size is taken from its map
(``mmap.size()``, an ``fstat`` of the mapped inode) on every call, and nothing past it is read. A
file found shorter than its mapped length is reported through ``shrunk(index, size)`` (the caller
logs it once) and read up to its new end.
"""

from __future__ import annotations

import bisect
import mmap
from collections.abc import Callable, Sequence

from protocol.accel import load
from protocol.record_layout import TOTAL_SIZE_WIDTH


def current_size(mm: mmap.mmap | None) -> int:
    """The size of the file under ``mm`` now (0 for no map, or a map already closed)."""
    if mm is None:
        return 0
    try:
        return mm.size()
    except (OSError, ValueError):
        return 0


def copy_record(
    maps: Sequence[mmap.mmap | None],
    starts: Sequence[int],
    lengths: Sequence[int],
    max_offset: int,
    offset: int,
    max_size: int,
    shrunk: Callable[[int, int], object],
) -> bytes | None:
    """A copy of the whole record at CommitLog ``offset``, or None where there is none.

    ``maps[i]`` maps the file that starts at absolute offset ``starts[i]`` (ascending) and was
    ``lengths[i]`` bytes long when mapped; nothing at or past ``max_offset`` (the written end) is
    data. A record is the size word at ``offset`` (positive) and that many bytes, all within the
    file's readable part (its mapped length cut to its current size, and to the written end), and no
    more than ``max_size`` bytes.
    """
    if offset < 0 or offset >= max_offset:
        return None
    i = bisect.bisect_right(starts, offset) - 1
    if i < 0:
        return None
    length = lengths[i]
    start = starts[i]
    if offset >= start + length:
        return None  # past the end of that file (a gap between files)
    mm = maps[i]
    now = current_size(mm)
    if now < length:
        shrunk(i, now)
        length = now
    if mm is None or length <= 0:
        return None  # no map, a closed one, or a file cut to nothing
    # Never past the map itself either, whatever ``lengths`` claims.
    limit = min(length, max_offset - start, len(mm))
    pos = offset - start
    if pos + TOTAL_SIZE_WIDTH > limit:
        return None
    size = int.from_bytes(mm[pos : pos + TOTAL_SIZE_WIDTH], "big", signed=True)  # TOTALSIZE is first
    if size <= 0 or pos + size > limit or size > max_size:
        return None
    return mm[pos : pos + size]


#: The pure-Python reference, kept reachable after the compiled twin replaces the name below.
REFERENCE = {"copy_record": copy_record}

_fast = load("store.commitlog._view_read_fast")
#: True when the compiled twin is in use.
COMPILED = _fast is not None
if _fast is not None:
    copy_record = _fast.copy_record  # type: ignore[assignment]
