"""Bad records raise typed errors: ``MessageDecodeError`` (or ``CompressionError``), never anything else."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from protocol.errors import CompressionError, MessageDecodeError, MessageEncodeError, ProtocolError
from protocol.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MessageExt,
    body_crc,
    decode_message,
    decode_messages,
    encode_message,
    read_index_fields,
)
from protocol.message_flags import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOST_V6_FLAG

VECTORS = ["message_encode_v4_1", "message_encode_v6_2", "message_encode_compressed_zstd"]


def _record(**overrides: object) -> bytes:
    fields: dict = {"topic": "TopicA", "body": b"hello", "properties": {"KEYS": "a b"}}
    fields.update(overrides)
    return encode_message(MessageExt(**fields))


@pytest.mark.parametrize("name", VECTORS)
def test_truncated_at_every_byte_is_a_decode_error(
    name: str, vectors_by_name: dict, vectors_dir: Path
) -> None:
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    for cut in range(len(raw)):
        for decoder in (decode_message, read_index_fields):
            with pytest.raises(MessageDecodeError):
                decoder(raw[:cut])
        assert decode_messages(raw[:cut]) == []


@pytest.mark.parametrize("name", VECTORS)
def test_truncated_inside_a_larger_buffer_and_offset(
    name: str, vectors_by_name: dict, vectors_dir: Path
) -> None:
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    buf = memoryview(b"\0" * 7 + raw)
    for cut in range(7, len(buf)):
        with pytest.raises(MessageDecodeError):
            decode_message(buf[:cut], 7)
    assert decode_message(buf, 7).store_size == len(raw)


def test_every_single_byte_corruption_is_typed(vectors_by_name: dict, vectors_dir: Path) -> None:
    """Flipping any byte either still decodes or raises a ProtocolError subclass, never another error."""
    raw = bytearray((vectors_dir / vectors_by_name["message_encode_compressed_lz4"]["file"]).read_bytes())
    for i in range(len(raw)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            corrupt = bytearray(raw)
            corrupt[i] = value
            try:
                decode_message(corrupt, check_crc=True)
            except ProtocolError:
                pass
            try:
                read_index_fields(corrupt)
            except ProtocolError:
                pass


def test_bad_magic() -> None:
    raw = bytearray(_record())
    raw[4:8] = struct.pack(">i", 0x12345678)
    with pytest.raises(MessageDecodeError, match="magic"):
        decode_message(raw)


def test_blank_marker_is_not_a_message() -> None:
    blank = struct.pack(">ii", 4096, BLANK_MAGIC_CODE) + b"\0" * 4088
    with pytest.raises(MessageDecodeError, match="blank"):
        decode_message(blank)
    with pytest.raises(MessageDecodeError, match="blank"):
        read_index_fields(blank)


def test_negative_offset() -> None:
    with pytest.raises(MessageDecodeError):
        decode_message(_record(), -1)


@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_total_size_disagreeing_with_the_fields(delta: int) -> None:
    raw = bytearray(_record() + b"\0" * 1000)
    size = struct.unpack_from(">i", raw)[0]
    struct.pack_into(">i", raw, 0, size + delta)
    with pytest.raises(MessageDecodeError, match="TOTALSIZE"):
        decode_message(raw)


def test_total_size_smaller_than_the_fixed_part() -> None:
    raw = bytearray(_record())
    struct.pack_into(">i", raw, 0, 50)
    with pytest.raises(MessageDecodeError, match="fixed part"):
        decode_message(raw)


def test_negative_body_length() -> None:
    raw = bytearray(_record())
    struct.pack_into(">i", raw, 84, -5)
    with pytest.raises(MessageDecodeError, match="negative body length"):
        decode_message(raw)


def test_negative_topic_length_in_v1_like_java_signed_byte() -> None:
    raw = bytearray(_record(body=b""))
    raw[88] = 0x80
    with pytest.raises(MessageDecodeError, match="negative topic length"):
        decode_message(raw)


def test_negative_properties_length() -> None:
    raw = bytearray(_record(body=b"", topic="T", properties={}))
    struct.pack_into(">h", raw, 88 + 1 + 1, -1)
    with pytest.raises(MessageDecodeError, match="negative properties length"):
        decode_message(raw)


def test_crc_mismatch_only_when_asked() -> None:
    raw = _record(body=b"payload", body_crc=body_crc(b"payload") ^ 1)
    assert decode_message(raw).body == b"payload"
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_message(raw, check_crc=True)
    assert decode_message(_record(body=b"payload", body_crc=body_crc(b"payload")), check_crc=True)


def test_crc_check_works_without_reading_the_body() -> None:
    raw = _record(body=b"payload", body_crc=7)
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_message(raw, read_body=False, check_crc=True)


@pytest.mark.parametrize("ctype", [0, 1, 2, 3])
def test_corrupt_compressed_body_is_a_compression_error(ctype: int) -> None:
    raw = _record(sys_flag=COMPRESSED_FLAG | ctype << 8, stored_body=b"\x00not compressed at all")
    with pytest.raises(CompressionError):
        decode_message(raw)
    # Not inflating, or not reading the body, does not touch the codec.
    assert decode_message(raw, decompress=False).body == b"\x00not compressed at all"
    assert decode_message(raw, read_body=False).body == b""


@pytest.mark.parametrize("ctype", [4, 5, 6, 7])
def test_unknown_compression_type(ctype: int) -> None:
    raw = _record(sys_flag=COMPRESSED_FLAG | ctype << 8, stored_body=b"abc")
    with pytest.raises(CompressionError, match="unknown compression type"):
        decode_message(raw)
    with pytest.raises(CompressionError, match="unknown compression type"):
        encode_message(MessageExt(topic="T", body=b"abc", sys_flag=COMPRESSED_FLAG | ctype << 8))


def test_decode_messages_stops_at_the_first_bad_record() -> None:
    good = _record(properties={"KEYS": "one"})
    bad = bytearray(_record(properties={"KEYS": "two"}))
    bad[4:8] = b"\0\0\0\0"
    after = _record(properties={"KEYS": "three"})
    messages = decode_messages(good + good + bytes(bad) + after)
    assert [m.keys for m in messages] == [["one"], ["one"]]


def test_decode_messages_stops_at_an_undecompressable_body() -> None:
    good = _record()
    broken = _record(sys_flag=COMPRESSED_FLAG | 3 << 8, stored_body=b"garbage")
    assert len(decode_messages(good + broken + good)) == 1
    assert len(decode_messages(good + broken + good, decompress=False)) == 3


def test_decode_messages_of_nothing() -> None:
    assert decode_messages(b"") == []


# -- encoding -------------------------------------------------------------------------------------


def test_v1_topic_over_127_bytes_is_refused_but_v2_takes_it() -> None:
    topic = "t" * 128
    with pytest.raises(MessageEncodeError, match="MAGIC_CODE_V2"):
        encode_message(MessageExt(topic=topic))
    assert decode_message(encode_message(MessageExt(topic=topic, magic=MAGIC_CODE_V2))).topic == topic
    assert decode_message(encode_message(MessageExt(topic="t" * 127))).topic == "t" * 127


def test_v2_topic_over_32767_bytes_is_refused() -> None:
    with pytest.raises(MessageEncodeError):
        encode_message(MessageExt(topic="t" * 32768, magic=MAGIC_CODE_V2))


def test_unknown_magic_is_refused() -> None:
    with pytest.raises(MessageEncodeError, match="magic"):
        encode_message(MessageExt(topic="T", magic=BLANK_MAGIC_CODE))


def test_properties_over_32767_bytes_are_refused() -> None:
    with pytest.raises(MessageEncodeError, match="properties"):
        encode_message(MessageExt(topic="T", properties={"K": "v" * 32767}))


def test_lone_surrogate_is_refused() -> None:
    with pytest.raises(MessageEncodeError, match="UTF-8"):
        encode_message(MessageExt(topic="T\ud800"))


@pytest.mark.parametrize(
    ("sys_flag", "born", "store"),
    [
        (0, "::1", "127.0.0.1"),
        (0, "127.0.0.1", "::1"),
        (BORNHOST_V6_FLAG, "127.0.0.1", "127.0.0.1"),
        (STOREHOST_V6_FLAG, "127.0.0.1", "127.0.0.1"),
    ],
)
def test_host_family_must_match_the_sysflag(sys_flag: int, born: str, store: str) -> None:
    with pytest.raises(MessageEncodeError, match="IPv6 bit"):
        encode_message(MessageExt(topic="T", sys_flag=sys_flag, born_host=born, store_host=store))


def test_not_an_address_is_refused() -> None:
    with pytest.raises(MessageEncodeError, match="born host"):
        encode_message(MessageExt(topic="T", born_host="localhost"))
    with pytest.raises(MessageEncodeError):
        _ = MessageExt(topic="T", store_host="nope").offset_msg_id


@pytest.mark.parametrize(
    "field",
    ["queue_id", "flag", "queue_offset", "commit_log_offset", "born_port", "reconsume_times", "body_crc"],
)
def test_out_of_range_integers_are_refused(field: str) -> None:
    with pytest.raises(MessageEncodeError, match="out of range"):
        encode_message(MessageExt(topic="T", **{field: 1 << 64}))


def test_body_not_read_cannot_be_reencoded() -> None:
    msg = decode_message(_record(), read_body=False)
    assert not msg.body_read
    with pytest.raises(MessageEncodeError, match="without its body"):
        encode_message(msg)


def test_magic_codes_are_javas() -> None:
    assert MAGIC_CODE_V1 & 0xFFFFFFFF == 0xDAA320A7
    assert MAGIC_CODE_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194
