"""Where a stream over a live store stands: the end of its whole records, and the ranges between two
CommitLog offsets (``spark.readStream.format("rocketmq")``'s micro-batches).

A stream's offset for one store is a CommitLog offset that is always a record boundary: the store's
first offset, or the end of the whole records some earlier look found. Each look plans the files from
the stream's position on as every pipeline plans them (``plan_file``, ``export_ranges``: a hole or a
damaged file refused), and a torn last record (a writer mid-append, or killed) is left out, so a
micro-batch holds only whole records and the next one starts exactly where it ended: none twice,
none skipped. Kept free of PySpark, like ``message_plan``.
"""

from __future__ import annotations

from dataclasses import replace

from store.config.store_config import StoreConfig
from store.spark.export import export_ranges
from store.spark.job import commitlog_files
from store.spark.ranges import CommitLogFile, CommitLogRange, plan_file

_WHOLE_FILE = 1 << 62


def first_offset(config: StoreConfig) -> int:
    """The store's first CommitLog offset (its first file's start)."""
    return commitlog_files(config)[0].start


def _files_from(config: StoreConfig, start: int) -> list[CommitLogFile]:
    """The files holding offsets at or past ``start`` (earlier ones were streamed already)."""
    return [f for f in commitlog_files(config) if f.start + f.length > start]


def whole_records_end(config: StoreConfig, start: int) -> int:
    """Where the whole records end, looking from ``start`` (a record boundary) on; ``start`` itself
    when nothing new is there."""
    files = _files_from(config, start)
    if not files:
        return start
    ranges, _warnings = export_ranges([plan_file(f, _WHOLE_FILE) for f in files])
    ranges = [r for r in ranges if r.end > start]
    return max(start, ranges[-1].end) if ranges else start


def ranges_between(config: StoreConfig, start: int, end: int, range_bytes: int) -> list[CommitLogRange]:
    """The ranges of records in ``[start, end)``: cut on record boundaries every ``range_bytes`` as
    the planner cuts them, clipped to the two offsets (both record boundaries)."""
    if end <= start:
        return []
    out: list[CommitLogRange] = []
    files = [f for f in _files_from(config, start) if f.start < end]
    ranges, _warnings = export_ranges([plan_file(f, range_bytes) for f in files])
    for rng in ranges:
        lo, hi = max(rng.start, start), min(rng.end, end)
        if hi > lo:
            out.append(replace(rng, index=len(out), start=lo, end=hi))
    return out
