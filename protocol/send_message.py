"""The producer's SEND requests on the wire: both header forms, the batch body, the response header.

SEND_MESSAGE (10) carries ``SendMessageRequestHeader`` under its field names; SEND_MESSAGE_V2 (310)
and SEND_BATCH_MESSAGE (320) carry ``SendMessageRequestHeaderV2``, one letter per field (``a`` =
producerGroup ... ``n`` = brokerName), which the broker maps back to the long form. A missing
``@CFNotNull`` field is reported under the name the request used, as Java's decoder does.

The batch body is ``MessageDecoder.encodeMessages``: per message TOTALSIZE i32, MAGIC i32 (0), BODYCRC
i32 (0), FLAG i32, BODYLEN i32 + BODY, PROPLEN i16 + PROPERTIES, with no topic. The broker keeps each
message's properties *bytes* as they came (only appending the batch header's), so a message is kept
as raw bytes here too. The broker takes the batch path on the header's ``batch`` flag, not on the
request code.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Self

from protocol.accel import load
from protocol.codes import SerializeType
from protocol.custom_header_fields import (
    HeaderCodec,
    boolean_field,
    fast_codes_order,
    int_field,
    java_boolean,
    long_field,
    string_field,
)
from protocol.errors import MessageDecodeError
from protocol.java_hashmap import JavaHashMap, as_java_hashmap
from protocol.message_properties import properties_to_string

#: The V2 header's one-letter names, in the order of ``SendMessageRequestHeaderV2``.
V2_NAMES = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "bname": "n",
}


@dataclass(slots=True, frozen=True)
class SendMessageRequestHeader:
    """The fields of a SEND request, whichever form it came in."""

    producer_group: str = string_field("producerGroup", required=True)
    topic: str = string_field("topic", required=True)
    default_topic: str = string_field("defaultTopic", required=True)
    default_topic_queue_nums: int = int_field("defaultTopicQueueNums")
    queue_id: int = int_field("queueId")
    sys_flag: int = int_field("sysFlag")
    born_timestamp: int = long_field("bornTimestamp")
    flag: int = int_field("flag")
    properties: str | None = string_field("properties", default=None)
    reconsume_times: int | None = int_field("reconsumeTimes", required=False, default=None)
    unit_mode: bool = boolean_field("unitMode", default=False)
    max_reconsume_times: int | None = int_field("maxReconsumeTimes", required=False, default=None)
    batch: bool = boolean_field("batch", default=False)
    broker_name: str | None = string_field("bname", default=None)

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None, *, v2: bool) -> Self:
        """Decode the long-named (``v2=False``, code 10) or one-letter (codes 310, 320) form."""
        return (_SEND_V2 if v2 else _SEND).decode(ext_fields)

    def to_ext_fields(self, *, v2: bool) -> dict[str, str]:
        """The header as a Java client sends it (null fields left out), in Java ``HashMap`` order."""
        return (_SEND_V2 if v2 else _SEND).encode(self)


_SEND = HeaderCodec(SendMessageRequestHeader)
_SEND_V2 = HeaderCodec(SendMessageRequestHeader, renamed=V2_NAMES)


@dataclass(slots=True, frozen=True)
class SendMessageResponseHeader:
    """SUCCESS's header: the offset msg id(s), the queue the client chose and the first queue offset."""

    msg_id: str = string_field("msgId", required=True)
    queue_id: int = int_field("queueId")
    queue_offset: int = long_field("queueOffset")
    transaction_id: str | None = string_field("transactionId", default=None)

    def to_ext_fields(
        self, region: str, trace_on: bool, serialize_type: int = SerializeType.JSON
    ) -> dict[str, str]:
        """With the two fields every SEND answer carries (``MSG_REGION``, ``TRACE_ON``), in HashMap
        order; over ROCKETMQ the header's own fields first (``fast_codes_order``)."""
        fields = send_response_fields(region, trace_on)
        fields.update(_SEND_RESPONSE.values(self))
        return fast_codes_order(as_java_hashmap(fields), SEND_RESPONSE_FAST_KEYS, serialize_type)

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return _SEND_RESPONSE.decode(ext_fields)


_SEND_RESPONSE = HeaderCodec(SendMessageResponseHeader)
#: ``SendMessageResponseHeader.encode``'s order (a ``FastCodesHeader`` in 4.9.7).
SEND_RESPONSE_FAST_KEYS = ("msgId", "queueId", "queueOffset", "transactionId")


