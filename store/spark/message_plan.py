"""Plan a message-table read: which stores, which CommitLog ranges of each, and what each range keeps.

A path names one broker's store: a store directory (with its ``broker.conf`` inside when there is
one) or a ``broker.conf`` file (the store where its ``storePathRootDir`` says). The broker's name is
the file's ``brokerName``, else the directory's name.

Ranges are the CommitLog ranges every pipeline plans (``ranges.plan_file``, ``rebuild.check_plans``
refusing a hole or a damaged file, ``export.without_torn_tail`` leaving a torn last record out).
With a topic filter, the topic's ConsumeQueues say where its records are: a read task then takes
only the records its queue entries name (each checked in full at its own offset), and a range
holding none is not read at all. Records past the queues' written end (the broker's reput has not
dispatched them yet) are read in full. The queues hold no prepared or rolled-back transaction
records (the broker does not dispatch them), so such a read keeps only records the broker queues
(``RowFilter.queued_only``): what it returns then does not depend on which ranges held other records.

With a topic filter and ``storeTimestamp`` bounds, each of the topic's queues is cut to the entries
whose records fall in the bounds by a binary search over the queue, reading only the probed records'
STORETIMESTAMP (the broker's ``getOffsetInQueueByTime``, which ``searchOffset`` and resetting a
consumer by time use). Like the broker, this relies on store times that do not go down along a
queue: a 4.9.7 broker stamps STORETIMESTAMP inside its CommitLog put lock precisely so they are
ordered. A store that breaks this (a clock set back while the broker ran) is read with
``useConsumeQueues=false``, which checks every record's time.

With ``storeTimestamp`` bounds and no topic filter (or ``useConsumeQueues=false``), the planner's hop,
which reads every record's header to cut the ranges anyway, notes the smallest and largest store
time of each range, and only the ranges whose span reaches into the bounds are read
(``in_time_window``). The first and last records' times would not do: the broker stamps
STORETIMESTAMP with ``System.currentTimeMillis()`` inside its put lock, so a clock set back stamps a
record earlier than the one before it, and the broker's own time lookups (``queryMessage``'s
``isTimeMatched`` over the IndexFile headers' first and last times, ``getOffsetInQueueByTime``'s
binary search) would then miss it. Smallest and largest bound every record whatever the clock did,
so no record in the window is lost; what is saved is the decoding of every range outside it.

With a key lookup (the ``key`` option, a ``uniqueKey`` filter), the IndexFiles name the records
(``key_lookup``) and only those, plus the records past the index's end, are read.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.commitlog.record import store_timestamp
from store.config.store_config import StoreConfig, parse_properties
from store.consumequeue.builder import safe_topic_dir
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from store.spark.errors import PipelineError
from store.spark.export import export_ranges
from store.spark.job import commitlog_files
from store.spark.message_rows import RowFilter
from store.spark.ranges import CommitLogFile, CommitLogRange, FilePlan, plan_file

#: CommitLog bytes per read task unless the ``rangeMiB`` option says otherwise: a task's rows (bodies
#: included) are held in its Python worker before Spark takes them.
DEFAULT_TABLE_RANGE_BYTES = 16 * 1024 * 1024

_ENTRY = struct.Struct(">qi")
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class StoreSource:
    """One broker's store: its name (the ``brokerName`` column) and configuration."""

    broker: str
    config: StoreConfig


@dataclass(frozen=True, slots=True)
class TableRange:
    """One read task: a CommitLog range of one broker's store, and what it keeps."""

    broker: str
    rng: CommitLogRange
    row_filter: RowFilter
    #: Only the records at these offsets (a topic's ConsumeQueue entries), not the whole range.
    offsets: tuple[int, ...] | None = None


