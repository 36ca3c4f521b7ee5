"""Rebuild every ConsumeQueue of a store on Spark, byte-identical to the sequential builder's output.

Stages (each with a progress bar):

1. plan ranges: as for the index (``ranges``), one task per CommitLog file;
2. decode records: each range yields the entry of every record the reput dispatches, computed as
   the sequential builder computes them: runs of whole records checked by ``record.whole_run``
   and laid out per queue by ``extract_entries`` (both compiled; the references under
   ``RMQ_PURE_PYTHON=1``), a record those leave aside (a delivery time) by
   ``store.reput.decode.dispatch_entry``; a range hands back one compact group per queue
   (entries, queue offsets, store times as bytes), not a Python object per record;
3. write queues: entries are grouped by queue; each queue is written by one task, its entries in
   CommitLog order through the sequential builder's own appender (``putMessagePositionInfo``'s rules).
   A queue's bytes depend only on its own records in CommitLog order, so the result is the same.

Output goes to a staging directory swapped in whole (``staging``); the checkpoint's
``logicsMsgTimestamp`` is then the store time of the last record given an entry, as the sequential
builder leaves it.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from store.checkpoint import Checkpoint
from store.commitlog import record
from store.commitlog.gaps import Gap
from store.config.store_config import StoreConfig
from store.consumequeue.builder import _QueueAppender, check_geometry, safe_topic_dir
from store.consumequeue.consume_queue import delay_level_table, entry_bytes
from store.consumequeue.consume_queue_build import SPECIAL, extract_entries
from store.reput.decode import DispatchError, dispatch_entry
from store.spark.job import commitlog_files, spark_job
from store.spark.range_walk import walk_range
from store.spark.ranges import DEFAULT_RANGE_BYTES, CommitLogRange
from store.spark.rebuild import gaps_allowed, ranges_to_decode
from store.staging import staged_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: (topic, queueId) -> (commitLogOffset, size, tagsCode, queueOffset, storeTimestamp)
Entry = tuple[int, int, int, int, int]
#: One queue's entries from one range, in CommitLog order: the 20-byte entries as the broker writes
#: them, and the queue offsets and store times as native int64 arrays (``array("q")`` bytes).
QueuePart = tuple[bytes, bytes, bytes]
_NO_LIMIT = 1 << 62
_ENTRY = struct.Struct(">qiq")  # commitLogOffset, size, tagsCode: a consume queue entry
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class CqRangeEntries:
    """What one range decoded into, and where its whole records are: ``runs``, ``bad`` and
    ``file_end`` mean what they mean for the index's ``decode.RangeEntries``, so the driver finds the
    gaps with the same ``rebuild.find_gaps``."""

    index: int
    entries: list[tuple[tuple[str, int], QueuePart]]
    records: int
    bytes_read: int
    runs: tuple[tuple[int, int], ...] = ()
    bad: tuple[tuple[int, str], ...] = ()
    file_end: int | None = None


@dataclass(slots=True)
class CqRebuildResult:
    queues: int
    entries: int
    records: int
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: Gaps built around (only with ``around_gaps``; without, the first one raises).
    gaps: list[Gap] = field(default_factory=list)


def decode_cq_range(rng: CommitLogRange, delays: tuple[dict[int, int], int]) -> CqRangeEntries:
    """Walk ``rng`` and collect the consume queue entry of every dispatched record, per queue.

    Records are walked as the index's ``decode.decode_range`` walks them (``range_walk``): a record
    that does not check is noted in ``bad`` and skipped by ``record.resync``; the driver decides
    (``find_gaps``) whether that is a gap to refuse or the end of the log. A record the reput would
    not dispatch (or that does not decode) counts as a record and gives no entry.
    """
    queues: dict[tuple[str, int], tuple[bytearray, array[int], array[int]]] = {}
    topics: dict[bytes, str] = {}

    def queue(topic: str, queue_id: int) -> tuple[bytearray, array[int], array[int]] | None:
        if not safe_topic_dir(topic):
            return None
        found = queues.get((topic, queue_id))
        if found is None:
            found = queues[(topic, queue_id)] = (bytearray(), array("q"), array("q"))
        return found

    def visit(view: memoryview, pos: int, size: int) -> bool:
        try:
            entry = dispatch_entry(view[pos : pos + size], delays)
        except (DispatchError, ValueError):
            entry = None
        if entry is not None:
            topic, queue_id, queue_offset, code, store_ts = entry
            into = queue(topic, queue_id)
            if into is not None:
                into[0].extend(entry_bytes(rng.file_start + pos, size, code))
                into[1].append(queue_offset)
                into[2].append(store_ts)
        return True

    def scan(view: memoryview, pos: int, end: int, base: int) -> tuple[int, int]:
        stop, seen = record.whole_run(view, pos, end, base, end, _NO_LIMIT)
        at = pos
        while at < stop:
            why, at, _n, groups = extract_entries(view, at, stop, base, _NO_LIMIT)
            for raw, queue_id, entries, offsets, times, _consecutive in groups:
                topic = topics.get(raw)
                if topic is None:
                    topic = topics[raw] = raw.decode("utf-8", "replace")
                into = queue(topic, queue_id)
                if into is not None:
                    into[0].extend(entries)
                    into[1].frombytes(offsets)
                    into[2].frombytes(times)
            if why == SPECIAL:  # a record whose entry is dispatch_entry's (a delivery time)
                size = _I32.unpack_from(view, at)[0]
                visit(view, at, size)
                at += size
        return stop, seen

    walk = walk_range(rng, visit, scan)
    parts = [(key, (bytes(e), q.tobytes(), t.tobytes())) for key, (e, q, t) in queues.items()]
    return CqRangeEntries(
        rng.index, parts, walk.records, rng.end - rng.start, tuple(walk.runs), tuple(walk.bad), walk.file_end
    )


def queue_entries(parts: Iterable[tuple[int, QueuePart]]) -> Iterator[Entry]:
    """One queue's entries from its parts ``(range index, part)``, in CommitLog order."""
    for _index, (entries, offsets, times) in sorted(parts, key=lambda part: part[0]):
        queue_offsets, store_times = array("q"), array("q")
        queue_offsets.frombytes(offsets)
        store_times.frombytes(times)
        for (offset, size, code), queue_offset, store_ts in zip(
            _ENTRY.iter_unpack(entries), queue_offsets, store_times, strict=True
        ):
            yield offset, size, code, queue_offset, store_ts


