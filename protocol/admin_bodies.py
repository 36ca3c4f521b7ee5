"""The bodies of the admin answers mqadmin reads, as the 4.9.7 broker's fastjson writes them.

``ConsumerConnection`` (GET_CONSUMER_CONNECTION_LIST), ``ProducerConnection``
(GET_PRODUCER_CONNECTION_LIST), ``ConsumeStats`` (GET_CONSUME_STATS) and ``ResetOffsetBody``
(INVOKE_BROKER_TO_RESET_OFFSET's answer and the RESET_CONSUMER_CLIENT_OFFSET sent to consumers).
fastjson writes a bean's properties in name order and leaves out nulls; a ``Map<MessageQueue, ...>``
gets each ``MessageQueue`` as a JSON object used as a key (not valid JSON, but what the Java client
parses), in the map's ``MessageQueue.hashCode`` iteration order (``protocol.topic_stats``). Sets
(``connectionSet``, ``tagsSet``) are written in the order given: a Java ``HashSet``'s order is not
something a reader depends on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from protocol.heartbeat import ClientSubscription
from protocol.java_hashmap import hashmap_order_by_hash, java_hashmap_order
from protocol.topic_stats import message_queue_hash

_encode = msgspec.json.Encoder().encode


def _json(value: object) -> str:
    return _encode(value).decode("utf-8")


@dataclass(frozen=True, slots=True)
class Connection:
    """``Connection``: one client on one channel of a group."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def json(self) -> str:
        return (
            f'{{"clientAddr":{_json(self.client_addr)},"clientId":{_json(self.client_id)},'
            f'"language":{_json(self.language)},"version":{self.version}}}'
        )


def subscription_json(sub: ClientSubscription) -> str:
    """``SubscriptionData`` as fastjson writes it (``filterClassSource`` is never serialized)."""
    fields: list[tuple[str, object]] = [
        ("classFilterMode", bool(sub.classFilterMode)),
        ("codeSet", list(sub.codeSet or ())),
        ("expressionType", sub.expressionType),
        ("subString", sub.subString),
        ("subVersion", sub.subVersion),
        ("tagsSet", list(sub.tagsSet or ())),
        ("topic", sub.topic),
    ]
    return "{" + ",".join(f'"{k}":{_json(v)}' for k, v in fields if v is not None) + "}"


def _connection_set(connections: Iterable[Connection]) -> str:
    return "[" + ",".join(c.json() for c in connections) + "]"


def encode_consumer_connection(
    connections: list[Connection],
    subscriptions: dict[str, ClientSubscription],
    consume_type: str | None,
    message_model: str | None,
    consume_from_where: str | None,
) -> bytes:
    """``ConsumerConnection``: the group's members, subscriptions and settings."""
    table = ",".join(
        f"{_json(topic)}:{subscription_json(subscriptions[topic])}"
        for topic in java_hashmap_order(subscriptions)
    )
    parts = [f'"connectionSet":{_connection_set(connections)}']
    for name, value in (
        ("consumeFromWhere", consume_from_where),
        ("consumeType", consume_type),
        ("messageModel", message_model),
    ):
        if value is not None:
            parts.append(f'"{name}":{_json(value)}')
    parts.append(f'"subscriptionTable":{{{table}}}')
    return ("{" + ",".join(parts) + "}").encode()


def encode_producer_connection(connections: list[Connection]) -> bytes:
    """``ProducerConnection``: the group's members."""
    return f'{{"connectionSet":{_connection_set(connections)}}}'.encode()


@dataclass(frozen=True, slots=True)
class QueueKey:
    """``MessageQueue``: the key of the offset tables below."""

    topic: str
    broker_name: str
    queue_id: int

    def json(self) -> str:
        return (
            f'{{"brokerName":{_json(self.broker_name)},"queueId":{self.queue_id},'
            f'"topic":{_json(self.topic)}}}'
        )

    def java_hash(self) -> int:
        return message_queue_hash(self.broker_name, self.queue_id, self.topic)


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """``OffsetWrapper``: where a queue ends, where the group stands in it, and when that message was
    stored (0 when it has consumed nothing)."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    def json(self) -> str:
        return (
            f'{{"brokerOffset":{self.broker_offset},"consumerOffset":{self.consumer_offset},'
            f'"lastTimestamp":{self.last_timestamp}}}'
        )


def _queue_map(entries: list[tuple[QueueKey, str]]) -> str:
    ordered = hashmap_order_by_hash(entries, lambda entry: entry[0].java_hash())
    return "{" + ",".join(f"{key.json()}:{value}" for key, value in ordered) + "}"


def java_double(value: float) -> str:
    """``Double.toString`` for the plain values a rate takes (``0.0``, ``12.5``)."""
    text = repr(float(value))
    return text if ("." in text or "E" in text or "e" in text or "n" in text) else text + ".0"


def encode_consume_stats(rows: list[tuple[QueueKey, OffsetWrapper]], consume_tps: float) -> bytes:
    """``ConsumeStats``: one ``OffsetWrapper`` per queue (rows in the order the broker adds them)."""
    table = _queue_map([(key, wrapper.json()) for key, wrapper in rows])
    return f'{{"consumeTps":{java_double(consume_tps)},"offsetTable":{table}}}'.encode()


def encode_reset_offset_body(offsets: list[tuple[QueueKey, int]]) -> bytes:
    """``ResetOffsetBody``: the offset each queue is reset to."""
    return f'{{"offsetTable":{_queue_map([(key, str(offset)) for key, offset in offsets])}}}'.encode()


_QUEUE_KEY = re.compile(
    r'\{"brokerName":("(?:[^"\\]|\\.)*"),"queueId":(-?\d+),"topic":("(?:[^"\\]|\\.)*")\}:'
)


def queue_map_keys(body: bytes) -> list[tuple[QueueKey, int]]:
    """Each ``MessageQueue`` key of such a map with the character index of its value, in body
    order (for readers of these bodies; the values are plain JSON)."""
    text = body.decode("utf-8")
    return [
        (
            QueueKey(msgspec.json.decode(m.group(3)), msgspec.json.decode(m.group(1)), int(m.group(2))),
            m.end(),
        )
        for m in _QUEUE_KEY.finditer(text)
    ]


def decode_reset_offset_body(body: bytes) -> dict[QueueKey, int]:
    """``ResetOffsetBody`` read back: queue -> offset."""
    text = body.decode("utf-8")
    out = {}
    for key, at in queue_map_keys(body):
        end = at
        while end < len(text) and (text[end].isdigit() or text[end] == "-"):
            end += 1
        out[key] = int(text[at:end])
    return out


def decode_consume_stats(body: bytes) -> dict[QueueKey, OffsetWrapper]:
    """``ConsumeStats`` read back: queue -> its ``OffsetWrapper``."""
    text = body.decode("utf-8")
    out = {}
    for key, at in queue_map_keys(body):
        value = msgspec.json.decode(text[at : text.index("}", at) + 1])
        out[key] = OffsetWrapper(
            value["brokerOffset"], value["consumerOffset"], value.get("lastTimestamp", 0)
        )
    return out
