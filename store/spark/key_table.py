"""The key index as a table: one row per index entry, the columns ``export-keys`` writes to Parquet.

A row is what the broker's index holds for one key (``topic#key`` → offset, store time) joined with
what an analyst wants next to it: which kind of key it is, the message's ids, size and tags. Rows come
in CommitLog order, and within a record in the broker's put order (``UNIQ_KEY`` first, then each
token of ``KEYS``); rolled-back transactions are left out, as the broker leaves them out of the index.
The column list is declared once here; both the Spark and the local engine build their schema from it.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path

from protocol.errors import ProtocolError
from protocol.message import decode_message
from protocol.message_flags import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from store.commitlog import record
from store.commitlog.record import describe_invalid
from store.spark.errors import CorruptRecordError
from store.spark.ranges import CommitLogRange

KIND_UNIQ_KEY = "UNIQ_KEY"
KIND_KEYS = "KEYS"

#: (column, type) in order; types: "string", "long", "int". ``store_time`` is derived by each engine
#: from ``store_timestamp`` as a UTC timestamp in milliseconds.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("key", "string"),
    ("key_kind", "string"),
    ("unique_id", "string"),
    ("offset_msg_id", "string"),
    ("commitlog_offset", "long"),
    ("size", "int"),
    ("store_timestamp", "long"),
    ("tags", "string"),
    ("queue_id", "int"),
    ("queue_offset", "long"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
STORE_TIME = "store_time"

Row = tuple[str, str, str, str | None, str, int, int, int, str | None, int, int]


def range_rows(rng: CommitLogRange) -> Iterator[Row]:
    """Every key row of one CommitLog range; a record that does not decode raises with its offset."""
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = rng.start - rng.file_start
        end = rng.end - rng.file_start
        while pos < end:
            offset = rng.file_start + pos
            size = record.check(mm, pos, end, offset, check_crc=True)
            if size <= 0:
                raise CorruptRecordError(rng.path, offset, describe_invalid(mm, pos, end, offset))
            yield from record_rows(mm, pos, offset, rng.path)
            pos += size


def record_rows(buf: mmap.mmap | memoryview | bytes, pos: int, offset: int, path: Path) -> list[Row]:
    """The key rows of the checked record at ``buf[pos]`` (CommitLog ``offset``, in file ``path``)."""
    try:
        msg = decode_message(buf, pos, read_body=False)
        offset_msg_id = msg.offset_msg_id
    except ProtocolError as exc:
        raise CorruptRecordError(path, offset, str(exc)) from exc
    if msg.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
        return []
    uniq = msg.unique_key
    size = msg.store_size
    common = (offset_msg_id, offset, size, msg.store_timestamp, msg.tags, msg.queue_id, msg.queue_offset)
    rows: list[Row] = []
    if uniq is not None:
        rows.append((msg.topic, uniq, KIND_UNIQ_KEY, uniq, *common))
    for key in msg.keys:
        rows.append((msg.topic, key, KIND_KEYS, uniq, *common))
    return rows
