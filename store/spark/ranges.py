"""Split a CommitLog into ranges that start on record boundaries, one planning task per file.

Every CommitLog file starts on a record boundary (the broker pads the end of a file with a blank
record), so files are planned independently and in parallel. Inside a file, the planner hops from
record to record by TOTALSIZE (checking the magic code, nothing else: the decode stage checks each
record fully; ``record.hop``, compiled, takes the records between two cuts in one call) and cuts a
new range every ``target_bytes``. The hop also finds where the written
data ends: an end-of-file blank record or a full file, or, in the last file, the first bytes that are
not a record.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    SIZE_MAGIC,
    TOTAL_SIZE_WIDTH,
)
from store.commitlog import record
from store.commitlog.record import NO_SPAN, hop, hop_span, store_timestamp

_MAGIC_BYTES = tuple(struct.pack(">i", m) for m in (MAGIC_CODE_V1, MAGIC_CODE_V2))

#: Ranges of about this many bytes keep tasks short enough for a visible progress bar and small
#: enough that one task's entries fit comfortably in an executor's memory.
DEFAULT_RANGE_BYTES = 64 * 1024 * 1024

#: How far past each nominal cut a sampled plan looks for a record (more than the broker's largest
#: message, 4 MiB by default): none there means the data ended (zeros), and sampling stops.
SAMPLE_SEARCH_BYTES = 8 * 1024 * 1024

#: A sampled plan finds where a file's data ends by hopping from a record sampled this far before
#: the file's end, not from its last cut: the hop is a serial stretch on the driver, and from the
#: last cut of 256 MiB ranges it crossed ~0.1 s of records per file (issue 22's "plan stage rose").
TAIL_SAMPLE_BYTES = 2 * SAMPLE_SEARCH_BYTES

#: Ranges sized by the cores (``range_bytes_for``): about this many tasks per core, so a slow core
#: (shared vCPUs) or a range with more keys leaves the others something to take, ...
TASKS_PER_CORE = 2
#: ... but none smaller than this (a PySpark task costs ~15-35 ms here even doing nothing) ...
MIN_AUTO_RANGE_BYTES = 16 * 1024 * 1024
#: ... nor larger than this (a task's entries, ~50 MB per GiB of ~1 KiB records, stay small).
MAX_AUTO_RANGE_BYTES = 256 * 1024 * 1024

STOP_BLANK = "blank"  # an end-of-file blank record: the file is complete
STOP_FULL = "full"  # the last record ends within 8 bytes of the file's end
STOP_UNWRITTEN = "unwritten"  # zeros: the writer has not got here yet
STOP_INVALID = "invalid"  # bytes that are not a record header
STOP_UNREADABLE = "unreadable"  # the file cannot be opened or mapped (detail: why)


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """One file of the queue: its path and the CommitLog offset of its first byte."""

    path: str
    start: int
    length: int


@dataclass(frozen=True, slots=True)
class FilePlan:
    """Where ranges start inside one file, where its records end, and why they end there."""

    file: CommitLogFile
    cuts: tuple[int, ...]
    end: int
    stop: str
    detail: str
    #: Cuts or the end were found from sampled records (``plan_file_sampled``), not hopped to from
    #: the file's start: the decode must prove them (``rebuild.sampled_plan_holds``).
    sampled: bool = False
    #: With ``plan_file(..., spans=True)``: per cut, the smallest and largest STORETIMESTAMP of the
    #: records of the range it starts (``NO_SPAN`` for a range without records); else empty.
    spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class CommitLogRange:
    """Records ``[start, end)`` of one file (absolute CommitLog offsets); ``index`` orders ranges.

    ``last``: the file is the last holding data (later files were only created ahead), where (as in
    the sequential walk) a bad record is skipped only when whole records follow it directly, never by
    searching for the next magic code.
    """

    index: int
    path: str
    file_start: int
    start: int
    end: int
    last: bool = False


def range_bytes_for(total_bytes: int, cores: int) -> int:
    """Bytes per range for ``total_bytes`` of CommitLog on ``cores`` task slots: ``TASKS_PER_CORE``
    ranges per core, within ``MIN_AUTO_RANGE_BYTES`` .. ``MAX_AUTO_RANGE_BYTES``."""
    share = -(-max(total_bytes, 1) // (TASKS_PER_CORE * max(cores, 1)))
    return min(MAX_AUTO_RANGE_BYTES, max(MIN_AUTO_RANGE_BYTES, share))


def list_files(directory: str | os.PathLike[str]) -> list[CommitLogFile]:
    """The CommitLog's files in offset order (names are 20-digit start offsets)."""
    files = []
    for name in sorted(os.listdir(directory)):
        if len(name) == 20 and name.isdigit():
            path = Path(directory) / name
            files.append(CommitLogFile(str(path), int(name), path.stat().st_size))
    return files