def open_store(path: str | os.PathLike[str], broker: str | None = None) -> StoreSource:
    """The store ``path`` names (a directory, or a broker.conf file); ``broker`` overrides its name."""
    where = Path(path).expanduser()
    if where.is_file():
        conf: Path | None = where
        config = StoreConfig.load(where)
    elif where.is_dir():
        conf = where / "broker.conf" if (where / "broker.conf").is_file() else None
        root = where.resolve()
        overrides: dict[str, object] = {
            "store_path_root_dir": root,
            "store_path_commit_log": root / "commitlog",
        }
        config = (
            StoreConfig.load(conf, overrides=overrides)
            if conf is not None
            else StoreConfig.for_store(root, **overrides)
        )
    else:
        raise PipelineError(f"no store at {where}: neither a store directory nor a broker.conf")
    if broker is None:
        named = parse_properties(conf.read_text(encoding="utf-8", errors="replace")) if conf else {}
        broker = named.get("brokerName", "").strip() or config.store_path_root_dir.name
    return StoreSource(broker, config)


class _StoreTimes:
    """STORETIMESTAMP (or TOTALSIZE) of the record at a CommitLog offset, read with one small
    ``pread`` of its fixed header: the record itself is not brought into memory."""

    #: Enough of a record's head for STORETIMESTAMP with both hosts IPv6 (it ends at byte 76).
    HEAD = 80

    def __init__(self, files: list[CommitLogFile]) -> None:
        self.files = files
        self.starts = [f.start for f in files]
        self.fds: dict[int, int] = {}
        #: How many records were probed (a test's and the benchmark's count of what planning read).
        self.probes = 0

    def _head(self, offset: int) -> bytes | None:
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            return None
        try:
            fd = self.fds.get(i)
            if fd is None:
                fd = self.fds[i] = os.open(self.files[i].path, os.O_RDONLY)
                # A probe reads 80 bytes: no read-ahead of the records around it.
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            self.probes += 1
            return os.pread(fd, self.HEAD, offset - self.starts[i])
        except OSError:
            return None

    def at(self, offset: int) -> int | None:
        """The store time of the record at ``offset``; None when it cannot be read there."""
        head = self._head(offset)
        try:
            return None if head is None else store_timestamp(head, 0)
        except struct.error:
            return None

    def size(self, offset: int) -> int | None:
        """TOTALSIZE of the record at ``offset``; None when it cannot be read there."""
        head = self._head(offset)
        return _SIZE.unpack_from(head)[0] if head is not None and len(head) >= 4 else None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _cut_by_time(
    entries: list[tuple[int, int]], times: _StoreTimes, lo: int | None, hi: int | None
) -> list[tuple[int, int]]:
    """The part of one queue's ``entries`` (in queue order) whose store times lie in ``[lo, hi]``,
    found by binary search (store times do not go down along a queue; module docstring). A probe
    that cannot be read keeps the whole queue: its records are then read and checked one by one."""

    def first(keep_below: Callable[[int], bool]) -> int | None:
        a, b = 0, len(entries)
        while a < b:
            mid = (a + b) // 2
            ts = times.at(entries[mid][0])
            if ts is None:
                return None
            if keep_below(ts):
                a = mid + 1
            else:
                b = mid
        return a

    start = 0 if lo is None else first(lambda ts: ts < lo)
    end = len(entries) if hi is None else first(lambda ts: ts <= hi)
    if start is None or end is None:
        return entries
    return entries[start:end]


def plan_store(
    source: StoreSource, row_filter: RowFilter, range_bytes: int = DEFAULT_TABLE_RANGE_BYTES
) -> tuple[list[TableRange], list[str]]:
    """The read tasks of one store and the planner's warnings (a torn last record left out).

    Without a topic filter (or with ``useConsumeQueues=false``) every file is planned by hopping
    through its records. With one, only the records the topic's queue entries name are read
    (``entry_tasks``), plus the records past the queues' coverage, planned from there on
    (``tail_ranges``): the rest of the CommitLog is not read at all, not even by the planner.
    """
    files = commitlog_files(source.config)
    if row_filter.indexed_only and (row_filter.keys is not None or row_filter.unique_keys is not None):
        planned = _plan_by_index(source, files, row_filter, range_bytes)
        if planned is not None:
            return planned
        # No usable index: every range is read, the key checked on each record.
    if row_filter.topics is not None and row_filter.queued_only:
        _check_contiguous(files)
        entries, covered = queue_offsets(
            source.config, row_filter.topics, row_filter.min_store_ts, row_filter.max_store_ts
        )
        return _entry_plan(source, files, row_filter, entries, covered, range_bytes)
    timed = row_filter.min_store_ts is not None or row_filter.max_store_ts is not None
    plans = [plan_file(f, range_bytes, spans=timed) for f in files]
    ranges, warnings = export_ranges(plans)
    if timed:
        ranges = in_time_window(plans, ranges, row_filter.min_store_ts, row_filter.max_store_ts)
    return [TableRange(source.broker, rng, row_filter) for rng in ranges], warnings


