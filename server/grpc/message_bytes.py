"""A received message's ``ReceiveMessageResponse`` as wire bytes, built directly; sans-IO.

``receiving.build_message`` makes each received record a v2 ``Message`` of protobuf objects (a
``SystemProperties``, a ``Digest``, two ``Timestamp``s, a ``Duration``, a ``Resource``, a map) which
grpcio then serializes: a sixth of a ReceiveMessage+Ack's time at 32 in flight went there. This
writes the same response's bytes at once (the protobuf wire format: a tag varint, then a varint, or
a length and the bytes), with the parts that are the same for every message of a receive (the
topic, the store host, the invisible duration) made once per call (``ReceivedMessages``).

``build_message`` stays the reference: the bytes here are what
``ReceiveMessageResponse(message=build_message(...)).SerializeToString(deterministic=True)`` gives,
byte for byte bar the order of the user properties' entries when there are several (written here in
key order; a map's order on the wire carries nothing, and upb's own puts a key after those it is a
prefix of), which the tests check for every optional field present or absent. Fields are written
in field number order; a field without presence is left out at its default, one with presence
(``tag``, ``queue_offset``, ``delivery_attempt``, the timestamps, ...) is written whenever
``build_message`` sets it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from protocol.accel import load
from protocol.message import MessageExt, decode_message
from server.grpc.conversion import (
    PROPERTY_BORN_HOST,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRACE_CONTEXT,
    PROPERTY_UNIQ_KEY,
    SYSTEM_PROPERTY_NAMES,
    message_type_of,
)
from server.grpc.v2 import DigestType, Encoding, MessageType

_MASK64 = (1 << 64) - 1
#: ``TopicMessageType`` names as the v2 ``MessageType`` (``build_message``'s too).
MESSAGE_TYPES = {
    "NORMAL": MessageType.NORMAL,
    "FIFO": MessageType.FIFO,
    "DELAY": MessageType.DELAY,
    "TRANSACTION": MessageType.TRANSACTION,
}


def varint(value: int) -> bytes:
    """A base-128 varint; a negative int32/int64 as its 64-bit two's complement (ten bytes)."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    if 0 < value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    value &= _MASK64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


#: The one-byte varints, looked up rather than built (most lengths and small numbers).
_SMALL = [bytes((n,)) for n in range(0x80)]


def key(field: int, wire_type: int) -> bytes:
    """A field's tag: its number and wire type (0 varint, 2 length-delimited)."""
    return varint((field << 3) | wire_type)


def delimited(field: int, data: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message) with its tag."""
    return key(field, 2) + varint(len(data)) + data


def text(field: int, value: str) -> bytes:
    return delimited(field, value.encode("utf-8"))


def seconds_nanos(ms: int) -> bytes:
    """A ``Timestamp`` / ``Duration`` of ``ms`` milliseconds as ``FromMilliseconds`` sets it (seconds by
    floor division, the rest as nanos), each left out at zero."""
    seconds, rest = divmod(ms, 1000)
    out = b""
    if seconds:
        out = b"\x08" + varint(seconds)
    if rest:
        out += b"\x10" + varint(rest * 1_000_000)
    return out


#: ``Timestamp``'s valid seconds (0001-01-01 to 9999-12-31), as ``FromMilliseconds`` checks them.
TIMESTAMP_SECONDS_MIN = -62135596800
TIMESTAMP_SECONDS_MAX = 253402300799


def timestamp(ms: int) -> bytes:
    """A ``Timestamp``'s fields; ``ValueError`` out of its range, as ``Timestamp.FromMilliseconds``."""
    if not TIMESTAMP_SECONDS_MIN <= ms // 1000 <= TIMESTAMP_SECONDS_MAX:
        raise ValueError(f"Timestamp is not valid: {ms} ms")
    return seconds_nanos(ms)


#: SystemProperties' fields written whole: ``body_digest`` up to its checksum (an MD5's 32 hex
#: digits), ``body_encoding`` IDENTITY, ``message_type`` by the type's name.
_DIGEST_HEAD = key(4, 2) + varint(2 + 2 + 32) + key(1, 0) + varint(DigestType.MD5) + key(2, 2) + varint(32)
_BODY_ENCODING = key(5, 0) + varint(Encoding.IDENTITY)
_MESSAGE_TYPE = {name: key(6, 0) + varint(number) for name, number in MESSAGE_TYPES.items()}


def _resource(name: str) -> bytes:
    """Message.topic: a ``Resource`` (its name only; an empty one is still written, set)."""
    return delimited(1, text(2, name) if name else b"")


def delivery_timestamp_response(ms: int) -> bytes:
    """``ReceiveMessageResponse(delivery_timestamp=...)``'s bytes: the stream's last response."""
    stamp = timestamp(ms)
    return b"\x1a" + varint(len(stamp)) + stamp


def md5_hex(body: bytes | memoryview) -> str:
    """SystemProperties.body_digest's checksum: the body's MD5 in upper-case hex."""
    return hashlib.md5(body).hexdigest().upper()