def plan_file(
    file: CommitLogFile,
    target_bytes: int = DEFAULT_RANGE_BYTES,
    begin: int | None = None,
    *,
    spans: bool = False,
) -> FilePlan:
    """Hop through one file's records and cut it into ranges of about ``target_bytes``; from the
    record boundary ``begin`` (an absolute offset inside the file) on when given, the bytes before
    it not touched. With ``spans``, each range's store-time span is noted too (``FilePlan.spans``)."""
    return _plan(file, target_bytes, sampled=False, begin=begin, spans=spans)


def plan_file_sampled(file: CommitLogFile, target_bytes: int = DEFAULT_RANGE_BYTES) -> FilePlan:
    """``plan_file`` without hopping through the whole file: cuts are *candidates*.

    The hop reads one record header per record, each in another cache line and page: ~0.4 s per GiB
    here, a serial stretch as long as decoding the file (it bounds ``local[2]`` below 1.5x the
    sequential builder). Instead, every ``target_bytes`` the first position whose record checks in
    full at its own offset (magic code, PHYSICALOFFSET, BODYCRC: ``record.check``) is taken as a cut,
    and the hop runs only from the last cut to the end of the data. A candidate is a record boundary
    of the file's walk unless a message body holds a whole record that checks at exactly its own
    offset, so the driver accepts the plan only when the decode proves it (``sampled_plan_holds``)
    and plans again with ``plan_file`` otherwise. Where the data ends is found the same way: by
    hopping from a record sampled ``TAIL_SAMPLE_BYTES`` before the file's end (when there is one
    past the last cut), which the decode of the last range proves by arriving there exactly.
    """
    return _plan(file, target_bytes, sampled=True)


def _first_record(mm: mmap.mmap, pos: int, stop: int, base: int) -> int | None:
    """The first position in ``[pos, stop)`` where a record checks in full at its own offset.

    Magic codes are looked for in windows growing from 4 KiB, so that a magic code the store never
    uses (V2 in a V1 store) costs a few KiB of search per cut, not the rest of the range.
    """
    length = len(mm)
    search = pos + TOTAL_SIZE_WIDTH  # the magic code follows TOTALSIZE
    limit = min(stop + TOTAL_SIZE_WIDTH, length)
    window = 4096
    while search < limit:
        upto = min(search + window, limit)
        hits = [h for h in (mm.find(m, search, upto) for m in _MAGIC_BYTES) if h >= 0]
        if not hits:
            search = max(search + 1, upto - len(_MAGIC_BYTES[0]) + 1)  # a code may straddle `upto`
            window *= 2
            continue
        at = min(hits) - TOTAL_SIZE_WIDTH
        if record.check(mm, at, length, base + at, check_crc=True) > 0:
            return at
        search = min(hits) + 1
    return None


