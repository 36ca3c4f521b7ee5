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
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from store.config.store_config import StoreConfig, parse_properties
from store.consumequeue.builder import safe_topic_dir
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from store.spark.errors import PipelineError
from store.spark.export import export_ranges
from store.spark.job import commitlog_files
from store.spark.message_rows import RowFilter
from store.spark.ranges import CommitLogRange, plan_file

#: CommitLog bytes per read task unless the ``rangeMiB`` option says otherwise: a task's rows (bodies
#: included) are held in its Python worker before Spark takes them.
DEFAULT_TABLE_RANGE_BYTES = 16 * 1024 * 1024

_ENTRY = struct.Struct(">qi")


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


def plan_store(
    source: StoreSource, row_filter: RowFilter, range_bytes: int = DEFAULT_TABLE_RANGE_BYTES
) -> tuple[list[TableRange], list[str]]:
    """The read tasks of one store (``use_queues``: narrow a topic filter's ranges by the
    ConsumeQueues) and the planner's warnings (a torn last record left out)."""
    files = commitlog_files(source.config)
    ranges, warnings = export_ranges([plan_file(f, range_bytes) for f in files])
    if row_filter.topics is not None and row_filter.queued_only:
        picked = narrow_by_queues(ranges, *queue_offsets(source.config, row_filter.topics))
        return [TableRange(source.broker, rng, row_filter, offsets) for rng, offsets in picked], warnings
    return [TableRange(source.broker, rng, row_filter) for rng in ranges], warnings


def queue_offsets(config: StoreConfig, topics: frozenset[str]) -> tuple[list[tuple[int, int]], int]:
    """Every ConsumeQueue entry of ``topics`` as ``(CommitLog offset, size)`` sorted, and where the
    queues' coverage ends: the furthest record end any queue of the store points at (records past
    it have not been dispatched yet)."""
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
            try:
                covered = max(covered, _queue_entries(queue, entries if wanted else None))
            finally:
                queue.close()
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


def narrow_by_queues(
    ranges: list[CommitLogRange], entries: list[tuple[int, int]], covered: int
) -> list[tuple[CommitLogRange, tuple[int, ...] | None]]:
    """What to read of ``ranges`` for the records ``entries`` name: per range, the entries' offsets
    inside it (the range narrowed to span them), and, where a range reaches past ``covered``, the
    part from ``covered`` on (a record boundary: where a queued record ends) read in full (``None``).
    Ranges keep their ``index``; a range with nothing to read is left out.
    """
    starts = [phy for phy, _ in entries]
    out: list[tuple[CommitLogRange, tuple[int, ...] | None]] = []
    for rng in ranges:
        tail_from = max(rng.start, covered)
        lo = bisect.bisect_left(starts, rng.start)
        hi = bisect.bisect_left(starts, min(rng.end, tail_from))
        if hi > lo:
            end = max(phy + length for phy, length in entries[lo:hi])
            narrowed = replace(rng, start=starts[lo], end=min(end, rng.end))
            out.append((narrowed, tuple(dict.fromkeys(starts[lo:hi]))))
        if rng.end > tail_from:
            out.append((replace(rng, start=tail_from), None))
    return out
