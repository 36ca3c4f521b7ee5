"""A stretch of checked records' key rows laid out as Arrow buffers: the local ``export-keys``' step.

``key_table.range_rows`` decodes every record into a ``MessageExt`` and yields each row as a tuple,
which the local engine then appended column by column (10.7 us a record). ``key_columns`` reads the
records of ``view[pos:end]`` (already checked by ``record.whole_run``) by TOTALSIZE and lays out the
same rows, in the same order, as the buffers of the Arrow arrays the engine writes: for each string
column of ``key_table.COLUMNS`` ``(validity bitmap or None, int32 offsets, UTF-8 data)``, for each
number column its little-endian values. It has a compiled twin of the same name and arguments
(``store/spark/_key_columns_fast.c``); this is the readable reference, and the tests compare both
with ``range_rows``.

``(stop, pos, rows, columns)``: it stops (``SPECIAL``) before a record whose topic or properties
hold a byte >= 0x80 (their text is decoded with "replace" by the row path, which the caller uses for
that record) or whose lengths do not fit it; at ``END``; or at ``BUDGET`` before a record whose rows
would pass ``max_rows`` (a record's rows are never split; the first record is always taken).
"""

from __future__ import annotations

import struct
from array import array

from protocol.accel import load
from protocol.message_flags import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY
from protocol.message_properties import string_to_properties
from protocol.record_layout import (
    BODY_LENGTH_WIDTH,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    PROPERTIES_LENGTH_WIDTH,
    SIZE_MAGIC_WIDTH,
    STORE_TIMESTAMP_WIDTH,
    TOPIC_LENGTH_WIDTH_V1,
    TOPIC_LENGTH_WIDTH_V2,
    body_length_at,
    head_struct,
    store_host_width,
    store_timestamp_at,
)
from store.spark.key_table import KIND_KEYS, KIND_UNIQ_KEY

__all__ = ["BUDGET", "END", "SPECIAL", "key_columns"]

END = 0
SPECIAL = 1
BUDGET = 2

_HEAD = head_struct("TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET", "SYSFLAG")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TX_MASK = 0xC
_TX_ROLLBACK = 0xC
#: Which columns (key_table.COLUMNS order) hold strings, and which may be null.
_STRING = (True, True, True, True, True, False, False, False, True, False, False)
_NULLABLE = (False, False, False, True, False, False, False, False, True, False, False)
_NUMBER_TYPE = {5: "q", 6: "i", 7: "q", 9: "i", 10: "q"}


class _Columns:
    def __init__(self) -> None:
        self.values: list[list[object]] = [[] for _ in _STRING]

    def add(self, row: tuple[object, ...]) -> None:
        for column, value in zip(self.values, row, strict=True):
            column.append(value)

    def out(self) -> list[object]:
        out: list[object] = []
        for i, column in enumerate(self.values):
            if not _STRING[i]:
                numbers = array(_NUMBER_TYPE[i], column)  # type: ignore[arg-type]
                if numbers.itemsize > 1 and struct.pack("=h", 1) != struct.pack("<h", 1):
                    numbers.byteswap()
                out.append(numbers.tobytes())
                continue
            offsets = array("i", [0])
            data = bytearray()
            valid = bytearray((len(column) + 7) // 8)
            nulls = 0
            for row, value in enumerate(column):
                if value is None:
                    nulls += 1
                else:
                    data += value.encode()  # type: ignore[attr-defined]
                    valid[row >> 3] |= 1 << (row & 7)
                offsets.append(len(data))
            if struct.pack("=h", 1) != struct.pack("<h", 1):
                offsets.byteswap()
            out.append((bytes(valid) if _NULLABLE[i] and nulls else None, offsets.tobytes(), bytes(data)))
        return out


def key_columns(
    view: memoryview | bytes, pos: int, end: int, base: int, max_rows: int
) -> tuple[int, int, int, list[object]]:
    """The key rows of the checked records of ``view[pos:end]`` as Arrow buffers; see the module docstring."""
    if pos < 0 or end > len(view) or pos > end:
        raise ValueError("key_columns: need 0 <= pos <= end <= len(view)")
    columns = _Columns()
    rows = 0
    while True:
        if pos >= end:
            return END, pos, rows, columns.out()
        if end - pos < SIZE_MAGIC_WIDTH:
            break
        total, magic, queue_id, queue_offset, sys_flag = _HEAD.unpack_from(view, pos)
        if total < MIN_RECORD_SIZE or total > end - pos:
            break
        if sys_flag & _TX_MASK == _TX_ROLLBACK:
            pos += total  # no rows: the broker leaves it out of the index
            continue
        p = body_length_at(sys_flag)
        if p + BODY_LENGTH_WIDTH > total:
            break
        body_len = _I32.unpack_from(view, pos + p)[0]
        if body_len < 0:
            break
        p += BODY_LENGTH_WIDTH + body_len
        if magic == MAGIC_CODE_V2:
            if p + TOPIC_LENGTH_WIDTH_V2 > total:
                break
            topic_len = _I16.unpack_from(view, pos + p)[0]
            p += TOPIC_LENGTH_WIDTH_V2
        else:
            if p + TOPIC_LENGTH_WIDTH_V1 > total:
                break
            topic_len = view[pos + p]
            p += TOPIC_LENGTH_WIDTH_V1
        if topic_len < 0 or p + topic_len + PROPERTIES_LENGTH_WIDTH > total:
            break
        raw_topic = bytes(view[pos + p : pos + p + topic_len])
        p += topic_len
        props_len = _I16.unpack_from(view, pos + p)[0]
        p += PROPERTIES_LENGTH_WIDTH
        if props_len < 0 or p + props_len > total:
            break
        raw_props = bytes(view[pos + p : pos + p + props_len])
        if not (raw_topic.isascii() and raw_props.isascii()):
            break
        props = string_to_properties(raw_props.decode())
        uniq, tags, keys = props.get(PROPERTY_UNIQ_KEY), props.get(PROPERTY_TAGS), props.get(PROPERTY_KEYS)
        tokens = [k for k in keys.split(" ") if k] if keys else []
        want = (uniq is not None) + len(tokens)
        if rows > 0 and rows + want > max_rows:
            return BUDGET, pos, rows, columns.out()
        offset = base + pos
        host_at = store_timestamp_at(sys_flag) + STORE_TIMESTAMP_WIDTH
        host = bytes(view[pos + host_at : pos + host_at + store_host_width(sys_flag)])
        msg_id = (host + _I64.pack(offset)).hex().upper()
        store_ts = _I64.unpack_from(view, pos + store_timestamp_at(sys_flag))[0]
        topic = raw_topic.decode()
        common = (msg_id, offset, total, store_ts, tags, queue_id, queue_offset)
        if uniq is not None:
            columns.add((topic, uniq, KIND_UNIQ_KEY, uniq, *common))
            rows += 1
        for key in tokens:
            columns.add((topic, key, KIND_KEYS, uniq, *common))
            rows += 1
        pos += total
    return SPECIAL, pos, rows, columns.out()


#: The pure-Python reference under its own name (the tests compare it with the compiled twin).
key_columns_reference = key_columns

_fast = load("store.spark._key_columns_fast")
if _fast is not None:
    key_columns = _fast.key_columns  # the compiled twin of the reference above
