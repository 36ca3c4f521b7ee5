"""What a record means to the dispatchers: the reput's decode of one whole CommitLog record.

The broker's reput decodes each record once into a ``DispatchRequest`` (``checkMessageAndReturnSize``)
and hands it to every dispatcher; here each dispatcher's part of it is one function, used by the
dispatcher and by the Spark decode tasks alike, so both engines read a record the same way:

- ``dispatch_entry``: the consume queue entry (topic, queue, queue offset, tagsCode with the
  delivery time of a scheduled message, store time), or None for PREPARED and ROLLBACK records;
- ``index_record``: the topic, store time and keys (``store.index.keys.index_keys``: UNIQ_KEY, then
  each KEYS token; none for a rollback) the index puts. The index dispatcher's compiled
  ``index_range`` decodes the same fields in C (``store.index.index_range`` is its reference and
  calls ``index_record``).

``buf`` is always a record the reput's walk checked (its lengths add up), so neither re-checks it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.custom_header_fields import java_parse_int
from protocol.errors import ProtocolError
from protocol.index_key import java_string_hash
from protocol.message import read_index_fields
from protocol.message_flags import TRANSACTION_TYPE_MASK
from protocol.record_layout import (
    BODY_LENGTH_AT,
    BODY_LENGTH_WIDTH,
    HOST_KIND_SHIFT,
    MAGIC_CODE_V2,
    PROPERTIES_LENGTH_WIDTH,
    STORE_TIMESTAMP_AT,
    TOPIC_LENGTH_WIDTH_V1,
    TOPIC_LENGTH_WIDTH_V2,
    head_struct,
)
from store.consumequeue.consume_queue import deliver_timestamp
from store.errors import StoreError
from store.index.keys import index_keys

__all__ = ["DispatchError", "IndexRecord", "dispatch_entry", "index_record"]

_I32 = struct.Struct(">i")
_TRANSACTION_PREPARED = 0x4
_TRANSACTION_ROLLBACK = 0xC
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


class DispatchError(StoreError):
    """A record the broker's reput would not dispatch (its DELAY is not an int)."""


_HEAD = head_struct("TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_TAGS_NEEDLE = b"\x02TAGS\x01"
_DELAY_NEEDLE = b"\x02DELAY\x01"
#: Decoded topics and tag hashes, by their bytes: a CommitLog repeats a few of each many times.
_TOPICS: dict[bytes, str] = {}
_TAG_CODES: dict[bytes, int] = {}
_CACHE_LIMIT = 4096


def _last_value(props: bytes, needle: bytes) -> str | None:
    """The value Java's ``string2messageProperties`` keeps for a property: its last non-empty one."""
    end = len(props)
    while (at := props.rfind(needle, 0, end)) >= 0:
        start = at + len(needle)
        stop = props.find(b"\x02", start)
        stop = len(props) if stop < 0 else stop
        if stop > start:
            return props[start:stop].decode("utf-8", "replace")
        end = at
    return None


def dispatch_entry(
    buf: memoryview | bytes, delays: tuple[dict[int, int], int]
) -> tuple[str, int, int, int, int] | None:
    """(topic, queueId, queueOffset, tagsCode, storeTimestamp) of the entry a whole record gets, or
    None for PREPARED and ROLLBACK records (raises ``DispatchError`` where the broker's parse fails).

    ``buf`` is one whole record as the CommitLog walk checked it (its lengths add up)."""
    _total, magic, queue_id, queue_offset, _phy, sys_flag = _HEAD.unpack_from(buf, 0)
    tran = sys_flag & TRANSACTION_TYPE_MASK
    if tran == _TRANSACTION_PREPARED or tran == _TRANSACTION_ROLLBACK:
        return None
    kind = (sys_flag >> HOST_KIND_SHIFT) & 3
    store_ts = _I64.unpack_from(buf, STORE_TIMESTAMP_AT[kind])[0]
    p = BODY_LENGTH_AT[kind]
    p += BODY_LENGTH_WIDTH + max(_I32.unpack_from(buf, p)[0], 0)
    if magic == MAGIC_CODE_V2:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += TOPIC_LENGTH_WIDTH_V2
    else:
        topic_len = buf[p]
        p += TOPIC_LENGTH_WIDTH_V1
    raw_topic = bytes(buf[p : p + topic_len])
    topic = _TOPICS.get(raw_topic)
    if topic is None:
        topic = raw_topic.decode("utf-8", "replace")
        if len(_TOPICS) < _CACHE_LIMIT:
            _TOPICS[raw_topic] = topic
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    if props_len <= 0:
        return topic, queue_id, queue_offset, 0, store_ts
    props = b"\x02" + bytes(buf[p + PROPERTIES_LENGTH_WIDTH : p + PROPERTIES_LENGTH_WIDTH + props_len])
    code = 0
    if _TAGS_NEEDLE in props:
        tags = _last_value(props, _TAGS_NEEDLE)
        if tags:
            key = tags.encode()
            code = _TAG_CODES.get(key, 0) or java_string_hash(tags)
            if len(_TAG_CODES) < _CACHE_LIMIT:
                _TAG_CODES[key] = code
    if topic == SCHEDULE_TOPIC and _DELAY_NEEDLE in props:
        delay = _last_value(props, _DELAY_NEEDLE)
        if delay is not None:
            level = java_parse_int(delay)
            if level is None:
                raise DispatchError(f"DELAY={delay!r} is not an int")
            due = deliver_timestamp(level, store_ts, *delays)
            if due != -1:
                code = due
    return topic, queue_id, queue_offset, code, store_ts


class IndexRecord(NamedTuple):
    """What the index puts for one record: ``keys`` under ``topic``, each with the record's offset
    and store time."""

    topic: str
    commit_log_offset: int
    store_timestamp: int
    keys: list[str]


def index_record(buf: memoryview | bytes, pos: int) -> IndexRecord | None:
    """The index's part of the whole record at ``buf[pos]``, or None when its fields do not decode
    (the walk's checks pass but ``read_index_fields`` refuses it: the record gets no keys)."""
    try:
        fields = read_index_fields(buf, pos)
    except ProtocolError:
        return None
    return IndexRecord(fields.topic, fields.commit_log_offset, fields.store_timestamp, index_keys(fields))
