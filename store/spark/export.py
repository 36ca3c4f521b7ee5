"""``export-keys``: write the key index of a store as a Parquet dataset, locally or on Spark.

Both engines write a directory of Parquet files with the columns of ``key_table`` plus
``store_time`` (UTC timestamp, milliseconds), rows in CommitLog order. The local engine (pyarrow)
streams one row group per CommitLog range into a single file, so memory stays bounded by one range;
the Spark engine decodes ranges in parallel and writes one part file per range. Either way the output
is written beside the destination and swapped in only when complete.
"""

from __future__ import annotations

import mmap
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
from store.spark.errors import PipelineError
from store.spark.job import commitlog_files, spark_job
from store.spark.key_table import COLUMN_NAMES, COLUMNS, STORE_TIME, range_rows
from store.spark.progress import render_bar
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


def export_keys_local(
    config: StoreConfig,
    out: Path,
    *,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
) -> ExportResult:
    """Write the key table with pyarrow, one row group per range, into ``out/part-00000.parquet``."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise PipelineError("the local export engine needs pyarrow: pip install 'rmq-query[spark]'") from exc
    started = time.monotonic()
    stream = progress_out if progress_out is not None else sys.stderr
    target = range_bytes or DEFAULT_RANGE_BYTES
    ranges, warnings = export_ranges([plan_file(f, target) for f in commitlog_files(config)])
    schema = _arrow_schema()
    rows = scanned = 0
    with staged_output(Path(out)) as staging:
        with pq.ParquetWriter(staging / LOCAL_FILE_NAME, schema) as writer:
            for done, rng in enumerate(ranges, start=1):
                columns: list[list[object]] = [[] for _ in COLUMN_NAMES]
                for row in range_rows(rng):
                    for column, value in zip(columns, row, strict=True):
                        column.append(value)
                if columns[0]:
                    arrays = [pa.array(col, type=schema.field(i).type) for i, col in enumerate(columns)]
                    ts = COLUMN_NAMES.index("store_timestamp")
                    arrays.append(arrays[ts].cast(pa.timestamp("ms", tz="UTC")))
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                    rows += len(columns[0])
                scanned += rng.end - rng.start
                stream.write(render_bar("export keys", done, len(ranges), unit="ranges") + "\n")
                stream.flush()
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
