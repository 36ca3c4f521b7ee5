"""The CommitLog record codec: one message as the broker stores it and as QUERY_MESSAGE returns it.

The layout (fields, widths, offsets, the IPv6 host widths, the magic codes, the limits) is
``protocol.record_layout``'s; this module only reads and writes it.

Decoding is strict where Java's decoder is implicitly strict: the fields must end exactly at
TOTALSIZE (``MessageDecoder.decodes`` reads records back to back, so a record whose fields do not
add up to its size derails everything after it), lengths are read signed as Java reads them (a
negative length is an error), and every failure is a ``MessageDecodeError`` (``CompressionError``
for a body that will not inflate) -- never an ``IndexError`` or ``struct.error``. Text is decoded as
Java's ``new String(bytes, UTF_8)`` does (malformed bytes become U+FFFD), since that is the string
the broker hashed into its index.

The fixed part of a record is read with one precompiled ``struct.Struct`` per IPv4/IPv6 host
combination (``record_layout.FIXED_PART``); ``read_index_fields`` is the index builder's path that
skips the body and the dict.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.compression import compress
from protocol.compression import decompress as inflate
from protocol.errors import MessageDecodeError, MessageEncodeError, MessageIdError, ProtocolError
from protocol.message_flags import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    INNER_BATCH_FLAG,
    KEY_SEPARATOR,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    CompressionType,
    TransactionType,
    compression_type_value,
    transaction_type,
)
from protocol.message_id import host_to_str, offset_msg_id_from_packed, pack_host
from protocol.message_properties import find_properties, properties_to_string, string_to_properties
from protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BODY_LENGTH_WIDTH,
    BORNHOST_V6_FLAG,
    FIXED_PART,
    HOST_KIND_SHIFT,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PHYSICAL_OFFSET_AT,
    PROPERTIES_LENGTH_WIDTH,
    PROPERTIES_MAX_LENGTH,
    QUEUE_ID_AT,
    QUEUE_OFFSET_AT,
    SIZE_MAGIC,
    STORE_TIMESTAMP_AT,
    STOREHOST_V6_FLAG,
    SYS_FLAG_AT,
    SYS_FLAG_END,
    TOPIC_MAX_LENGTH,
)

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_TYPE_MASK",
    "INNER_BATCH_FLAG",
    "MAGIC_CODE_V1",
    "MAGIC_CODE_V2",
    "MULTI_TAGS_FLAG",
    "NEED_UNWRAP_FLAG",
    "PHYSICAL_OFFSET_POSITION",
    "PROPERTY_KEYS",
    "PROPERTY_TAGS",
    "PROPERTY_UNIQ_KEY",
    "QUEUE_ID_POSITION",
    "QUEUE_OFFSET_POSITION",
    "STOREHOST_V6_FLAG",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "TRANSACTION_TYPE_MASK",
    "CompressionType",
    "IndexFields",
    "MessageExt",
    "TransactionType",
    "body_crc",
    "check_record",
    "decode_message",
    "decode_messages",
    "encode_message",
    "properties_to_string",
    "raw_properties",
    "read_index_fields",
    "string_to_properties",
]

_SIZE_MAGIC = SIZE_MAGIC
#: TOPICLEN is read with ``_I8`` for MAGIC_CODE_V1, ``_I16`` for V2; PROPERTIESLEN with ``_I16``.
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: ``record_layout``'s offsets under the names this module has always exported.
PHYSICAL_OFFSET_POSITION = PHYSICAL_OFFSET_AT
QUEUE_ID_POSITION = QUEUE_ID_AT
QUEUE_OFFSET_POSITION = QUEUE_OFFSET_AT

#: The fixed part (TOTALSIZE .. BODYLEN) by host kind: born V6 is bit 0, store V6 bit 1.
_FIXED = FIXED_PART


def _host_kind(sys_flag: int) -> int:
    return (sys_flag >> HOST_KIND_SHIFT) & 3


def body_crc(data: bytes | memoryview) -> int:
    """The BODYCRC the broker stores: CRC32 of the stored (possibly compressed) body, 31 bits."""
    return zlib.crc32(data) & 0x7FFFFFFF


@dataclass(slots=True)
class MessageExt:
    """One decoded CommitLog record.

    ``body`` is what the application sent (inflated when the record was decoded with
    ``decompress=True``). For a compressed record ``stored_body`` keeps the on-disk bytes, so that a
    decoded record re-encodes to exactly the same bytes (codecs need not reproduce Java's output);
    set it to ``None`` after changing ``body`` and ``encode_message`` compresses ``body`` again.
    ``body_read`` is False when the record was decoded with ``read_body=False`` (``body`` is then
    empty and the record cannot be re-encoded).
    """

    store_size: int = 0
    magic: int = MAGIC_CODE_V1
    body_crc: int = 0
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1"
    born_port: int = 0
    store_timestamp: int = 0
    store_host: str = "127.0.0.1"
    store_port: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body: bytes = b""
    topic: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    stored_body: bytes | None = None
    body_read: bool = True

    @property
    def keys(self) -> list[str]:
        """The non-empty tokens of the KEYS property split on a space (what the broker indexes)."""
        raw = self.properties.get(PROPERTY_KEYS)
        return [token for token in raw.split(KEY_SEPARATOR) if token] if raw else []

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def unique_key(self) -> str | None:
        """The client-made unique id (``UNIQ_KEY``), if the producer set one."""
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def offset_msg_id(self) -> str:
        """The broker's id for this record: store host, store port and CommitLog offset."""
        try:
            return offset_msg_id_from_packed(
                pack_host(self.store_host), self.store_port, self.commit_log_offset
            )
        except MessageIdError as exc:
            raise MessageEncodeError(str(exc)) from None

    @property
    def msg_id(self) -> str:
        """What a Java client shows as ``msgId``: the unique key if present, else the offset id."""
        return self.unique_key or self.offset_msg_id

    @property
    def transaction_type(self) -> TransactionType:
        return transaction_type(self.sys_flag)

    @property
    def is_compressed(self) -> bool:
        return bool(self.sys_flag & COMPRESSED_FLAG)

    @property
    def compression_type(self) -> int:
        """The sysFlag compression type value (0 legacy zlib, 1 LZ4, 2 ZSTD, 3 zlib)."""
        return compression_type_value(self.sys_flag)


class _Layout(NamedTuple):
    """Where the variable parts of one record lie; computed once, shared by both decoders."""

    store_size: int
    magic: int
    sys_flag: int
    body_start: int
    body_len: int
    topic_start: int
    topic_len: int
    props_start: int
    props_len: int


def _layout(buf: bytes | bytearray | memoryview, offset: int) -> _Layout:
    """Validate the record at ``offset`` and locate its parts (every check of the decoders lives here)."""
    if offset < 0:
        raise MessageDecodeError(f"negative record offset {offset}")
    available = len(buf) - offset
    if available < SYS_FLAG_END:
        raise MessageDecodeError(
            f"record at {offset} truncated: {available} bytes, need at least {SYS_FLAG_END}"
        )
    store_size, magic = _SIZE_MAGIC.unpack_from(buf, offset)
    if magic == BLANK_MAGIC_CODE:
        raise MessageDecodeError(f"end-of-file blank marker at {offset}, not a message")
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        raise MessageDecodeError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {offset}")
    if store_size > available:
        raise MessageDecodeError(
            f"record at {offset} truncated: TOTALSIZE {store_size}, {available} bytes left"
        )
    sys_flag = _I32.unpack_from(buf, offset + SYS_FLAG_AT)[0]
    fixed = _FIXED[_host_kind(sys_flag)]
    end = offset + store_size
    pos = offset + fixed.size
    if pos > end:
        raise MessageDecodeError(f"record at {offset}: TOTALSIZE {store_size} is smaller than its fixed part")
    body_len = _I32.unpack_from(buf, pos - BODY_LENGTH_WIDTH)[0]
    if body_len < 0:
        raise MessageDecodeError(f"record at {offset}: negative body length {body_len}")
    body_start = pos
    pos += body_len
    width = _I8 if magic == MAGIC_CODE_V1 else _I16
    if pos + width.size > end:
        raise MessageDecodeError(
            f"record at {offset}: body length {body_len} runs past TOTALSIZE {store_size}"
        )
    topic_len = width.unpack_from(buf, pos)[0]
    if topic_len < 0:
        raise MessageDecodeError(f"record at {offset}: negative topic length {topic_len}")
    topic_start = pos + width.size
    pos = topic_start + topic_len
    if pos + PROPERTIES_LENGTH_WIDTH > end:
        raise MessageDecodeError(
            f"record at {offset}: topic length {topic_len} runs past TOTALSIZE {store_size}"
        )
    props_len = _I16.unpack_from(buf, pos)[0]
    if props_len < 0:
        raise MessageDecodeError(f"record at {offset}: negative properties length {props_len}")
    props_start = pos + PROPERTIES_LENGTH_WIDTH
    if props_start + props_len != end:
        raise MessageDecodeError(
            f"record at {offset}: fields end at {props_start + props_len - offset},"
            f" TOTALSIZE says {store_size}"
        )

    return _Layout(
        store_size, magic, sys_flag, body_start, body_len, topic_start, topic_len, props_start, props_len
    )


def _text(buf: bytes | bytearray | memoryview, start: int, length: int) -> str:
    return bytes(buf[start : start + length]).decode("utf-8", "replace")


def decode_message(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    read_body: bool = True,
    decompress: bool = True,
    check_crc: bool = False,
) -> MessageExt:
    """Decode the record starting at ``offset`` (``MessageDecoder.decode``).

    ``read_body=False`` skips the body; ``decompress`` inflates a compressed body; ``check_crc``
    compares BODYCRC with the CRC of the stored body (before inflating, as the broker computed it).
    """
    layout = _layout(buf, offset)
    sys_flag = layout.sys_flag
    (
        _,
        _,
        crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        _,
        born_timestamp,
        born_ip,
        born_port,
        store_timestamp,
        store_ip,
        store_port,
        reconsume_times,
        prepared_offset,
        _,
    ) = _FIXED[_host_kind(sys_flag)].unpack_from(buf, offset)
    body = b""
    stored_body = None
    if read_body or check_crc:
        raw = bytes(buf[layout.body_start : layout.body_start + layout.body_len])
        if check_crc and body_crc(raw) != crc & 0x7FFFFFFF:
            raise MessageDecodeError(
                f"record at {offset}: body CRC {body_crc(raw)} does not match BODYCRC {crc}"
            )
        if read_body:
            body = raw
            if sys_flag & COMPRESSED_FLAG:
                stored_body = raw
                if decompress:
                    body = inflate(raw, compression_type_value(sys_flag))
    props = string_to_properties(_text(buf, layout.props_start, layout.props_len)) if layout.props_len else {}
    return MessageExt(
        layout.store_size,
        layout.magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        host_to_str(born_ip),
        born_port,
        store_timestamp,
        host_to_str(store_ip),
        store_port,
        reconsume_times,
        prepared_offset,
        body,
        _text(buf, layout.topic_start, layout.topic_len),
        props,
        stored_body,
        read_body,
    )


def check_record(buf: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Check the record at ``offset`` as ``decode_message`` does (the same ``MessageDecodeError``s)
    without decoding it; its sysFlag, which places its host-dependent fields."""
    return _layout(buf, offset).sys_flag


def decode_messages(
    buf: bytes | bytearray | memoryview, *, read_body: bool = True, decompress: bool = True
) -> list[MessageExt]:
    """Decode records laid back to back (a QUERY_MESSAGE body), stopping at the first bad one.

    Like Java's ``MessageDecoder.decodes``: what decoded before the bad record is returned, the rest
    is dropped without an error.
    """
    messages: list[MessageExt] = []
    offset = 0
    total = len(buf)
    while offset < total:
        try:
            message = decode_message(buf, offset, read_body=read_body, decompress=decompress)
        except ProtocolError:
            break
        messages.append(message)
        offset += message.store_size
    return messages


def raw_properties(buf: bytes | bytearray | memoryview, offset: int = 0) -> bytes:
    """The record's properties bytes exactly as stored (a dict loses repeated names and their order)."""
    layout = _layout(buf, offset)
    return bytes(buf[layout.props_start : layout.props_start + layout.props_len])


class IndexFields(NamedTuple):
    """What the index builder needs from a record, read without touching its body."""

    store_size: int
    magic: int
    sys_flag: int
    commit_log_offset: int
    store_timestamp: int
    topic: str
    #: The raw KEYS property (space-separated), or None.
    keys: str | None
    #: The UNIQ_KEY property, or None.
    unique_key: str | None


_INDEX_PROPERTIES = (PROPERTY_KEYS.encode(), PROPERTY_UNIQ_KEY.encode())


def read_index_fields(buf: bytes | bytearray | memoryview, offset: int = 0) -> IndexFields:
    """The index builder's fast path: validate the record, read only what indexing needs.

    Same checks and errors as ``decode_message`` (except that the body is never inflated).
    """
    layout = _layout(buf, offset)
    store_timestamp_at = offset + STORE_TIMESTAMP_AT[(layout.sys_flag >> HOST_KIND_SHIFT) & 3]
    keys, unique_key = (
        find_properties(buf[layout.props_start : layout.props_start + layout.props_len], _INDEX_PROPERTIES)
        if layout.props_len
        else (None, None)
    )
    return IndexFields(
        layout.store_size,
        layout.magic,
        layout.sys_flag,
        _I64.unpack_from(buf, offset + PHYSICAL_OFFSET_AT)[0],
        _I64.unpack_from(buf, store_timestamp_at)[0],
        _text(buf, layout.topic_start, layout.topic_len),
        keys,
        unique_key,
    )


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MessageEncodeError(f"{what} is not encodable as UTF-8: {exc}") from None


def _packed_host(host: str, v6: bool, what: str) -> bytes:
    try:
        packed = pack_host(host)
    except MessageIdError as exc:
        raise MessageEncodeError(f"{what}: {exc}") from None
    if (len(packed) == 16) != v6:
        flag = "set" if v6 else "clear"
        raise MessageEncodeError(f"{what} {host!r} does not match its sysFlag IPv6 bit ({flag})")
    return packed


def encode_message(msg: MessageExt, *, properties_string: str | bytes | None = None) -> bytes:
    """The CommitLog record for ``msg`` (``MessageDecoder.encode`` / the broker's append).

    TOTALSIZE is computed, not taken from ``msg.store_size``; BODYCRC is written as given (use
    ``body_crc``). A compressed message writes ``stored_body`` when present, else compresses
    ``body`` with its sysFlag codec. ``properties_string`` replaces ``msg.properties`` with the exact
    string (or UTF-8 bytes) to store (the broker stores strings a dict cannot hold: a batch record
    has ``WAIT`` twice). Raises ``MessageEncodeError`` when a field does not fit.
    """
    if not msg.body_read:
        raise MessageEncodeError("the message was decoded without its body; it cannot be re-encoded")
    if msg.magic not in TOPIC_MAX_LENGTH:
        raise MessageEncodeError(f"unknown magic code {msg.magic & 0xFFFFFFFF:#010x}")
    topic = _utf8(msg.topic, "topic")
    if len(topic) > TOPIC_MAX_LENGTH[msg.magic]:
        raise MessageEncodeError(
            f"topic of {len(topic)} bytes does not fit magic {msg.magic & 0xFFFFFFFF:#010x}"
            " (use MAGIC_CODE_V2)"
        )
    if isinstance(properties_string, bytes):
        props = properties_string
    else:
        props = _utf8(
            properties_to_string(msg.properties) if properties_string is None else properties_string,
            "properties",
        )
    if len(props) > PROPERTIES_MAX_LENGTH:
        raise MessageEncodeError(f"properties of {len(props)} bytes exceed {PROPERTIES_MAX_LENGTH}")
    sys_flag = msg.sys_flag
    body = msg.body
    if sys_flag & COMPRESSED_FLAG:
        body = (
            msg.stored_body
            if msg.stored_body is not None
            else compress(body, compression_type_value(sys_flag))
        )
    born = _packed_host(msg.born_host, bool(sys_flag & BORNHOST_V6_FLAG), "born host")
    store = _packed_host(msg.store_host, bool(sys_flag & STOREHOST_V6_FLAG), "store host")
    fixed = _FIXED[_host_kind(sys_flag)]
    topic_width = _I8 if msg.magic == MAGIC_CODE_V1 else _I16
    store_size = fixed.size + len(body) + topic_width.size + len(topic) + PROPERTIES_LENGTH_WIDTH + len(props)
    try:
        head = fixed.pack(
            store_size,
            msg.magic,
            msg.body_crc,
            msg.queue_id,
            msg.flag,
            msg.queue_offset,
            msg.commit_log_offset,
            sys_flag,
            msg.born_timestamp,
            born,
            msg.born_port,
            msg.store_timestamp,
            store,
            msg.store_port,
            msg.reconsume_times,
            msg.prepared_transaction_offset,
            len(body),
        )
    except struct.error as exc:
        raise MessageEncodeError(f"a field is out of range for its on-disk width: {exc}") from None
    return b"".join((head, body, topic_width.pack(len(topic)), topic, _I16.pack(len(props)), props))