def write_queues(
    groups: Iterable[tuple[tuple[str, int], Iterable[Entry]]],
    root: str,
    file_size: int,
    fill_holes: bool = False,
) -> Iterator[tuple[int, int, int]]:
    """Write each queue (entries sorted by CommitLog offset); yields (entries, lastOffset, lastStoreTime).

    ``fill_holes`` (building around gaps): queue offsets lost in a gap get blank entries, as in the
    sequential builder."""
    for (topic, queue_id), entries in groups:
        appender = _QueueAppender(Path(root), topic, queue_id, file_size, fill_holes=fill_holes)
        written = last_offset = last_ts = 0
        try:
            for offset, size, code, queue_offset, store_ts in sorted(entries):
                if appender.put(offset, size, code, queue_offset):
                    written += 1
                    last_offset, last_ts = offset, store_ts
        finally:
            appender.close_fd(sync=True)
        yield written, last_offset, last_ts


def rebuild_consume_queues_spark(
    config: StoreConfig,
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    spark_conf: Mapping[str, str] | None = None,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
    around_gaps: bool = False,
) -> CqRebuildResult:
    """Rebuild ``<storeRoot>/consumequeue`` from the CommitLog on Spark, staged and swapped in whole.

    A gap in the CommitLog raises ``CommitLogGapError`` before anything is written, unless
    ``around_gaps``: the gaps are found by the index rebuild's ``find_gaps``, so the rule, the
    message and the entries kept are the sequential builder's (``store.commitlog.gaps``).
    """
    files = commitlog_files(config)
    check_geometry(config.consume_queue_dir, config.consume_queue_file_size)
    delays = delay_level_table(config.message_delay_level)
    file_size = config.consume_queue_file_size
    with spark_job(
        files, master=master, spark=spark, spark_conf=spark_conf, progress_out=progress_out
    ) as job:
        sc = job.sc
        plans = job.plan(range_bytes or DEFAULT_RANGE_BYTES)
        ranges = ranges_to_decode(plans, config)
        with job.stage("decode records"):
            decoded = job.keep(
                sc.parallelize(ranges, max(len(ranges), 1)).map(lambda r: decode_cq_range(r, delays)).cache()
            )
            summaries = sorted(
                decoded.map(
                    lambda r: CqRangeEntries(r.index, [], r.records, r.bytes_read, r.runs, r.bad, r.file_end)
                ).collect(),
                key=lambda r: r.index,
            )
        gaps, warnings = gaps_allowed(summaries, ranges, plans, config, around_gaps)
        job.label = "write queues"
        with staged_output(config.consume_queue_dir) as staging:
            root = str(staging)
            fill = around_gaps
            with job.stage("write queues"):
                written = (
                    decoded.flatMap(lambda r: [(key, (r.index, part)) for key, part in r.entries])
                    .groupByKey(max(2, sc.defaultParallelism))
                    .mapPartitions(
                        lambda groups: write_queues(
                            ((key, queue_entries(parts)) for key, parts in groups), root, file_size, fill
                        )
                    )
                    .collect()
                )
        last = max(written, key=lambda w: w[1], default=(0, 0, 0))
        checkpoint = Checkpoint.read_or_default(config.checkpoint_path)
        checkpoint.logics_msg_timestamp = last[2]
        checkpoint.write(config.checkpoint_path)
    return CqRebuildResult(
        queues=len(written),
        entries=sum(w[0] for w in written),
        records=sum(s.records for s in summaries),
        seconds=job.seconds,
        stage_seconds=job.stage_seconds,
        warnings=warnings,
        gaps=gaps,
    )
