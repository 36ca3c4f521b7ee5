"""``spark.read.format("rocketmq").load(STORE_DIR)``: a RocketMQ store as a Spark table, one row per
message, through PySpark's Python Data Source API (PySpark >= 4.1 for its filter pushdown).

``register(spark)`` makes the format known to a session. Each read task is one CommitLog range
(``message_plan``), decoded in a Python worker by ``message_rows.range_rows``. What the reader
takes from the query:

- filters on ``topic`` (``=``, ``IN``): the ConsumeQueues pick and narrow the ranges, unless the
  ``useConsumeQueues`` option is ``false``; filters on ``storeTimestamp`` (``=``, ``<``, ``<=``,
  ``>``, ``>=``): a record out of range is passed over before it is decoded. Spark evaluates every
  filter again on the rows, so a filter the reader cannot use costs time, never correctness.
- the ``key`` option (Spark passes no ``array_contains`` filter to a Python reader) and
  ``uniqueKey`` (``=``, ``IN``): the IndexFiles name the records (``key_lookup``), unless the
  ``useIndex`` option is ``false``; each is checked to really hold the key.
- columns: PySpark's Python Data Source API (4.x) does not tell a reader which columns a query
  selects, so the ``columns`` option (comma-separated names) does: the table then has only those,
  and without ``body`` no body is read or inflated.

This module imports PySpark; the rest of the pipeline's table code (``message_rows``,
``message_plan``) does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from store.spark.message_plan import DEFAULT_TABLE_RANGE_BYTES, TableRange, open_store, plan_store
from store.spark.message_rows import RowFilter, ddl_schema, parse_columns, range_rows, record_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT = "rocketmq"

#: The session setting without which Spark refuses a Python reader that takes filters.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make ``format("rocketmq")`` known to ``spark`` and let its reader take filters."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(RocketMQDataSource)


def store_paths(options: dict[str, str]) -> list[str]:
    """The stores a read names: ``load(path)`` or ``load([path, ...])`` (Spark passes a list as the
    JSON ``paths`` option), or the ``path`` / ``paths`` options themselves."""
    paths: list[str] = []
    if options.get("path"):
        paths.append(options["path"])
    if options.get("paths"):
        raw = options["paths"]
        try:
            listed = json.loads(raw)
        except ValueError:
            listed = [p for p in raw.split(",") if p.strip()]
        paths.extend(str(p) for p in (listed if isinstance(listed, list) else [listed]))
    if not paths:
        raise ValueError('format("rocketmq") needs a store: load("/path/to/store") or load([paths])')
    return paths


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    if value.strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, got {value!r}")


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format: options ``columns``, ``key``, ``useConsumeQueues``, ``useIndex``,
    ``rangeMiB``, ``brokerName`` (one store only), and the store paths."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return ddl_schema(parse_columns({str(k).lower(): v for k, v in self.options.items()}.get("columns")))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RocketMQStreamReader({str(k).lower(): str(v) for k, v in self.options.items()}, schema)

    def reader(self, schema: Any) -> DataSourceReader:
        # Spark hands options over with lower-cased names (``rangeMiB`` arrives as ``rangemib``).
        return RocketMQReader({str(k).lower(): str(v) for k, v in self.options.items()}, schema)


class MessageRange(InputPartition):
    """One read task: a ``TableRange`` (picklable, as Spark ships partitions to executors)."""

    def __init__(self, task: TableRange) -> None:
        super().__init__(task.rng.index)
        self.task = task


class RocketMQReader(DataSourceReader):
    """Plans the ranges (on the driver) and decodes one per task (in the executors)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        """``options`` with lower-cased names; ``schema`` the table's (``RocketMQDataSource.schema``)."""
        self.schema = schema
        self.paths = store_paths(options)
        self.columns = parse_columns(options.get("columns"))
        self.use_queues = _flag(options, "useconsumequeues", True)
        mib = options.get("rangemib")
        self.range_bytes = int(mib) * 1024 * 1024 if mib else DEFAULT_TABLE_RANGE_BYTES
        if self.range_bytes <= 0:
            raise ValueError(f"option rangeMiB must be positive, got {mib!r}")
        self.broker = options.get("brokername")
        if self.broker and len(self.paths) > 1:
            raise ValueError("option brokerName names one store; several paths take theirs from broker.conf")
        self.use_index = _flag(options, "useindex", True)
        #: The ``key`` option: rows whose keys hold one of these (space-separated: a KEYS token never
        #: holds a space, the broker splits KEYS on them). Spark has no way to pass
        #: ``array_contains(keys, ...)`` to a Python reader, so the option says it.
        self.keys = frozenset(options.get("key", "").split()) or None
        if options.get("key") is not None and self.keys is None:
            raise ValueError("option key names no key (keys are separated by spaces)")
        self.row_filter = self._filter(None, None, None, None)

    def _filter(
        self, topics: set[str] | None, lo: int | None, hi: int | None, unique_keys: set[str] | None
    ) -> RowFilter:
        return RowFilter(
            None if topics is None else frozenset(topics),
            lo,
            hi,
            queued_only=topics is not None and self.use_queues,
            keys=self.keys,
            unique_keys=None if unique_keys is None else frozenset(unique_keys),
            indexed_only=self.use_index and (self.keys is not None or unique_keys is not None),
        )

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Take what the planner and the walk can use; hand every filter back for Spark to apply."""
        topics: set[str] | None = None
        unique_keys: set[str] | None = None
        lo: int | None = None
        hi: int | None = None
        for f in filters:
            # ``Not`` has a child filter, no attribute: such a filter is Spark's alone.
            attribute = getattr(f, "attribute", ())
            column = attribute[0] if len(attribute) == 1 else None
            if column == "topic" and isinstance(f, (EqualTo, In)):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                found = {v for v in values if isinstance(v, str)}
                topics = found if topics is None else topics & found
            elif column == "uniqueKey" and isinstance(f, (EqualTo, In)):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                found = {v for v in values if isinstance(v, str)}
                unique_keys = found if unique_keys is None else unique_keys & found
            elif column == "storeTimestamp" and isinstance(f.value if hasattr(f, "value") else None, int):
                value = f.value  # type: ignore[attr-defined]
                if isinstance(f, (EqualTo, GreaterThanOrEqual)):
                    lo = value if lo is None else max(lo, value)
                if isinstance(f, GreaterThan):
                    lo = value + 1 if lo is None else max(lo, value + 1)
                if isinstance(f, (EqualTo, LessThanOrEqual)):
                    hi = value if hi is None else min(hi, value)
                if isinstance(f, LessThan):
                    hi = value - 1 if hi is None else min(hi, value - 1)
        self.row_filter = self._filter(topics, lo, hi, unique_keys)
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        tasks: list[TableRange] = []
        for path in self.paths:
            source = open_store(path, self.broker)
            planned, _warnings = plan_store(source, self.row_filter, self.range_bytes)
            tasks.extend(planned)
        # Ranges are numbered per store; the partitions, across all of them.
        return [MessageRange(replace(t, rng=replace(t.rng, index=i))) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The task's rows as Arrow record batches of ``BATCH_ROWS``: handed to Spark as they are,
        where tuples would each be checked and converted value by value (~2x the time here)."""
        task: TableRange = partition.task  # type: ignore[attr-defined]
        if task.offsets is not None:
            rows = record_rows(task.rng, task.offsets, task.broker, self.columns, task.row_filter)
        else:
            rows = range_rows(task.rng, task.broker, self.columns, task.row_filter)
        return _batches(list(rows), self.schema)


