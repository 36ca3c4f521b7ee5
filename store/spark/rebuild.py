"""Rebuild every IndexFile of a store on Spark, byte-identical to the sequential builder's output.

Stages (each shown with a progress bar):

1. plan ranges: on the driver, each CommitLog file is cut where sampled records check in full
   (``ranges.plan_file_sampled``), proven by the decode; where the decode does not prove it, one
   task per file hops over its records and cuts ranges (``ranges.plan_file``) and the decode runs
   again;
2. decode records: one task per range packs its index entries into a file (``decode``);
3. write index files: entries are numbered globally in CommitLog order and cut into files by the
   broker's roll-over rule (``assign``). After a sampled plan, a thread of the driver writes them as
   the ranges decode (``index_stream``), and the stage is what it has left when the decode ends;
   after the hop, each file is written by its own task once the decode is done (``index_writer``).

Files are written to a staging directory beside the destination and swapped in only when all are
complete (``staging``), so a failure (corrupt record, out of memory) leaves the old index untouched.
When the destination is the store's own ``index/``, the checkpoint's ``indexMsgTimestamp`` is then
set as the sequential builder sets it. Files are named ``yyyyMMddHHmmssSSS`` after the store time of
their first key (the broker names them by creation time, which a rebuild cannot know), kept unique
and ascending like the broker's names.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from store.commitlog.gaps import CommitLogGapError, Gap, LogFile, gap_causes
from store.config.store_config import StoreConfig
from store.index.builder import left_behind, update_index_timestamp
from store.index.service import index_file_name
from store.spark.assign import file_count, per_file, spans_by_file
from store.spark.decode import decode_range_to_file
from store.spark.errors import CorruptRecordError, PipelineError
from store.spark.index_stream import IndexStreamWriter
from store.spark.index_writer import WrittenFile, part_name, write_spans
from store.spark.job import commitlog_files, spark_job
from store.spark.ranges import (
    STOP_BLANK,
    STOP_FULL,
    STOP_INVALID,
    STOP_UNREADABLE,
    STOP_UNWRITTEN,
    CommitLogRange,
    FilePlan,
    range_bytes_for,
)
from store.staging import staged_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The staging directory's subdirectory for the decode tasks' entries (``decode_range_to_file``).
ENTRIES_DIR = ".entries"


@dataclass(slots=True)
class RebuildResult:
    """What a rebuild did: the figures the command reports."""

    out_dir: Path
    files: list[str]
    keys_indexed: int
    records: int
    bytes_scanned: int
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: Gaps indexed around (only with ``around_gaps``; without, the first one raises).
    gaps: list[Gap] = field(default_factory=list)
    #: Steps after the swap that failed: the new index is in place regardless.
    after_swap: list[str] = field(default_factory=list)


def check_plans(plans: list[FilePlan]) -> list[str]:
    """Refuse a CommitLog with a hole or a damaged file before its end; return warnings.

    Every file but the last must end in a blank record (or be exactly full) and be followed by the
    file starting where it ends. The last file may end in zeros (not written yet) or in a torn record
    (the broker was killed mid-write): the CommitLog ends there, as the broker's recovery decides.
    Files after it that hold nothing yet (the broker allocates the next file ahead) are ignored.
    """
    warnings: list[str] = []
    while len(plans) > 1 and plans[-1].stop == STOP_UNWRITTEN and plans[-1].end == plans[-1].file.start:
        plans = plans[:-1]  # a file the broker allocated ahead of time and has not written yet
    for i, plan in enumerate(plans):
        last = i == len(plans) - 1
        if plan.stop == STOP_UNREADABLE:
            raise PipelineError(f"CommitLog file {plan.file.path} cannot be read: {plan.detail}")
        if not last:
            nxt = plans[i + 1].file
            if nxt.start != plan.file.start + plan.file.length:
                raise PipelineError(
                    f"CommitLog files are not contiguous: {plan.file.path} ends at "
                    f"{plan.file.start + plan.file.length}, the next file starts at {nxt.start}"
                )
            if plan.stop not in (STOP_BLANK, STOP_FULL):
                reason = plan.detail or "the data stops before the end-of-file marker"
                raise CorruptRecordError(plan.file.path, plan.end, reason)
        elif plan.stop == STOP_INVALID:
            warnings.append(f"CommitLog ends at a torn record at offset {plan.end} ({plan.detail})")
    return warnings


def decode_plan(plans: list[FilePlan]) -> list[CommitLogRange]:
    """The ranges to decode: the planner's cuts, except in a file it could not hop through to its end.

    Such a file (bytes that are not a record header before its end-of-file marker, or zeros in a file
    that is not the last) is decoded as one range, so the decode task walks it exactly as the
    sequential walk does, skipping bad records the same way, instead of trusting hops past them.
    """
    # The last file holding data: every file after it was only created ahead (zeros at its start).
    holding = [i for i, p in enumerate(plans) if not (p.stop == STOP_UNWRITTEN and p.end == p.file.start)]
    last_data = holding[-1] if holding else -1
    ranges: list[CommitLogRange] = []
    for i, plan in enumerate(plans):
        f = plan.file
        last = i >= last_data
        if plan.stop == STOP_UNREADABLE:
            bounds = []  # a hole: find_gaps names it
        elif plan.stop == STOP_INVALID or (plan.stop == STOP_UNWRITTEN and not last):
            bounds = [(f.start, f.start + f.length)]
        else:
            bounds = list(itertools.pairwise([*plan.cuts, plan.end]))
        for start, end in bounds:
            if end > start:
                ranges.append(CommitLogRange(len(ranges), f.path, f.start, start, end, last))
    return ranges


class DecodedRuns(Protocol):
    """Where one decoded range's whole records are: the index's ``RangeEntries`` and the consume
    queues' ``CqRangeEntries`` both say it, so both rebuilds find gaps with ``find_gaps``."""

    @property
    def index(self) -> int: ...
    @property
    def runs(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def bad(self) -> tuple[tuple[int, str], ...]: ...
    @property
    def file_end(self) -> int | None: ...


def find_gaps(
    decoded: Sequence[DecodedRuns], ranges: list[CommitLogRange], plans: list[FilePlan], mapped_file_size: int
) -> tuple[list[Gap], list[str]]:
    """String the decoded runs of whole records together: the gaps between them, and a torn-tail warning.

    The same rule as the sequential builder's walk (``store.commitlog.gaps.GapWalk``): a run must begin where
    the previous one ended, or at the next file when the previous file is full-size and complete (an
    end-of-file marker, or no room for one). Bad bytes after the last run end the log (a torn tail,
    zeros not yet written); they are no gap, since no whole record follows.
    """
    files = []
    for p in plans:
        unreadable = p.detail if p.stop == STOP_UNREADABLE else None
        files.append(LogFile(p.file.start, Path(p.file.path).name, p.file.length, unreadable))
    length_of = {p.file.start: p.file.length for p in plans}
    file_end = {p.file.start: p.end for p in plans if p.stop in (STOP_BLANK, STOP_FULL)}
    bad: dict[int, str] = {}
    for result in decoded:
        bad.update(result.bad)
        if result.file_end is not None:
            file_end[ranges[result.index].file_start] = result.file_end
    size = mapped_file_size

    def follows_file_end(end: int, start: int) -> bool:
        slot = end - end % size
        return start == slot + size and length_of.get(slot) == size and file_end.get(slot) == end

    gaps: list[Gap] = []
    expected = plans[0].file.start if plans else 0
    for result in sorted(decoded, key=lambda r: r.index):
        for start, end in result.runs:
            if start != expected and not follows_file_end(expected, start):
                causes = gap_causes(files, size, expected, start, bad.get(expected))
                gaps.append(Gap(expected, start, causes))
            expected = end
    warnings = []
    tail = bad.get(expected)
    if tail is not None and not tail.startswith("zeros"):
        warnings.append(f"CommitLog ends at a torn record at offset {expected} ({tail})")
    return gaps, warnings


def checkpoint_index_timestamp(written: list[WrittenFile]) -> int:
    """The checkpoint's ``indexMsgTimestamp`` after a rebuild, as the sequential builder leaves it.

    The broker records a file's end timestamp when it rolls over from that (full) file, so after a
    rebuild it is the end timestamp of the file before the last one (0 with a single file).
    """
    return written[-2].end_timestamp if len(written) >= 2 else 0


def final_names(written: list[WrittenFile]) -> list[str]:
    """``yyyyMMddHHmmssSSS`` of each file's first key, bumped by 1 ms where needed to stay ascending."""
    names: list[str] = []
    millis = -1
    for w in written:
        millis = max(w.first_timestamp, millis + 1)
        name = index_file_name(millis)
        while names and name <= names[-1]:
            millis += 1
            name = index_file_name(millis)
        names.append(name)
    return names


def sampled_plan_holds(
    plans: list[FilePlan], ranges: list[CommitLogRange], decoded: Sequence[DecodedRuns]
) -> bool:
    """Whether the decode proved a sampled plan (``ranges.plan_file_sampled``) to be the hop's.

    In every file cut by sampling, each range must be whole records from its start exactly to its
    end, none bad, no end-of-file marker inside: then each cut is where the walk from the file's
    start arrives (by induction from the first range, which starts at the file's start), and the
    hop from the last cut found the file's end where the hop from its start finds it. Anything else
    (damage, a torn tail, a message body holding a record that checks at its own offset) returns
    False and the caller plans again by the hop.
    """
    sampled_files = {p.file.start for p in plans if p.sampled}
    for result in decoded:
        rng = ranges[result.index]
        if rng.file_start not in sampled_files:
            continue
        if result.bad or result.file_end is not None or tuple(result.runs) != ((rng.start, rng.end),):
            return False
    return True


def gaps_allowed(
    decoded: Sequence[DecodedRuns],
    ranges: list[CommitLogRange],
    plans: list[FilePlan],
    config: StoreConfig,
    around_gaps: bool,
) -> tuple[list[Gap], list[str]]:
    """``find_gaps``, refused (``CommitLogGapError`` for the first gap) unless building ``around_gaps``:
    both rebuilds decide so before writing anything."""
    gaps, warnings = find_gaps(decoded, ranges, plans, config.mapped_file_size_commit_log)
    if gaps and not around_gaps:
        raise CommitLogGapError(gaps[0])
    return gaps, warnings


def ranges_to_decode(plans: list[FilePlan], config: StoreConfig) -> list[CommitLogRange]:
    """``decode_plan``; ``PipelineError`` when the CommitLog holds no records to rebuild from."""
    ranges = decode_plan(plans)
    if not ranges:
        raise PipelineError(f"the CommitLog in {config.store_path_commit_log} holds no records")
    return ranges


def _discard(stream: IndexStreamWriter, staging: Path | None) -> None:
    """Stop the driver's writer and wait for it; with ``staging``, delete the files it wrote there."""
    stream.cancel()
    stream.join()
    if staging is not None:
        for file_no in range(len(stream.written) + 1):  # the finished files and the one it was in
            (staging / part_name(file_no)).unlink(missing_ok=True)


def rebuild_index_spark(
    config: StoreConfig,
    *,
    master: str | None = None,
    out_dir: Path | None = None,
    spark: SparkSession | None = None,
    spark_conf: Mapping[str, str] | None = None,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
    around_gaps: bool = False,
) -> RebuildResult:
    """Rebuild the index of the store ``config`` describes into ``out_dir`` (default: its index dir).

    ``range_bytes`` (CommitLog bytes per decode task) defaults to ``ranges.range_bytes_for`` the
    CommitLog's size and the job's task slots: a few ranges per core, since every task costs Spark's
    round trip whatever it holds.

    A gap in the CommitLog raises ``CommitLogGapError`` before the index is replaced, unless
    ``around_gaps``: the rule and the message are the sequential builder's (``store.commitlog.gaps``).
    """
    target = Path(out_dir) if out_dir is not None else config.index_dir
    files = commitlog_files(config)
    keys_per_file = per_file(config.max_index_num)
    slots, index_num = config.max_hash_slot_num, config.max_index_num
    with spark_job(
        files, master=master, spark=spark, spark_conf=spark_conf, progress_out=progress_out
    ) as job:
        sc = job.sc
        leftovers: list[Path] = []
        with staged_output(target, leftovers=leftovers) as staging:
            # The decode tasks' entries, one file per range, beside the files written from them (on
            # the output's filesystem, which every executor reaches); removed before the swap.
            entries_dir = staging / ENTRIES_DIR
            where = str(entries_dir)
            # Plan by sampling (no hop through every record); if the decode does not prove the
            # sampled cuts (a damaged file, a torn tail), plan by the hop and decode again.
            if range_bytes is None:
                range_bytes = range_bytes_for(sum(f.length for f in files), job.task_slots())
            stream: IndexStreamWriter | None = None
            try:
                for sampled in (True, False):
                    # Sampled: on the driver (a few KiB read per cut, no Spark job to schedule), the
                    # index written by the driver as ranges decode; by the hop: a Spark job, one task
                    # per file, and the write a Spark job after the decode, as before.
                    plans = job.plan_here(range_bytes) if sampled else job.plan(range_bytes)
                    ranges = ranges_to_decode(plans, config)
                    job.label = "decode records"
                    shutil.rmtree(entries_dir, ignore_errors=True)
                    entries_dir.mkdir()
                    if sampled:
                        stream = IndexStreamWriter(
                            staging, entries_dir, len(ranges), keys_per_file, slots, index_num
                        )
                        stream.start()
                    with job.stage("decode records"):
                        tasks = sc.parallelize(ranges, len(ranges)).map(
                            lambda r: decode_range_to_file(r, where)
                        )
                        collected = sorted(tasks.collect(), key=lambda pair: pair[0].index)
                    if not sampled or sampled_plan_holds(
                        plans, ranges, [summary for summary, _ in collected]
                    ):
                        break
                    # Not proven: what the writer wrote from these ranges is thrown away.
                    assert stream is not None
                    _discard(stream, staging)
                    stream = None
                summaries = [summary for summary, _ in collected]
                gaps, warnings = gaps_allowed(summaries, ranges, plans, config, around_gaps)
                ordered_counts = [count for _, count in collected]
                total_keys = sum(ordered_counts)
                n_files = file_count(total_keys, keys_per_file)

                job.label = "write index files"
                if stream is not None:
                    with job.stage("write index files"):
                        stream.join()  # what it has left after the last range decoded
                    if stream.error is not None:
                        raise stream.error
                    written = stream.written
                elif n_files:
                    staging_dir = str(staging)
                    by_file = spans_by_file(ordered_counts, keys_per_file)
                    spans = sorted((no, s) for no, s in by_file.items() if no < n_files)
                    with job.stage("write index files"):
                        written = (
                            sc.parallelize(spans, len(spans))
                            .map(lambda f: write_spans(staging_dir, where, f[0], f[1], slots, index_num))
                            .collect()
                        )
                else:
                    written = []
            except BaseException:
                if stream is not None:
                    _discard(stream, None)
                raise
            shutil.rmtree(entries_dir)
            written.sort(key=lambda w: w.file_no)
            if [w.file_no for w in written] != list(range(n_files)):
                raise PipelineError(f"expected {n_files} index files, the write stage made {len(written)}")
            names = final_names(written)
            for w, name in zip(written, names, strict=True):
                os.replace(w.path, staging / name)
        # The new index is in place: what fails from here on is reported, not raised as a failed job.
        after_swap = [left_behind(path) for path in leftovers]
        if out_dir is None:
            # The store's own index was replaced: record the roll-over point like the broker does.
            problem = update_index_timestamp(config.checkpoint_path, checkpoint_index_timestamp(written))
            if problem:
                after_swap.append(problem)

    return RebuildResult(
        out_dir=target,
        files=names,
        keys_indexed=total_keys,
        records=sum(s.records for s in summaries),
        bytes_scanned=sum(s.bytes_read for s in summaries),
        seconds=job.seconds,
        stage_seconds=job.stage_seconds,
        warnings=warnings,
        gaps=gaps,
        after_swap=after_swap,
    )