def _plan(
    file: CommitLogFile, target_bytes: int, *, sampled: bool, begin: int | None = None, spans: bool = False
) -> FilePlan:
    if file.length == 0:
        return FilePlan(file, (), file.start, STOP_UNWRITTEN, "empty file")
    try:
        fh = open(file.path, "rb")
    except OSError as exc:
        # The sequential walk keeps such a file as a hole and goes on with the next: so does the plan.
        return FilePlan(file, (), file.start, STOP_UNREADABLE, exc.strerror or str(exc))
    with fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        length = len(mm)
        size_and_magic = SIZE_MAGIC.unpack_from
        pos = 0 if begin is None else begin - file.start
        cut = pos
        cuts = [file.start + pos]
        sampled_any = False
        #: The finished ranges' store-time spans, and the current range's (``spans`` only).
        done: list[tuple[int, int]] = []
        lo, hi = NO_SPAN

        def plan(end: int, stop: str, detail: str = "") -> FilePlan:
            kept = (*done, (lo, hi)) if spans else ()
            return FilePlan(file, tuple(cuts), file.start + end, stop, detail, sampled_any, kept)

        if sampled:
            for nominal in range(target_bytes, length, target_bytes):
                at = max(nominal, pos + 1)
                found = _first_record(mm, at, at + min(target_bytes, SAMPLE_SEARCH_BYTES), file.start)
                if found is None:
                    break
                pos = found
                cuts.append(file.start + pos)
            tail_from = length - TAIL_SAMPLE_BYTES
            if tail_from > pos:
                tail = _first_record(mm, tail_from, length, file.start)
                if tail is not None:
                    pos = tail  # hop from here to the end of the data, not from the last cut
            sampled_any = len(cuts) > 1 or pos > 0
            cut, target_bytes = pos, length + 1  # the hop from here cuts no more
        while True:
            if pos - cut < target_bytes:
                # every record up to the next cut, or a stop
                if spans:
                    pos, first, last = hop_span(mm, pos, cut + target_bytes)
                    lo, hi = min(lo, first), max(hi, last)
                else:
                    pos = hop(mm, pos, cut + target_bytes)
            if pos + BLANK_SIZE > length:
                return plan(pos, STOP_FULL)
            size, magic = size_and_magic(mm, pos)
            if magic == BLANK_MAGIC_CODE:
                return plan(pos, STOP_BLANK)
            if (magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2) or size < MIN_RECORD_SIZE:
                if size == 0 and magic == 0:
                    return plan(pos, STOP_UNWRITTEN)
                return plan(pos, STOP_INVALID, f"TOTALSIZE {size}, MAGICCODE {magic & 0xFFFFFFFF:#010x}")
            if pos + size > length:
                return plan(pos, STOP_INVALID, f"TOTALSIZE {size} runs past the end of the file")
            if pos - cut >= target_bytes:
                cut = pos
                cuts.append(file.start + pos)
                done.append((lo, hi))
                lo, hi = NO_SPAN
                # The hop touched every page so far (records are small): out of this process's
                # resident memory, where a whole 1 GiB file would otherwise pile up.
                mm.madvise(mmap.MADV_DONTNEED, 0, pos - pos % mmap.PAGESIZE)
            if spans:
                ts = store_timestamp(mm, pos)  # a record checked as hop_span checks one
                lo, hi = min(lo, ts), max(hi, ts)
            pos += size


def plan_files_on(
    sc: Any, files: list[CommitLogFile], target_bytes: int, *, sampled: bool = False
) -> list[FilePlan]:
    """``plan_file`` (``plan_file_sampled`` with ``sampled``) for every file as Spark tasks (at most 4
    per core), the plans collected in file order: the "plan ranges" stage every pipeline over the
    CommitLog starts with. ``sc`` is a SparkContext (not imported here: planning needs no Spark)."""
    plan = plan_file_sampled if sampled else plan_file
    return (
        sc.parallelize(files, min(len(files), 4 * sc.defaultParallelism))
        .map(lambda f: plan(f, target_bytes))
        .collect()
    )


def ranges_from_plans(plans: list[FilePlan]) -> list[CommitLogRange]:
    """Turn per-file plans (in file order) into numbered ranges; empty ranges are dropped."""
    ranges: list[CommitLogRange] = []
    for plan in plans:
        bounds = [*plan.cuts, plan.end]
        for start, end in itertools.pairwise(bounds):
            if end > start:
                ranges.append(CommitLogRange(len(ranges), plan.file.path, plan.file.start, start, end))
    return ranges
