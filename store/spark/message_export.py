"""``rmq-query export``: a store's messages (the ``rocketmq`` table's rows) as Parquet or JSON lines.

Two engines, one answer. The sequential engine runs the table's read tasks (``message_plan``) one
after another in this process and streams each task's rows out (one Parquet row group, or its JSON
lines), so memory stays bounded by one task; ``--engine spark`` reads the same tasks through
``spark.read.format("rocketmq")`` and lets Spark write one part file per task. Either way the output
is a directory written beside the destination and swapped in only when complete (``staged_output``).

JSON lines hold one object per message with the table's column names; ``body`` is base64 (both
msgspec and Spark's JSON writer encode binary so), ``properties`` an object, ``keys`` a list.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from store.spark.errors import PipelineError
from store.spark.message_plan import DEFAULT_TABLE_RANGE_BYTES, TableRange, open_store, plan_store
from store.spark.message_rows import COLUMNS, RowFilter, range_rows, record_rows
from store.spark.progress import render_bar
from store.staging import staged_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS = ("parquet", "jsonl")
LOCAL_NAMES = {"parquet": "part-00000.parquet", "jsonl": "part-00000.jsonl"}


@dataclass(slots=True)
class MessageExportResult:
    """What an export wrote."""

    out: Path
    rows: int
    tasks: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def _arrow_schema(columns: tuple[str, ...]):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "array<string>": pa.list_(pa.string()),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
        "binary": pa.binary(),
    }
    kinds = dict(COLUMNS)
    return pa.schema([pa.field(name, types[kinds[name]]) for name in columns])


def task_rows(task: TableRange, columns: tuple[str, ...]) -> list[tuple]:
    """The rows of one read task, as the Spark reader's ``read`` produces them."""
    if task.offsets is not None:
        return list(record_rows(task.rng, task.offsets, task.broker, columns, task.row_filter))
    return list(range_rows(task.rng, task.broker, columns, task.row_filter))


def plan_export(
    paths: list[str], row_filter: RowFilter, range_bytes: int | None
) -> tuple[list[TableRange], list[str]]:
    """Every store's read tasks, in path order, and the planners' warnings."""
    tasks: list[TableRange] = []
    warnings: list[str] = []
    for path in paths:
        planned, warned = plan_store(open_store(path), row_filter, range_bytes or DEFAULT_TABLE_RANGE_BYTES)
        tasks.extend(planned)
        warnings.extend(warned)
    return tasks, warnings


def export_messages_local(
    paths: list[str],
    out: Path,
    fmt: str,
    *,
    columns: tuple[str, ...],
    row_filter: RowFilter,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
) -> MessageExportResult:
    """The sequential engine: each task in turn, its rows streamed to one file in ``out``."""
    if fmt not in FORMATS:
        raise PipelineError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    started = time.monotonic()
    stream = progress_out if progress_out is not None else sys.stderr
    tasks, warnings = plan_export(paths, row_filter, range_bytes)
    rows = 0
    with staged_output(Path(out)) as staging:
        target = staging / LOCAL_NAMES[fmt]
        writer = _ParquetRows(target, columns) if fmt == "parquet" else _JsonRows(target, columns)
        try:
            for done, task in enumerate(tasks, start=1):
                chunk = task_rows(task, columns)
                writer.write(chunk)
                rows += len(chunk)
                stream.write(render_bar("export", done, len(tasks), unit="ranges") + "\n")
                stream.flush()
        finally:
            writer.close()
    return MessageExportResult(Path(out), rows, len(tasks), time.monotonic() - started, warnings)


class _ParquetRows:
    """Rows as Parquet row groups, one per task (pyarrow)."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise PipelineError("--format parquet needs pyarrow: pip install 'rmq-query[spark]'") from exc
        self._pa = pa
        self.schema = _arrow_schema(columns)
        self.writer = pq.ParquetWriter(path, self.schema)

    def write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        pa = self._pa
        arrays = [
            pa.array(list(col), type=self.schema.field(i).type)
            for i, col in enumerate(zip(*rows, strict=True))
        ]
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))

    def close(self) -> None:
        self.writer.close()


class _JsonRows:
    """Rows as JSON lines (msgspec: bytes become base64)."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        import msgspec

        self.encode = msgspec.json.Encoder().encode
        self.columns = columns
        self.fh = open(path, "wb")

    def write(self, rows: list[tuple]) -> None:
        names = self.columns
        encode = self.encode
        self.fh.write(b"".join(encode(dict(zip(names, row, strict=True))) + b"\n" for row in rows))

    def close(self) -> None:
        self.fh.close()


def export_messages_spark(
    paths: list[str],
    out: Path,
    fmt: str,
    *,
    columns: tuple[str, ...],
    topics: list[str] | None,
    begin: int | None,
    end: int | None,
    use_queues: bool = True,
    keys: frozenset[str] | None = None,
    use_index: bool = True,
    master: str | None = None,
    spark: SparkSession | None = None,
    spark_conf: Mapping[str, str] | None = None,
    range_bytes: int | None = None,
    progress_out: TextIO | None = None,
) -> MessageExportResult:
    """The Spark engine: ``format("rocketmq")`` with the filters as Spark filters (pushed down to the
    reader), written by Spark as one part file per task, its progress on ``progress_out`` (stderr)."""
    from store.spark.progress import SparkProgress
    from store.spark.session import open_session

    if fmt not in FORMATS:
        raise PipelineError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    started = time.monotonic()
    session, owned = (spark, False) if spark is not None else open_session(master, spark_conf)
    try:
        from pyspark.sql import functions as F

        from store.spark.message_source import register

        register(session)
        # The filters need their columns in the table; they are dropped again before writing.
        timed = begin is not None or end is not None
        needed = [*columns, *(["topic"] if topics else []), *(["storeTimestamp"] if timed else [])]
        read_columns = tuple(dict.fromkeys(needed))
        reader: Any = session.read.format("rocketmq").option("columns", ",".join(read_columns))
        reader = reader.option("useConsumeQueues", str(use_queues).lower())
        if keys:
            reader = reader.option("key", " ".join(sorted(keys))).option("useIndex", str(use_index).lower())
        if range_bytes:
            reader = reader.option("rangeMiB", str(max(1, range_bytes // (1024 * 1024))))
        frame = reader.load(list(paths))
        if topics:
            frame = frame.filter(F.col("topic").isin(*topics))
        if begin is not None:
            frame = frame.filter(F.col("storeTimestamp") >= begin)
        if end is not None:
            frame = frame.filter(F.col("storeTimestamp") <= end)
        frame = frame.select(*columns)
        progress = SparkProgress(session.sparkContext, progress_out)
        with staged_output(Path(out)) as staging:
            with progress.stage("export"):
                if fmt == "parquet":
                    frame.write.mode("overwrite").parquet(str(staging))
                else:
                    frame.write.mode("overwrite").json(str(staging))
            written = session.read.schema(frame.schema).format("parquet" if fmt == "parquet" else "json")
            rows = written.load(str(staging)).count()
            tasks = frame.rdd.getNumPartitions()
    finally:
        if owned:
            session.stop()
    return MessageExportResult(Path(out), rows, tasks, time.monotonic() - started)
