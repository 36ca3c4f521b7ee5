"""One table row per CommitLog record: the columns of ``spark.read.format("rocketmq")`` and how a
range of records becomes rows.

A row is what the project's record codec (``protocol.message.decode_message``, the decoder every
other reader of a record uses) says about the record, laid out as columns; nothing here reads a
field itself. The range is walked by the Spark pipeline's walk (``range_walk.walk_range``: every
record fully checked, as the rebuilds check it), so the table holds exactly the records the
sequential walk finds.

Kept free of PySpark: the rows are plain tuples, tested without a JVM, and the same function serves
``rmq-query export``'s sequential engine.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from protocol.message_flags import (
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from store.commitlog import record
from store.commitlog.record import describe_invalid, store_timestamp
from store.spark.errors import CorruptRecordError
from store.spark.range_walk import walk_range
from store.spark.ranges import CommitLogRange

#: The table's columns, in order: (name, Spark SQL type). ``docs/spark-tables.md`` says what each holds.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("brokerName", "string"),
    ("topic", "string"),
    ("queueId", "int"),
    ("queueOffset", "bigint"),
    ("commitLogOffset", "bigint"),
    ("storeSize", "int"),
    ("offsetMsgId", "string"),
    ("uniqueKey", "string"),
    ("keys", "array<string>"),
    ("tags", "string"),
    ("storeTimestamp", "bigint"),
    ("bornTimestamp", "bigint"),
    ("bornHost", "string"),
    ("storeHost", "string"),
    ("reconsumeTimes", "int"),
    ("flag", "int"),
    ("sysFlag", "int"),
    ("transactionState", "string"),
    ("preparedTransactionOffset", "bigint"),
    ("properties", "map<string,string>"),
    ("body", "binary"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)


def ddl_schema(columns: Iterable[str] = COLUMN_NAMES) -> str:
    """The Spark DDL schema of ``columns`` (in the table's order, whatever order they are given in)."""
    wanted = set(columns)
    return ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS if name in wanted)


def parse_columns(text: str | None) -> tuple[str, ...]:
    """The ``columns`` option (comma-separated names) as table-ordered names; all when not given.

    An unknown name is refused with the list of known ones, rather than giving a table without it.
    """
    if text is None or not text.strip():
        return COLUMN_NAMES
    asked = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in asked if name not in COLUMN_NAMES]
    if unknown:
        raise ValueError(f"unknown column(s) {', '.join(unknown)}; the table has {', '.join(COLUMN_NAMES)}")
    wanted = set(asked)
    return tuple(name for name in COLUMN_NAMES if name in wanted)


@dataclass(frozen=True, slots=True)
class RowFilter:
    """What a read keeps: the pushed-down filters, each ``None`` when absent.

    ``topics``: the record's topic is one of these. ``min_store_ts`` / ``max_store_ts``: inclusive
    bounds on STORETIMESTAMP (read from the record's fixed part before anything is decoded).
    ``queued_only``: only records the broker puts in a consume queue (not prepared, not rolled back)
    -- set when the ranges were narrowed by the ConsumeQueues, so the rows do not depend on which
    ranges happened to be read (``topic_ranges``).
    ``keys`` / ``unique_keys``: the record's KEYS tokens hold one of these / its UNIQ_KEY is one of
    these. ``indexed_only``: only records the broker indexes (not rolled back) -- set when the
    records were found through the IndexFiles (``key_lookup``), for the same reason.
    """

    topics: frozenset[str] | None = None
    min_store_ts: int | None = None
    max_store_ts: int | None = None
    queued_only: bool = False
    keys: frozenset[str] | None = None
    unique_keys: frozenset[str] | None = None
    indexed_only: bool = False

    def keeps_time(self, ts: int) -> bool:
        return (self.min_store_ts is None or ts >= self.min_store_ts) and (
            self.max_store_ts is None or ts <= self.max_store_ts
        )

    def keeps(self, msg: MessageExt) -> bool:
        if self.topics is not None and msg.topic not in self.topics:
            return False
        kind = msg.sys_flag & TRANSACTION_TYPE_MASK
        if self.queued_only and kind in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return False
        if self.indexed_only and kind == TRANSACTION_ROLLBACK_TYPE:
            return False
        if self.keys is not None and self.keys.isdisjoint(msg.keys):
            return False
        if self.unique_keys is not None and msg.properties.get(PROPERTY_UNIQ_KEY) not in self.unique_keys:
            return False
        return True


NO_FILTER = RowFilter()

_TRANSACTION_STATES = {
    TRANSACTION_NOT_TYPE: "NOT",
    TRANSACTION_PREPARED_TYPE: "PREPARED",
    TRANSACTION_COMMIT_TYPE: "COMMIT",
    TRANSACTION_ROLLBACK_TYPE: "ROLLBACK",
}


def _full_row(msg: MessageExt, broker: str) -> tuple:
    """Every column of a decoded record, in ``COLUMNS`` order (one expression: this runs per row).

    Hosts are ``ip:port`` as the Java client prints a ``SocketAddress`` (without its ``/``).
    """
    props = msg.properties
    return (
        broker,
        msg.topic,
        msg.queue_id,
        msg.queue_offset,
        msg.commit_log_offset,
        msg.store_size,
        msg.offset_msg_id,
        props.get(PROPERTY_UNIQ_KEY),
        msg.keys,
        props.get(PROPERTY_TAGS),
        msg.store_timestamp,
        msg.born_timestamp,
        f"{msg.born_host}:{msg.born_port}",
        f"{msg.store_host}:{msg.store_port}",
        msg.reconsume_times,
        msg.flag,
        msg.sys_flag,
        _TRANSACTION_STATES[msg.sys_flag & TRANSACTION_TYPE_MASK],
        msg.prepared_transaction_offset,
        props,
        msg.body,
    )