#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 8192


def _batches(rows: list[tuple], schema: StructType) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC")
    for at in range(0, len(rows), BATCH_ROWS):
        chunk = rows[at : at + BATCH_ROWS]
        columns = list(zip(*chunk, strict=True))
        arrays = [pa.array(list(col), type=arrow.field(i).type) for i, col in enumerate(columns)]
        yield pa.RecordBatch.from_arrays(arrays, schema=arrow)


class RocketMQStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("rocketmq")``: the records a live store's writer appends, as
    micro-batches. The source offset is ``{"offsets": {path: CommitLog offset}}``, each a record
    boundary (``message_stream``): a query restarted from its checkpoint goes on exactly there.
    Option ``startingOffsets``: ``earliest`` (default, the whole store first) or ``latest``."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.schema = schema
        self.paths = store_paths(options)
        self.columns = parse_columns(options.get("columns"))
        mib = options.get("rangemib")
        self.range_bytes = int(mib) * 1024 * 1024 if mib else DEFAULT_TABLE_RANGE_BYTES
        self.broker = options.get("brokername")
        self.starting = options.get("startingoffsets", "earliest").strip().lower()
        if self.starting not in ("earliest", "latest"):
            raise ValueError(f"option startingOffsets must be earliest or latest, got {self.starting!r}")

    def initialOffset(self) -> dict:
        from store.spark.message_stream import first_offset, whole_records_end

        offsets = {}
        for path in self.paths:
            config = open_store(path, self.broker).config
            start = first_offset(config)
            offsets[path] = whole_records_end(config, start) if self.starting == "latest" else start
        return {"offsets": offsets}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        """Where each store's whole records end now (every new record: no read limit is offered)."""
        from store.spark.message_stream import first_offset, whole_records_end

        offsets = {}
        for path in self.paths:
            config = open_store(path, self.broker).config
            # A store added to the query since its checkpoint is read from its beginning.
            at = start["offsets"].get(path)
            offsets[path] = whole_records_end(config, first_offset(config) if at is None else int(at))
        return {"offsets": offsets}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        from store.spark.message_stream import first_offset, ranges_between

        tasks: list[TableRange] = []
        for path in self.paths:
            source = open_store(path, self.broker)
            lo = start["offsets"].get(path)
            lo = first_offset(source.config) if lo is None else int(lo)
            hi = int(end["offsets"][path])
            for rng in ranges_between(source.config, lo, hi, self.range_bytes):
                tasks.append(TableRange(source.broker, rng, RowFilter()))
        return [MessageRange(replace(t, rng=replace(t.rng, index=i))) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        task: TableRange = partition.task  # type: ignore[attr-defined]
        return _batches(list(range_rows(task.rng, task.broker, self.columns)), self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to release: the store is only read."""
