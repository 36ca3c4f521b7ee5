"""``TopicStatsTable`` (the GET_TOPIC_STATS_INFO body): fastjson's map with object keys.

The broker fills a ``HashMap<MessageQueue, TopicOffset>`` queue by queue and fastjson writes it with
each ``MessageQueue`` as a JSON object used as a key: ``{"offsetTable":{{"brokerName":..,"queueId":3,
"topic":..}:{"lastUpdateTimestamp":..,"maxOffset":..,"minOffset":..},...}}`` - not valid JSON, but
what mqadmin reads. Entries come in the map's iteration order, which follows
``MessageQueue.hashCode()`` (31-based over brokerName, queueId, topic) as ``java_hashmap`` explains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from protocol.errors import ProtocolError
from protocol.index_key import java_string_hash
from protocol.java_hashmap import hashmap_order_by_hash

_encode_str = msgspec.json.Encoder().encode
_decode_str = msgspec.json.Decoder(str).decode

_INT_MASK = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue's row: ``MessageQueue`` (broker name, queue id, topic) and its ``TopicOffset``."""

    broker_name: str
    queue_id: int
    topic: str
    min_offset: int
    max_offset: int
    last_update_timestamp: int


def message_queue_hash(broker_name: str, queue_id: int, topic: str) -> int:
    """``MessageQueue.hashCode()`` as a signed Java int."""
    result = 1
    result = 31 * result + java_string_hash(broker_name)
    result = 31 * result + queue_id
    result = 31 * result + java_string_hash(topic)
    result &= _INT_MASK
    return result - (1 << 32) if result >= 1 << 31 else result


def encode_topic_stats(rows: list[TopicOffset]) -> bytes:
    """The body the broker sends, rows given in insertion (queue id) order."""
    ordered = hashmap_order_by_hash(
        rows, lambda row: message_queue_hash(row.broker_name, row.queue_id, row.topic)
    )
    parts = []
    for row in ordered:
        broker = _encode_str(row.broker_name).decode()
        topic = _encode_str(row.topic).decode()
        parts.append(
            f'{{"brokerName":{broker},"queueId":{row.queue_id},"topic":{topic}}}:'
            f'{{"lastUpdateTimestamp":{row.last_update_timestamp},"maxOffset":{row.max_offset},'
            f'"minOffset":{row.min_offset}}}'
        )
    return ('{"offsetTable":{' + ",".join(parts) + "}}").encode()


_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_ENTRY = re.compile(
    r'\{"brokerName":(' + _JSON_STRING + r'),"queueId":(-?\d+),"topic":(' + _JSON_STRING + r")\}:"
    r'\{"lastUpdateTimestamp":(-?\d+),"maxOffset":(-?\d+),"minOffset":(-?\d+)\}'
)
_EMPTY = '{"offsetTable":{}}'


def decode_topic_stats(body: bytes) -> list[TopicOffset]:
    """The rows of a ``TopicStatsTable`` body, in body order; ``ProtocolError`` when it is not one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"topic stats body is not UTF-8: {exc}") from exc
    if text.strip() == _EMPTY:
        return []
    prefix = '{"offsetTable":{'
    if not (text.startswith(prefix) and text.endswith("}}")):
        raise ProtocolError("topic stats body is not a TopicStatsTable")
    rows = []
    position = len(prefix)
    end = len(text) - 2
    while position < end:
        match = _ENTRY.match(text, position)
        if match is None:
            raise ProtocolError(f"topic stats body: unreadable entry at character {position}")
        rows.append(
            TopicOffset(
                broker_name=_decode_str(match.group(1)),
                queue_id=int(match.group(2)),
                topic=_decode_str(match.group(3)),
                last_update_timestamp=int(match.group(4)),
                max_offset=int(match.group(5)),
                min_offset=int(match.group(6)),
            )
        )
        position = match.end()
        if position < end:
            if text[position] != ",":
                raise ProtocolError(f"topic stats body: expected ',' at character {position}")
            position += 1
    return rows