def row_maker(columns: tuple[str, ...] = COLUMN_NAMES) -> Callable[[MessageExt, str], tuple]:
    """``make(msg, broker)``: the row of a decoded record with ``columns``, in that order."""
    if columns == COLUMN_NAMES:
        return _full_row
    pick = [COLUMN_NAMES.index(name) for name in columns]

    def make(msg: MessageExt, broker: str) -> tuple:
        full = _full_row(msg, broker)
        return tuple(full[i] for i in pick)

    return make


def message_row(msg: MessageExt, broker: str, columns: tuple[str, ...] = COLUMN_NAMES) -> tuple:
    """The row of one decoded record, ``columns`` in order."""
    return row_maker(columns)(msg, broker)


def decode_row(
    buf: memoryview | bytes,
    pos: int,
    broker: str,
    columns: tuple[str, ...] = COLUMN_NAMES,
    row_filter: RowFilter = NO_FILTER,
    make: Callable[[MessageExt, str], tuple] | None = None,
) -> tuple | None:
    """The row of the record at ``buf[pos]`` when ``row_filter`` keeps it, else None.

    The store time is checked before anything is decoded; the body is read (and inflated when the
    store compressed it) only when ``body`` is one of ``columns``. ``ProtocolError`` when the record's
    fields do not decode (or its body will not inflate).
    """
    if (row_filter.min_store_ts is not None or row_filter.max_store_ts is not None) and not (
        row_filter.keeps_time(store_timestamp(buf, pos))
    ):
        return None
    msg = decode_message(buf, pos, read_body="body" in columns, decompress=True)
    if not row_filter.keeps(msg):
        return None
    return (make or row_maker(columns))(msg, broker)


def range_rows(
    rng: CommitLogRange,
    broker: str,
    columns: tuple[str, ...] = COLUMN_NAMES,
    row_filter: RowFilter = NO_FILTER,
) -> Iterator[tuple]:
    """The rows of every record in ``rng`` that ``row_filter`` keeps, in CommitLog order.

    The range is walked as the rebuilds walk theirs (``walk_range``); a record that does not check,
    or whose fields do not decode, is not skipped silently: it raises ``CorruptRecordError`` with its
    file and offset (a table that quietly lacks messages would be wrong data). The planner leaves a
    torn last record out before the ranges get here (``export.without_torn_tail``).
    """
    rows: list[tuple] = []
    failure: list[str] = []
    make = row_maker(columns)

    def visit(view: memoryview, pos: int, _size: int) -> bool:
        try:
            row = decode_row(view, pos, broker, columns, row_filter, make)
        except ProtocolError as exc:
            failure.append(str(exc))
            return False
        if row is not None:
            rows.append(row)
        return True

    walk = walk_range(rng, visit)
    if walk.bad:
        offset, reason = walk.bad[0]
        detail = failure[0] if failure else reason
        raise CorruptRecordError(rng.path, offset, detail)
    return iter(rows)


def record_rows(
    rng: CommitLogRange,
    offsets: tuple[int, ...],
    broker: str,
    columns: tuple[str, ...] = COLUMN_NAMES,
    row_filter: RowFilter = NO_FILTER,
) -> Iterator[tuple]:
    """The rows of the records at ``offsets`` (absolute, inside ``rng``'s file), in that order.

    The ConsumeQueues' way in (``message_plan.narrow_by_queues``): only the records a queue names are
    read, each checked in full at its own offset (PHYSICALOFFSET, BODYCRC) as the walk would check it.
    A queue entry that does not name a whole record (a queue left behind by a CommitLog that was
    replaced) raises ``CorruptRecordError``: the read is refused rather than silently short.
    """
    rows: list[tuple] = []
    make = row_maker(columns)
    base = rng.file_start
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        # The records named are scattered among other topics': without this, every page fault
        # would read ahead (128 KiB by default) and bring in the neighbours' records as well.
        mm.madvise(mmap.MADV_RANDOM)
        view = memoryview(mm)
        try:
            for offset in offsets:
                pos = offset - base
                reason = ""
                if 0 <= pos < len(mm) and record.check(view, pos, len(mm), offset, check_crc=True) > 0:
                    try:
                        row = decode_row(view, pos, broker, columns, row_filter, make)
                    except ProtocolError as exc:
                        reason = str(exc)
                    else:
                        if row is not None:
                            rows.append(row)
                        continue
                else:
                    reason = describe_invalid(view, pos, len(mm), offset) if 0 <= pos < len(mm) else ""
                raise CorruptRecordError(
                    rng.path,
                    offset,
                    f"a ConsumeQueue or IndexFile entry names no whole record here"
                    f" ({reason or 'outside the file'}); rebuild them (rmq-query rebuild-index) or read"
                    " with useConsumeQueues=false and useIndex=false",
                )
        finally:
            view.release()
    return iter(rows)
