"""``export-keys``: write the key index of a store as a Parquet dataset, locally or on Spark.

Both engines write a directory of Parquet files with the columns of ``key_table`` plus
``store_time`` (UTC timestamp, milliseconds), rows in CommitLog order. The local engine (pyarrow)
streams one row group per CommitLog range into a single file, so memory stays bounded by one range;
the Spark engine decodes ranges in parallel and writes one part file per range. Either way the output
is written beside the destination and swapped in only when complete.
"""

from __future__ import annotations

import mmap
import struct
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from protocol.record_layout import SIZE_MAGIC
from store.commitlog import record
from store.commitlog.record import describe_invalid
from store.config.store_config import StoreConfig
from store.progress_line import ProgressLine
from store.spark.errors import CorruptRecordError, PipelineError
from store.spark.job import commitlog_files, spark_job
from store.spark.key_columns import SPECIAL, key_columns
from store.spark.key_table import COLUMN_NAMES, COLUMNS, STORE_TIME, range_rows, record_rows
from store.spark.ranges import (
    DEFAULT_RANGE_BYTES,
    CommitLogRange,
    FilePlan,
    plan_file,
    ranges_from_plans,
)
from store.spark.rebuild import check_plans
from store.staging import staged_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_FILE_NAME = "part-00000.parquet"


@dataclass(slots=True)
class ExportResult:
    """What an export wrote."""

    out: Path
    rows: int
    bytes_scanned: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def export_ranges(plans: list[FilePlan]) -> tuple[list[CommitLogRange], list[str]]:
    """The ranges both engines export (a hole or a damaged file refused, a torn tail left out), and
    the warnings to print."""
    warnings = check_plans(plans)
    ranges, tail_warnings = without_torn_tail(ranges_from_plans(plans))
    return ranges, warnings + tail_warnings


def without_torn_tail(ranges: list[CommitLogRange]) -> tuple[list[CommitLogRange], list[str]]:
    """Leave out a torn last record (a broker killed mid-write), with a warning, as the rebuild does.

    The planner hops over records by TOTALSIZE only, so a record whose header was written but not
    its whole body can end the last range. Such a record ends the CommitLog (the sequential
    builder and the broker's recovery stop there too); a bad record anywhere else still fails the
    export in ``range_rows`` with its offset.
    """
    if not ranges:
        return ranges, []
    last = ranges[-1]
    with open(last.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = last.start - last.file_start
        end = last.end - last.file_start
        final = pos
        while pos < end:  # find the last record's start (the planner checked every TOTALSIZE)
            final = pos
            pos += SIZE_MAGIC.unpack_from(mm, pos)[0]
        offset = last.file_start + final
        if record.check(mm, final, end, offset, check_crc=True) > 0:
            return ranges, []
        reason = describe_invalid(mm, final, end, offset)
    warning = f"CommitLog ends at a torn record at offset {offset} ({reason})"
    trimmed = [*ranges[:-1]]
    if offset > last.start:
        trimmed.append(replace(last, end=offset))
    return trimmed, [warning]


def _arrow_schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32()}
    fields = [pa.field(name, types[kind]) for name, kind in COLUMNS]
    return pa.schema([*fields, pa.field(STORE_TIME, pa.timestamp("ms", tz="UTC"))])


#: Rows one ``key_columns`` call lays out at most (a 64 MiB range holds ~250K of ~770-byte records).
MAX_ROWS = 1 << 20
_I32 = struct.Struct(">i")


def range_table(rng: CommitLogRange, schema):  # type: ignore[no-untyped-def]
    """The key rows of one range as one Arrow table of ``schema`` (None without rows): what
    ``range_rows`` yields, laid out by ``key_columns`` (compiled when built) over the stretches
    ``record.whole_run`` checks, and by ``record_rows`` for a record it leaves to the row path. A
    record that does not check raises with its offset, as ``range_rows`` does."""
    import pyarrow as pa

    pieces = []
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        base = rng.file_start
        pos = rng.start - base
        end = rng.end - base
        while pos < end:
            stop, _n = record.whole_run(mm, pos, end, base, end, 1 << 62)
            while pos < stop:
                why, pos, n, columns = key_columns(mm, pos, stop, base, MAX_ROWS)
                if n:
                    pieces.append(_columns_table(pa, schema, n, columns))
                if why == SPECIAL:
                    size = _I32.unpack_from(mm, pos)[0]
                    rows = record_rows(mm, pos, base + pos, rng.path)
                    if rows:
                        pieces.append(_rows_table(pa, schema, rows))
                    pos += size
            if pos < end:
                offset = base + pos
                raise CorruptRecordError(rng.path, offset, describe_invalid(mm, pos, end, offset))
    if not pieces:
        return None
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces).combine_chunks()