def send_response_fields(region: str, trace_on: bool) -> dict[str, str]:
    """``MSG_REGION`` and ``TRACE_ON``: on every SEND answer, also the refusals."""
    return as_java_hashmap({"MSG_REGION": region, "TRACE_ON": java_boolean(trace_on)})


class BatchItem(NamedTuple):
    """One message of a batch body: its flag, body and properties bytes exactly as sent (a tuple:
    a batch of 32 makes 32 of them per SEND, and a tuple is made in a third of a frozen dataclass's
    time)."""

    flag: int
    body: bytes
    properties: bytes


_BATCH_HEAD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")


def decode_batch_body(body: bytes | bytearray | memoryview, suffix: bytes = b"") -> list[BatchItem]:
    """Split a SEND_BATCH_MESSAGE body into its messages; ``MessageDecodeError`` if it does not parse.

    Java walks the body by the lengths inside it (TOTALSIZE is not checked against them), so the
    same is done here, but every length must stay inside the body: a short or overlong body is an
    error rather than the broker's ``BufferUnderflowException``.

    ``suffix``: the batch's own properties (serialized), appended to each message's after a 0x02
    when they do not end with one, as the broker's batch encoder stores them
    (``needAppendLastPropertySeparator``); each item's ``properties`` are then the stored ones.

    The readable reference (``decode_batch_body_python``); with the accelerators built the name is
    the compiled twin (``protocol/_batch_decode_fast.c``), which hands a body that does not parse
    back to this one for its error.
    """
    data = body if type(body) is bytes else bytes(body)
    items: list[BatchItem] = []
    append = items.append
    head, head_size, i16 = _BATCH_HEAD.unpack_from, _BATCH_HEAD.size, _I16.unpack_from
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < head_size + 2:
            raise MessageDecodeError(f"batch body truncated at byte {pos}: {end - pos} bytes left")
        _total, _magic, _crc, flag, body_len = head(data, pos)
        start = pos + head_size
        if body_len < 0 or start + body_len + 2 > end:
            raise MessageDecodeError(
                f"batch message at byte {pos}: body length {body_len} runs past the body"
            )
        props_at = start + body_len
        props_len = i16(data, props_at)[0]
        pos = props_at + 2 + props_len
        if props_len < 0 or pos > end:
            raise MessageDecodeError(
                f"batch message at byte {props_at - body_len - head_size}: properties length {props_len} "
                "runs past the body"
            )
        own = data[props_at + 2 : pos]
        if suffix:
            own = own + (b"\x02" if own and not own.endswith(b"\x02") else b"") + suffix
        append(BatchItem(flag, data[start:props_at], own))
    return items


decode_batch_body_python = decode_batch_body
_batch_fast = load("protocol._batch_decode_fast")
if _batch_fast is not None:
    _decode_fast = _batch_fast.decode_batch_body

    def decode_batch_body(body: bytes | bytearray | memoryview, suffix: bytes = b"") -> list[BatchItem]:
        """``decode_batch_body_python`` in one C call; a body that does not parse is decoded again
        by the reference for its ``MessageDecodeError``."""
        data = body if type(body) is bytes else bytes(body)
        items = _decode_fast(data, suffix if type(suffix) is bytes else bytes(suffix), BatchItem)
        if items is None:
            return decode_batch_body_python(data, suffix)
        return items  # type: ignore[no-any-return]


def encode_batch_body(messages: list[tuple[int, bytes, Mapping[str, str]]]) -> bytes:
    """``MessageDecoder.encodeMessages`` for ``(flag, body, properties)`` triples (a client's batch)."""
    parts: list[bytes] = []
    for flag, body, properties in messages:
        props = properties_to_string(properties).encode("utf-8")
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, flag, len(body)) + body + _I16.pack(len(props)) + props)
    return b"".join(parts)


def client_properties(
    keys: str | Iterable[str] | None,
    tags: str | None,
    properties: Mapping[str, str] | None,
    unique_key: str | None,
    delay_level: int = 0,
) -> str:
    """The properties string a Java producer sends: its ``HashMap`` (TAGS, KEYS, ``WAIT=true``,
    DELAY, the user's, UNIQ_KEY) serialized in Java's order."""
    props = JavaHashMap()
    if tags is not None:
        props.put("TAGS", tags)
    if keys is not None:
        props.put("KEYS", keys if isinstance(keys, str) else " ".join(keys))
    props.put("WAIT", "true")
    if delay_level:
        props.put("DELAY", str(delay_level))
    for name, value in (properties or {}).items():
        props.put(name, value)
    if unique_key is not None:
        props.put("UNIQ_KEY", unique_key)
    return properties_to_string(props.ordered())
