"""The two walks of a key query over the memory-mapped files: an index chain, then the records.

These are the hot loops of QUERY_MESSAGE, kept here as plain functions over buffers (no file
objects, no logging) so that a compiled twin (``store/index/_query_walk_fast.c``, loaded through
``protocol.accel``) can replace them name for name. The functions below are the readable reference:
the test suite runs against both and checks that they agree, on the golden store and on hostile
bytes.

Both only read inside ``length`` bytes of a buffer, the size the caller checked when it mapped the
file (a file that shrank under the map must not be read past its checked size), and every pointer
read from a file (a chain's prevIndex, a record's TOTALSIZE) is bounds-checked before it is followed.

``walk_chain`` is ``IndexFile.selectPhyOffset``'s loop plus two guards the broker lacks: it refuses to
revisit an entry (a corrupt chain that links forwards could loop forever) and it stops after
``budget`` entries, so one query on a hot key cannot take unbounded work. What the loop met that the
caller should report (a zeroed entry, a forward link) comes back as values; the caller logs.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from collections.abc import Sequence

from protocol.accel import load
from protocol.record_layout import TOTAL_SIZE_WIDTH
from store.commitlog import record
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from store.index.header import HEADER, IndexHeader, header_problem, is_time_matched

_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")

#: Why ``walk_chain`` stopped.
END = 0  #: the chain ended (no older entry, the time range passed, or ``room`` offsets found)
ZEROED = 1  #: an all-zero entry in a file that does not begin at offset 0: damage; chains end there
BUDGET = 2  #: ``budget`` entries were visited, or the ``deadline`` passed
OUTSIDE = 3  #: the next entry lies beyond ``length`` (a file shorter than its geometry)
LOOP = 4  #: the next entry was visited already (a corrupt chain)

#: A walk with a deadline looks at the clock after every this many entries it read (never before its
#: first, so every walk makes progress): ~3 us of the compiled walk between looks, so the clock
#: costs nothing measurable.
DEADLINE_EVERY = 256

#: What ``query_files`` met in a file, reported as ``(file number, kind, detail)`` for the caller to
#: log once per file (the details: SHORT the readable length, HEADER the header's six values, SLOT
#: (slot value, indexCount), CHAIN the entry that links forwards, ZEROED / OUTSIDE the entry).
SHORT = 10  #: the file is shorter than its geometry now (cut, or being replaced): left out
HEADER_PROBLEM = 11  #: the header is garbage (``header_problem``): left out, and it prunes nothing
SLOT = 12  #: the key's slot names an entry beyond indexCount: the slot reads as empty
CHAIN = 13  #: a chain links forwards (the walk stops before revisiting an entry)


def walk_chain(
    buf: bytes | memoryview,
    length: int,
    entries_at: int,
    start: int,
    key_hash: int,
    index_count: int,
    limit: int,
    begin_timestamp: int,
    begin_phy_offset: int,
    begin: int,
    end: int,
    room: int,
    budget: int,
    chain_start: int = -1,
    chain_visited: int = 0,
    deadline: int = 0,
) -> tuple[list[int], int, int, int, int]:
    """Walk the chain from entry ``start``: (offsets, visited, stop, stop_entry, forward_entry).

    ``offsets`` holds the phyOffsets of entries whose hash is ``key_hash`` and whose time is within
    ``[begin, end]``, newest first, at most ``room`` of them. ``visited`` counts entries read.
    ``stop`` is one of END, ZEROED, BUDGET, OUTSIDE, LOOP; ``stop_entry`` the entry it concerns (0 for
    END). ``forward_entry`` is the first entry seen linking forwards (0 if none): from there on the
    walk tracks what it visited and stops before revisiting an entry.

    ``chain_start`` and ``chain_visited`` continue a walk a budget stopped (``query_files``'
    resume): the chain began at entry ``chain_start`` and ``chain_visited`` of its entries were read
    before ``start``, so a loop back into them is caught as the uninterrupted walk would catch it.

    ``deadline`` (``time.monotonic_ns()``; 0 for none) stops the walk as a spent budget does, once
    it has passed, looked at after every ``DEADLINE_EVERY`` entries: the event loop's share of a
    query is bounded in time, whatever the pages cost to read.
    """
    offsets: list[int] = []
    if room <= 0:
        return offsets, 0, END, 0, 0
    length = min(length, len(buf))
    if entries_at < 0:
        entries_at = length  # nothing can be read
    unpack = _ENTRY.unpack_from
    current = start
    visited = 0
    forward = 0
    seen: set[int] | None = None
    while True:
        if current > limit:
            return offsets, visited, END, 0, forward
        if visited >= budget or (
            deadline and visited and visited % DEADLINE_EVERY == 0 and time.monotonic_ns() >= deadline
        ):
            return offsets, visited, BUDGET, current, forward
        pos = entries_at + current * INDEX_ENTRY_SIZE
        if current < 0 or pos + INDEX_ENTRY_SIZE > length:
            return offsets, visited, OUTSIDE, current, forward
        hash_read, phy_read, time_diff, prev = unpack(buf, pos)
        visited += 1
        if phy_read == 0 and prev == 0 and begin_phy_offset > 0 and hash_read == 0:
            # Offset 0 cannot be in a file that begins later: the entry was zeroed.
            return offsets, visited, ZEROED, current, forward
        if time_diff < 0:
            return offsets, visited, END, 0, forward
        time_read = begin_timestamp + time_diff * 1000
        if hash_read == key_hash and begin <= time_read <= end:
            offsets.append(phy_read)
            if len(offsets) >= room:
                return offsets, visited, END, 0, forward
        if prev <= 0 or prev > index_count or prev == current or time_read < begin:
            return offsets, visited, END, 0, forward
        if prev > current or seen is not None:
            # A sane chain only points backwards; a forward pointer could make the walk loop.
            if seen is None:
                forward = current
                first = start if chain_start < 0 else chain_start
                seen = _chain_prefix(buf, length, entries_at, first, chain_visited + visited)
            if prev in seen:
                return offsets, visited, LOOP, prev, forward
            seen.add(prev)
        current = prev


def _chain_prefix(buf: bytes | memoryview, length: int, entries_at: int, start: int, count: int) -> set[int]:
    """The first ``count`` entry numbers of the chain from ``start`` (all already read once).

    Each link is bounds-checked all the same: a resumed walk reads the prefix again, and a file
    overwritten in place between the two calls could link elsewhere by then.
    """
    seen: set[int] = set()
    current = start
    for _ in range(count):
        pos = entries_at + current * INDEX_ENTRY_SIZE
        if current < 0 or pos + INDEX_ENTRY_SIZE > length:
            break
        seen.add(current)
        current = _I32.unpack_from(buf, pos + 16)[0]
    return seen


def read_records(
    views: Sequence[memoryview],
    starts: Sequence[int],
    lengths: Sequence[int],
    max_offset: int,
    offsets: Sequence[int],
) -> list[memoryview | None]:
    """The whole record at each CommitLog offset (a view of the map), or None where there is none.

    ``views[i]`` maps the file starting at absolute offset ``starts[i]`` (ascending), of which only
    the first ``lengths[i]`` bytes may be read; nothing at or past ``max_offset`` (the written end)
    is a record. A record is whole when ``record.check`` passes (sizes and magic add up, within the
    file and the written end); BODYCRC is not checked, as the broker serves a body as stored.
    """
    out: list[memoryview | None] = []
    n = len(starts)
    for offset in offsets:
        out.append(_read_one(views, starts, lengths, n, max_offset, offset))
    return out


def read_checked(
    maps: Sequence[object],
    views: Sequence[memoryview],
    starts: Sequence[int],
    lengths: Sequence[int],
    max_offset: int,
    offsets: Sequence[int],
) -> tuple[list[memoryview | None], list[tuple[int, int]]]:
    """``read_records`` over files that may have shrunk since they were mapped: (records, shrunk).

    ``lengths`` are the mapped lengths. Each file an offset falls in is checked once, just before
    its first record is read: its current size (``maps[i].size()``, an ``fstat`` of the mapped inode;
    a None map reads as empty) cut to the mapped length is all that may be read of it. ``shrunk``
    lists ``(file number, readable length)`` of the files found shorter, for the caller to report.
    Files no offset falls in are not checked (nor read).
    """
    n = len(starts)
    checked = list(lengths)
    seen: set[int] = set()
    shrunk: list[tuple[int, int]] = []
    out: list[memoryview | None] = []
    for offset in offsets:
        if 0 <= offset < max_offset and n:
            i = bisect.bisect_right(starts, offset) - 1
            if i >= 0 and i not in seen:
                seen.add(i)
                mm = maps[i]
                try:
                    now = 0 if mm is None else min(mm.size(), max(lengths[i], 0))  # type: ignore[attr-defined]
                except (OSError, ValueError):
                    now = 0
                if now < lengths[i]:
                    shrunk.append((i, now))
                    checked[i] = now
        out.append(_read_one(views, starts, checked, n, max_offset, offset))
    return out, shrunk


def _read_one(
    views: Sequence[memoryview],
    starts: Sequence[int],
    lengths: Sequence[int],
    n: int,
    max_offset: int,
    offset: int,
) -> memoryview | None:
    if offset < 0 or offset >= max_offset or n == 0:
        return None
    lo, hi = 0, n  # bisect_right(starts, offset) - 1, spelled out as the compiled twin does it
    while lo < hi:
        mid = (lo + hi) // 2
        if offset < starts[mid]:
            hi = mid
        else:
            lo = mid + 1
    i = lo - 1
    if i < 0:
        return None
    view = views[i]
    pos = offset - starts[i]
    limit = min(lengths[i], len(view), max_offset - starts[i])
    if pos + TOTAL_SIZE_WIDTH > limit:
        return None
    size = _I32.unpack_from(view, pos)[0]  # TOTALSIZE, the first field
    if size <= 0 or pos + size > limit:
        return None
    if record.check(view, pos, pos + size) <= 0:
        return None
    return view[pos : pos + size]


#: Where a budget stopped ``query_files``, to continue from there (its ``resume`` argument):
#: (file number, next entry, indexCount, entry limit, beginTimestamp, beginPhyOffset, the chain's first
#: entry, entries of the chain read so far, offsets found so far, entries read in all, last_timestamp,
#: last_phy_offset). The file's header values are the ones the walk began with, so the continued walk
#: applies the very rules the uninterrupted one would have.
Resume = tuple[int, int, int, int, int, int, int, int, tuple[int, ...], int, int, int]


def query_files(
    maps: Sequence[object],
    fds: Sequence[int],
    headers: Sequence[tuple[int, int, int, int, int, int] | None] | None,
    size: int,
    hash_slot_num: int,
    index_num: int,
    key_hash: int,
    max_num: int,
    begin: int,
    end: int,
    budget: int,
    resume: Resume | None = None,
    deadline: int = 0,
    caches: Sequence[dict[int, bytes]] | None = None,
) -> tuple[list[int], int, bool, int, int, list[tuple[int, int, object]], Resume | None]:
    """The broker's ``queryOffset`` over a store's IndexFiles (``maps``, oldest first, all mapped
    whole at ``size`` bytes with one geometry): (offsets, visited, budget_exhausted,
    last_timestamp, last_phy_offset, events, resume).

    Files are searched newest first with the broker's pruning: a file is walked only if its time
    span overlaps ``[begin, end]``; the search stops at a file that begins before ``begin``, once
    ``max_num`` offsets were found, or when the chain walks have read ``budget`` entries in all.
    ``last_*`` are the newest file's end values (0 when it is cut short). A range with ``begin >
    end`` matches no entry's time: no chain is walked (the broker walks them and finds nothing).

    Each file's current size is checked just before its header is read: ``lseek(fds[i], 0,
    SEEK_END)`` on a descriptor of the mapped inode (the size ``mmap.size()`` gives, from an
    ``fstat`` that costs ~2.5x more), cut to the map's length; a file cut short under the map is
    left out (reading it could fault). A header that ``header_problem`` rejects is left out too
    and prunes nothing.
    ``headers[i]``, when given, is the header to use instead of the file's (a writer's own state).
    ``events`` says what the walk met, per file, for the caller to log (SHORT, HEADER_PROBLEM,
    SLOT, CHAIN, ZEROED, OUTSIDE); nothing is logged here.

    When the budget stopped the walk, ``resume`` says where (``Resume``; None otherwise, and when
    the stopped chain had linked forwards). Passed back with the same maps, fds, headers, geometry,
    key hash, ``max_num``, ``begin`` and ``end`` and a larger ``budget`` (counting the entries
    read already), the search continues there and answers exactly what one uninterrupted call with
    that budget answers: the event loop's short walk is not thrown away when a pool thread
    finishes the query. The file the walk stopped in is size-checked again before it is read.

    ``deadline`` (``time.monotonic_ns()``, 0 for none) stops the walks as a spent budget does once
    it has passed (``walk_chain``): answered as exhausted, with a resume point.

    ``caches`` (one per map, ``IndexFile.segments``; None for none) is where the compiled twin
    keeps the chain segments its long walks went through, to pass over those it can prove hold no
    answer and no stop for a later range (``_query_walk_core.h``, "Walked segments"): the answer is
    the plain walk's, entries passed over are counted as visited. This reference walks every entry
    and leaves them alone.
    """
    entries_at = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
    if hash_slot_num <= 0 or index_num <= 0 or size < entries_at or hash_slot_num > 1 << 40:
        raise ValueError("query_files: impossible geometry")
    offsets: list[int] = []
    events: list[tuple[int, int, object]] = []
    visited = 0
    last_ts = last_phy = 0
    slot_pos = INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * INDEX_SLOT_SIZE
    last = len(maps) - 1
    first = last
    if resume is not None:
        first = resume[0]
        offsets = list(resume[8])
        visited, last_ts, last_phy = resume[9], resume[10], resume[11]
    for i in range(first, -1, -1):
        mm = maps[i]
        try:
            now = min(os.lseek(fds[i], 0, os.SEEK_END), len(mm))  # type: ignore[arg-type]
        except (OSError, ValueError):
            now = 0  # a closed map or descriptor: nothing can be read
        if now < size:
            events.append((i, SHORT, now))
            continue
        if resume is not None and i == first:
            # Continue the walk the budget stopped, with the header values it began with.
            _, start, index_count, limit, begin_ts, begin_phy, chain_start, chain_visited = resume[:8]
        else:
            given = headers[i] if headers is not None else None
            header = IndexHeader(*(given if given is not None else HEADER.unpack_from(mm, 0)))  # type: ignore[arg-type]
            if i == last:
                last_ts, last_phy = header.end_timestamp, header.end_phy_offset
            if header_problem(header, hash_slot_num, index_num, last=i == last) is not None:
                events.append((i, HEADER_PROBLEM, tuple(header)))
                continue
            begin_ts, begin_phy = header.begin_timestamp, header.begin_phy_offset
            start = chain_start = -1
            chain_visited = 0
            if begin <= end and is_time_matched(header, begin, end):
                index_count = header.index_count
                limit = min(index_count, index_num - 1)
                slot_value = _I32.unpack_from(mm, slot_pos)[0]  # type: ignore[call-overload]
                if slot_value <= 0 or slot_value > index_count or index_count <= 1:
                    if slot_value > index_count > 1:
                        events.append((i, SLOT, (slot_value, index_count)))
                else:
                    start = chain_start = slot_value
        if start >= 0:
            found, walked, stop, stop_entry, forward = walk_chain(
                mm,  # type: ignore[arg-type]
                size,
                entries_at,
                start,
                key_hash,
                index_count,
                limit,
                begin_ts,
                begin_phy,
                begin,
                end,
                max_num - len(offsets),
                budget - visited,
                chain_start,
                chain_visited,
                deadline,
            )
            offsets.extend(found)
            visited += walked
            if forward:
                events.append((i, CHAIN, forward))
            if stop == ZEROED or stop == OUTSIDE:
                events.append((i, stop, stop_entry))
            elif stop == BUDGET:
                point: Resume | None = None
                if not forward:
                    point = (i, stop_entry, index_count, limit, begin_ts, begin_phy, chain_start,
                             chain_visited + walked, tuple(offsets), visited, last_ts, last_phy)  # fmt: skip
                return offsets, visited, True, last_ts, last_phy, events, point
        if begin_ts < begin or len(offsets) >= max_num:
            break
    return offsets, visited, False, last_ts, last_phy, events, None


#: The pure-Python references, kept reachable after the compiled twins replace the names below.
REFERENCE = {
    "walk_chain": walk_chain,
    "read_records": read_records,
    "read_checked": read_checked,
    "query_files": query_files,
}

_fast = load("store.index._query_walk_fast")
#: True when the compiled twins are in use (their walk is ~500x faster and releases the GIL).
COMPILED = _fast is not None
if _fast is not None:
    walk_chain = _fast.walk_chain  # type: ignore[assignment]
    read_records = _fast.read_records  # type: ignore[assignment]
    # A build older than this module lacks it (the reference then answers; the suite's twin tests
    # fail, asking for a rebuild): an import must not fail on a stale build.
    query_files = getattr(_fast, "query_files", query_files)
    read_checked = getattr(_fast, "read_checked", read_checked)