def _with_store_time(pa, schema, arrays: list):  # type: ignore[no-untyped-def]
    ts = COLUMN_NAMES.index("store_timestamp")
    arrays.append(arrays[ts].cast(pa.timestamp("ms", tz="UTC")))
    return pa.Table.from_arrays(arrays, schema=schema)


def _columns_table(pa, schema, n: int, columns: list):  # type: ignore[no-untyped-def]
    """A table from ``key_columns``' buffers."""
    arrays = []
    for i, (_name, kind) in enumerate(COLUMNS):
        column = columns[i]
        if kind == "string":
            valid, offsets, data = column
            buffers = [
                None if valid is None else pa.py_buffer(valid),
                pa.py_buffer(offsets),
                pa.py_buffer(data),
            ]
            arrays.append(pa.Array.from_buffers(pa.string(), n, buffers))
        else:
            arrays.append(pa.Array.from_buffers(schema.field(i).type, n, [None, pa.py_buffer(column)]))
    return _with_store_time(pa, schema, arrays)


def _rows_table(pa, schema, rows: list):  # type: ignore[no-untyped-def]
    """A table from ``record_rows``' tuples."""
    columns = list(zip(*rows, strict=True))
    return _with_store_time(
        pa, schema, [pa.array(col, type=schema.field(i).type) for i, col in enumerate(columns)]
    )


def export_keys_local(
    config: StoreConfig,
    out: Path,
    *,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
) -> ExportResult:
    """Write the key table with pyarrow, one row group per range, into ``out/part-00000.parquet``."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise PipelineError("the local export engine needs pyarrow: pip install 'rmq-query[spark]'") from exc
    started = time.monotonic()
    stream = progress_out if progress_out is not None else sys.stderr
    target = range_bytes or DEFAULT_RANGE_BYTES
    ranges, warnings = export_ranges([plan_file(f, target) for f in commitlog_files(config)])
    schema = _arrow_schema()
    rows = scanned = 0
    # a bar redrawn on a terminal, a line every 10 s in a log (one line per range flooded logs)
    progress = ProgressLine("export keys", sum(rng.end - rng.start for rng in ranges), stream)
    with staged_output(Path(out)) as staging:
        with pq.ParquetWriter(staging / LOCAL_FILE_NAME, schema) as writer:
            for rng in ranges:
                table = range_table(rng, schema)
                if table is not None:
                    writer.write_table(table)
                    rows += table.num_rows
                scanned += rng.end - rng.start
                progress.update(scanned)
    progress.finish()
    return ExportResult(Path(out), rows, scanned, time.monotonic() - started, warnings)


def _spark_schema():  # type: ignore[no-untyped-def]
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "long": T.LongType(), "int": T.IntegerType()}
    return T.StructType([T.StructField(name, types[kind], nullable=True) for name, kind in COLUMNS])


def export_keys_spark(
    config: StoreConfig,
    out: Path,
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    spark_conf: Mapping[str, str] | None = None,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
) -> ExportResult:
    """Write the key table on Spark, one Parquet part file per CommitLog range, into ``out``."""
    files = commitlog_files(config)
    with spark_job(
        files, master=master, spark=spark, spark_conf=spark_conf, progress_out=progress_out
    ) as job:
        from pyspark.sql import functions as F

        ranges, warnings = export_ranges(job.plan(range_bytes or DEFAULT_RANGE_BYTES))
        job.label = "export keys"
        with staged_output(Path(out)) as staging:
            rdd = job.sc.parallelize(ranges, max(1, len(ranges))).flatMap(range_rows)
            frame = job.session.createDataFrame(rdd, _spark_schema()).withColumn(
                STORE_TIME, F.timestamp_millis(F.col("store_timestamp"))
            )
            with job.stage("export keys"):
                frame.write.mode("overwrite").parquet(str(staging))
            rows = job.session.read.parquet(str(staging)).count()
    return ExportResult(Path(out), rows, sum(r.end - r.start for r in ranges), job.seconds, warnings)
