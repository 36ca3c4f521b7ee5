"""Rebuild every ConsumeQueue of a store on Spark, byte-identical to the sequential builder's output.

Stages (each with a progress bar):

1. plan ranges: as for the index (``ranges``), one task per CommitLog file;
2. decode records: each range yields the entry of every record the reput dispatches
   (``consume_queue_builder.dispatch_entry``: the transaction rule, tagsCode, delivery times);
3. write queues: entries are grouped by queue; each queue is written by one task, its entries in
   CommitLog order through the sequential builder's own appender (``putMessagePositionInfo``'s rules).
   A queue's bytes depend only on its own records in CommitLog order, so the result is the same.

Output goes to a staging directory swapped in whole (``staging``); the checkpoint's
``logicsMsgTimestamp`` is then the store time of the last record given an entry, as the sequential
builder leaves it.
"""

from __future__ import annotations

import mmap
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from store.checkpoint import Checkpoint
from store.config import StoreConfig
from store.consume_queue import delay_level_table
from store.consume_queue_builder import (
    DispatchError,
    _QueueAppender,
    check_geometry,
    dispatch_entry,
    safe_topic_dir,
)
from store.spark.decode import describe_invalid
from store.spark.errors import CorruptRecordError, PipelineError, StageFailedError
from store.spark.failures import describe_failure
from store.spark.progress import SparkProgress
from store.spark.ranges import DEFAULT_RANGE_BYTES, CommitLogRange, list_files, plan_file, ranges_from_plans
from store.spark.rebuild import check_plans
from store.spark.session import open_session
from store.staging import staged_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: (topic, queueId) -> (commitLogOffset, size, tagsCode, queueOffset, storeTimestamp)
Entry = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class CqRangeEntries:
    """What one range decoded into (``stopped_at`` set when a record failed its check)."""

    index: int
    entries: list[tuple[tuple[str, int], Entry]]
    records: int
    bytes_read: int
    stopped_at: int | None = None
    reason: str = ""
    followed: bool = False


@dataclass(slots=True)
class CqRebuildResult:
    queues: int
    entries: int
    records: int
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def decode_cq_range(rng: CommitLogRange, delays: tuple[dict[int, int], int]) -> CqRangeEntries:
    """Walk ``rng`` and collect the consume queue entry of every dispatched record."""
    from store import record

    out: list[tuple[tuple[str, int], Entry]] = []
    records = 0
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = rng.start - rng.file_start
        end = rng.end - rng.file_start
        while pos < end:
            size = record.check(mm, pos, end, rng.file_start + pos, check_crc=True)
            if size <= 0:
                reason = describe_invalid(mm, pos, end, rng.file_start + pos)
                followed = False
                if pos + 8 <= end:
                    total = int.from_bytes(mm[pos : pos + 4], "big", signed=True)
                    followed = total >= record.MIN_RECORD_SIZE and pos + total < end
                return CqRangeEntries(
                    rng.index,
                    out,
                    records,
                    pos - (rng.start - rng.file_start),
                    rng.file_start + pos,
                    reason,
                    followed,
                )
            records += 1
            try:
                entry = dispatch_entry(memoryview(mm)[pos : pos + size], delays)
            except (DispatchError, ValueError):
                entry = None
            if entry is not None and safe_topic_dir(entry[0]):
                topic, queue_id, queue_offset, code, store_ts = entry
                out.append(((topic, queue_id), (rng.file_start + pos, size, code, queue_offset, store_ts)))
            pos += size
    return CqRangeEntries(rng.index, out, records, rng.end - rng.start)


def check_decoded(decoded: list[CqRangeEntries], ranges: list[CommitLogRange]) -> list[str]:
    """A range that stopped early is corrupt (the job stops), unless its bad record ends the CommitLog
    (a torn tail: the last range, nothing after it), which is a warning."""
    warnings: list[str] = []
    for result in decoded:
        if result.stopped_at is None:
            continue
        rng = ranges[result.index]
        if result.index != len(ranges) - 1 or result.followed:
            raise CorruptRecordError(rng.path, result.stopped_at, result.reason)
        warnings.append(f"CommitLog ends at a torn record at offset {result.stopped_at} ({result.reason})")
    return warnings


def write_queues(
    groups: Iterable[tuple[tuple[str, int], Iterable[Entry]]], root: str, file_size: int
) -> Iterator[tuple[int, int, int]]:
    """Write each queue (entries sorted by CommitLog offset); yields (entries, lastOffset, lastStoreTime)."""
    for (topic, queue_id), entries in groups:
        appender = _QueueAppender(Path(root), topic, queue_id, file_size)
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
    range_bytes: int = DEFAULT_RANGE_BYTES,
    progress_out: TextIO | None = None,
) -> CqRebuildResult:
    """Rebuild ``<storeRoot>/consumequeue`` from the CommitLog on Spark, staged and swapped in whole."""
    started = time.monotonic()
    commitlog_files = list_files(config.store_path_commit_log)
    if not commitlog_files:
        raise PipelineError(f"no CommitLog files in {config.store_path_commit_log}")
    check_geometry(config.consume_queue_dir, config.consume_queue_file_size)
    delays = delay_level_table(config.message_delay_level)
    file_size = config.consume_queue_file_size
    session, own_session = (spark, False) if spark is not None else open_session(master, spark_conf)
    sc = session.sparkContext
    progress = SparkProgress(sc, progress_out if progress_out is not None else sys.stderr)
    label = "plan ranges"
    try:
        with progress.stage(label):
            plans = (
                sc.parallelize(commitlog_files, min(len(commitlog_files), 4 * sc.defaultParallelism))
                .map(lambda f: plan_file(f, range_bytes))
                .collect()
            )
        warnings = check_plans(plans)
        ranges = ranges_from_plans(plans)
        label = "decode records"
        with progress.stage(label):
            decoded = sc.parallelize(ranges, max(len(ranges), 1)).map(lambda r: decode_cq_range(r, delays))
            decoded.cache()
            summaries = sorted(
                decoded.map(
                    lambda r: CqRangeEntries(
                        r.index, [], r.records, r.bytes_read, r.stopped_at, r.reason, r.followed
                    )
                ).collect(),
                key=lambda r: r.index,
            )
        warnings += check_decoded(summaries, ranges)
        label = "write queues"
        with staged_output(config.consume_queue_dir) as staging:
            root = str(staging)
            with progress.stage(label):
                written = (
                    decoded.flatMap(lambda r: r.entries)
                    .groupByKey(max(2, sc.defaultParallelism))
                    .mapPartitions(lambda groups: write_queues(groups, root, file_size))
                    .collect()
                )
            decoded.unpersist()
        last = max(written, key=lambda w: w[1], default=(0, 0, 0))
        checkpoint = Checkpoint.read_or_default(config.checkpoint_path)
        checkpoint.logics_msg_timestamp = last[2]
        checkpoint.write(config.checkpoint_path)
    except PipelineError:
        raise
    except Exception as exc:
        raise StageFailedError(label, describe_failure(exc)) from exc
    finally:
        if own_session:
            session.stop()
    return CqRebuildResult(
        queues=len(written),
        entries=sum(w[0] for w in written),
        records=sum(s.records for s in summaries),
        seconds=time.monotonic() - started,
        stage_seconds=dict(progress.timings),
        warnings=warnings,
    )