def in_time_window(
    plans: list[FilePlan], ranges: list[CommitLogRange], lo: int | None, hi: int | None
) -> list[CommitLogRange]:
    """The ``ranges`` that may hold a record stored within ``[lo, hi]``: those whose records' store
    times (smallest to largest, ``FilePlan.spans``, read by the planner's hop over every record's
    header) reach into it. Exact, clock steps included: a range is left out only when none of its
    records is in the window, whatever order their times come in (module docstring)."""
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for plan in plans:
        for start, span in zip(plan.cuts, plan.spans, strict=True):
            spans[plan.file.path, start] = span
    kept = []
    for rng in ranges:
        # every range starts at a cut of its file's plan (the torn tail's trim moves only an end)
        first, last = spans[rng.path, rng.start]
        if first <= last and (lo is None or last >= lo) and (hi is None or first <= hi):
            kept.append(rng)
    return kept


def _plan_by_index(
    source: StoreSource, files: list[CommitLogFile], row_filter: RowFilter, range_bytes: int
) -> tuple[list[TableRange], list[str]] | None:
    """Read tasks for a key lookup: the records the IndexFiles name for the values asked (the
    smaller of the ``keys`` and ``unique_keys`` sets: a row must match both), then the records past
    the index's end in full. None when the store has no usable index."""
    from store.spark.key_lookup import index_offsets, store_topics

    sets = [v for v in (row_filter.keys, row_filter.unique_keys) if v is not None]
    values = min(sets, key=len)
    topics = row_filter.topics if row_filter.topics is not None else store_topics(source.config)
    _check_contiguous(files)
    found = index_offsets(source.config, files, topics, values)
    if found is None:
        return None
    offsets, covered = found
    times = _StoreTimes(files)
    try:
        entries = []
        for phy in offsets:
            if phy >= covered:
                continue  # read with the tail
            size = times.size(phy)
            entries.append((phy, size if size is not None and size > 0 else 1))
    finally:
        times.close()
    return _entry_plan(source, files, row_filter, entries, covered, range_bytes)


def _entry_plan(
    source: StoreSource,
    files: list[CommitLogFile],
    row_filter: RowFilter,
    entries: list[tuple[int, int]],
    covered: int,
    range_bytes: int,
) -> tuple[list[TableRange], list[str]]:
    """Read tasks for the records ``entries`` name ((offset, size), below ``covered``), then every
    record from ``covered`` on in full (what the queues or the index do not list yet)."""
    tail, warnings = tail_ranges(files, covered, range_bytes)
    tasks = [
        TableRange(source.broker, rng, row_filter, offs)
        for rng, offs in entry_tasks(files, entries, range_bytes)
    ]
    tasks.extend(TableRange(source.broker, rng, row_filter) for rng in tail)
    return tasks, warnings


def _check_contiguous(files: list[CommitLogFile]) -> None:
    """Refuse a CommitLog whose files leave a hole (from their names and sizes: nothing is read)."""
    for prev, nxt in itertools.pairwise(files):
        if nxt.start != prev.start + prev.length:
            raise PipelineError(
                f"CommitLog files are not contiguous: {prev.path} ends at "
                f"{prev.start + prev.length}, the next file starts at {nxt.start}"
            )