class ReceivedMessages:
    """The responses of one receive's messages: a topic, an invisible duration (None for none)."""

    def __init__(self, topic: str, invisible_ms: int | None) -> None:
        #: topic -> Message.topic (a ``Resource`` with its name): the receive's, and any other a
        #: record names (a retry topic's record keeps its own).
        self._topics: dict[str, bytes] = {topic: _resource(topic)}
        self._topic = topic.encode("utf-8")
        self._topic_field = self._topics[topic]
        self._invisible = delimited(15, seconds_nanos(invisible_ms)) if invisible_ms is not None else b""
        #: store host:port -> SystemProperties.store_host, the same for every record of one broker.
        self._store_hosts: dict[tuple[str, int], bytes] = {}

    def record(self, record: bytes, *, attempt: int, receipt_handle: str = "") -> bytes:
        """``response(decode_message(record), ...)`` for a stored record ``decode_message`` accepts:
        written straight from its bytes by the compiled ``record_response`` (no ``MessageExt``),
        unless that declines it (a compressed body, an IPv6 host, another topic, no UNIQ_KEY, a
        delivery time, text that is not UTF-8) or is not built; then through ``response``, the
        reference the tests compare it with."""
        if _record_response is not None:
            answer = _record_response(
                record,
                self._topic,
                self._topic_field,
                self._invisible,
                SYSTEM_PROPERTY_NAMES,
                attempt,
                receipt_handle,
                md5_hex,
            )
            if answer is not None:
                return answer
        return self.response(decode_message(record), attempt=attempt, receipt_handle=receipt_handle)

    def response(self, message: MessageExt, *, attempt: int, receipt_handle: str = "") -> bytes:
        """``ReceiveMessageResponse(message=build_message(message, ...))``'s serialized bytes."""
        props = message.properties
        get = props.get
        topic = self._topics.get(message.topic)
        if topic is None:
            topic = _resource(message.topic)
            if len(self._topics) < 8:
                self._topics[message.topic] = topic
        place = (message.store_host, message.store_port)
        store_host = self._store_hosts.get(place)
        if store_host is None:
            store_host = text(10, f"{place[0]}:{place[1]}")
            if len(self._store_hosts) < 8:
                self._store_hosts[place] = store_host
        deliver = get(PROPERTY_TIMER_DELIVER_MS)
        body = message.body
        return encode_response(
            props,
            SYSTEM_PROPERTY_NAMES,
            body,
            md5_hex(body),
            get(PROPERTY_UNIQ_KEY) or message.offset_msg_id,
            get(PROPERTY_BORN_HOST) or message.born_host,
            message.born_timestamp,
            message.store_timestamp,
            int(deliver) if deliver is not None and deliver.lstrip("-").isdigit() else None,
            receipt_handle,
            message.queue_id,
            message.queue_offset,
            attempt,
            topic,
            store_host,
            self._invisible,
        )


def encode_response(
    props: Mapping[str, str],
    system_names: AbstractSet[str],
    body: bytes,
    digest: str,
    message_id: str,
    born_host: str,
    born_ms: int,
    store_ms: int,
    deliver_ms: int | None,
    receipt_handle: str,
    queue_id: int,
    queue_offset: int,
    attempt: int,
    topic_field: bytes,
    store_host_field: bytes,
    invisible_field: bytes,
) -> bytes:
    """A ReceiveMessageResponse carrying one message, from its parts: the record's properties (the
    tag, keys, message group, trace context, message type and user properties are read from them),
    the body's MD5 in upper-case hex, and the fields ``ReceivedMessages`` makes once a call (the
    topic's ``Resource``, ``store_host`` and ``invisible_duration``, each with its tag, the last
    empty for none). Compiled twin: ``_message_bytes_fast.encode_response``."""
    get = props.get
    # SystemProperties, field by field in number order (one list, joined once)
    out: list[bytes] = []
    add = out.append
    tag = get(PROPERTY_TAGS)
    if tag is not None:
        add(text(1, tag))
    keys = get(PROPERTY_KEYS)
    if keys is not None:
        for item in keys.split(" "):
            add(text(2, item))
    if message_id:
        add(text(3, message_id))
    add(_DIGEST_HEAD + digest.encode() + _BODY_ENCODING)
    add(_MESSAGE_TYPE[message_type_of(props)])
    add(delimited(7, timestamp(born_ms)))
    if born_host:
        add(text(8, born_host))
    add(delimited(9, timestamp(store_ms)))
    add(store_host_field)
    if deliver_ms is not None:
        add(delimited(11, timestamp(deliver_ms)))
    if receipt_handle:
        add(text(12, receipt_handle))
    if queue_id:
        add(b"\x68" + varint(queue_id))
    add(b"\x70" + varint(queue_offset))
    add(invisible_field)
    add(b"\x80\x01" + varint(attempt))
    group = get(PROPERTY_SHARDING_KEY)
    if group is not None:
        add(text(17, group))
    trace = get(PROPERTY_TRACE_CONTEXT)
    if trace is not None:
        add(text(18, trace))
    system = b"".join(out)
    # Message: topic, user properties (a map, in key order), system properties, body
    out = [topic_field]
    add = out.append
    user = [k for k in props if k not in system_names]
    if user:
        user.sort()
        for name in user:
            add(delimited(2, text(1, name) + text(2, props[name])))
    add(delimited(3, system))
    if body:
        add(b"\x22" + varint(len(body)))
        add(body)
    whole = b"".join(out)
    return b"\x12" + varint(len(whole)) + whole


#: The reference, whichever ``encode_response`` is bound to (the tests compare both).
python_encode_response = encode_response
_fast = load("server.grpc._message_bytes_fast")
#: ``ReceivedMessages.record``'s compiled path (None: every record goes through ``response``).
_record_response = None
if _fast is not None:
    encode_response = _fast.encode_response
    _record_response = _fast.record_response