def entry_tasks(
    files: list[CommitLogFile], entries: list[tuple[int, int]], range_bytes: int
) -> list[tuple[CommitLogRange, tuple[int, ...]]]:
    """Read tasks for the records ``entries`` (sorted ``(offset, size)``) name: per file, one task per
    ``range_bytes`` of it that holds any, spanning only those records. An entry in no file fails the
    read (the queues do not match the CommitLog)."""
    starts = [f.start for f in files]
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for phy, size in entries:
        i = bisect.bisect_right(starts, phy) - 1
        if i < 0 or phy >= files[i].start + files[i].length:
            raise PipelineError(
                f"a ConsumeQueue entry names CommitLog offset {phy}, in no CommitLog file; rebuild the"
                " queues (rmq-query rebuild-index) or read with useConsumeQueues=false"
            )
        groups.setdefault((i, (phy - files[i].start) // range_bytes), []).append((phy, size))
    out: list[tuple[CommitLogRange, tuple[int, ...]]] = []
    for (i, _slot), named in groups.items():  # dict order: entries were sorted
        f = files[i]
        end = min(max(phy + size for phy, size in named), f.start + f.length)
        rng = CommitLogRange(len(out), f.path, f.start, named[0][0], end)
        out.append((rng, tuple(dict.fromkeys(phy for phy, _ in named))))
    return out


def tail_ranges(
    files: list[CommitLogFile], covered: int, range_bytes: int
) -> tuple[list[CommitLogRange], list[str]]:
    """The ranges of the records past ``covered`` (a record boundary: where a queued record ends),
    which no queue lists yet; the files are planned from there on only (a hole, a damaged file
    before the end refused, a torn last record left out, as every plan does)."""
    later = [f for f in files if f.start + f.length > covered]
    if not later:
        return [], []
    plans = [plan_file(f, range_bytes, begin=covered if f.start < covered else None) for f in later]
    return export_ranges(plans)


def queue_offsets(
    config: StoreConfig,
    topics: frozenset[str],
    min_store_ts: int | None = None,
    max_store_ts: int | None = None,
    times: _StoreTimes | None = None,
) -> tuple[list[tuple[int, int]], int]:
    """Every ConsumeQueue entry of ``topics`` as ``(CommitLog offset, size)`` sorted, and where the
    queues' coverage ends: the furthest record end any queue of the store points at (records past
    it have not been dispatched yet). With store time bounds, each queue keeps only the entries
    inside them (``_cut_by_time``; ``times`` reads the probed records, closed by the caller when given).
    """
    timed = min_store_ts is not None or max_store_ts is not None
    own = times is None and timed
    if own:
        times = _StoreTimes(commitlog_files(config))
    try:
        return _queue_offsets(config, topics, min_store_ts, max_store_ts, times if timed else None)
    finally:
        if own and times is not None:
            times.close()


def _queue_offsets(
    config: StoreConfig,
    topics: frozenset[str],
    lo: int | None,
    hi: int | None,
    times: _StoreTimes | None,
) -> tuple[list[tuple[int, int]], int]:
    root = config.consume_queue_dir
    size = config.consume_queue_file_size
    entries: list[tuple[int, int]] = []
    covered = 0
    try:
        topic_dirs = sorted(os.listdir(root))
    except FileNotFoundError:
        return [], 0
    for topic in topic_dirs:
        if not safe_topic_dir(topic) or not (root / topic).is_dir():
            continue
        wanted = topic in topics
        for qid in sorted(os.listdir(root / topic)):
            if not qid.isdigit():
                continue
            queue = ConsumeQueue(root, topic, int(qid), size)
            mine: list[tuple[int, int]] | None = [] if wanted else None
            try:
                covered = max(covered, _queue_entries(queue, mine))
            finally:
                queue.close()
            if mine:
                entries.extend(mine if times is None else _cut_by_time(mine, times, lo, hi))
    entries.sort()
    return entries, covered


def _queue_entries(queue: ConsumeQueue, into: list[tuple[int, int]] | None) -> int:
    """Add ``queue``'s entries to ``into`` (when given); the end of the record its last entry names."""
    end = 0
    offset = queue.min_offset
    stop = queue.max_offset
    if into is None:  # only the coverage: the last entry
        offset = max(offset, stop - 1)
    while offset < stop:
        buf = queue.index_buffer(offset)
        if buf is None:
            offset = queue.roll_next_file(offset)
            continue
        n = len(buf) // CQ_STORE_UNIT_SIZE
        for i in range(n):
            phy, length = _ENTRY.unpack_from(buf, i * CQ_STORE_UNIT_SIZE)
            if phy < 0 or length <= 0:
                continue
            end = max(end, phy + length)
            if into is not None:
                into.append((phy, length))
        offset += n
    return end
