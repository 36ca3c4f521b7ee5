"""Hypothesis: any representable message survives encode -> decode -> encode unchanged."""

from __future__ import annotations

import ipaddress

from hypothesis import event, given, settings
from hypothesis import strategies as st

from protocol.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MessageExt,
    body_crc,
    decode_message,
    decode_messages,
    encode_message,
    properties_to_string,
    read_index_fields,
    string_to_properties,
)
from protocol.message_flags import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOST_V6_FLAG
from protocol.message_properties import find_properties

# Text without the two separators and without lone surrogates (not encodable, as in Java's UTF-8).
_safe = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")
_name = st.text(_safe, min_size=1, max_size=12) | st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT"])
_value = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x02"), min_size=1, max_size=40
)
_value = _value.filter(lambda v: not v.startswith("\x01") or len(v) > 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_host = st.ip_addresses(v=4) | st.ip_addresses(v=6)


@st.composite
def messages(draw: st.DrawFn) -> MessageExt:
    magic = draw(st.sampled_from([MAGIC_CODE_V1, MAGIC_CODE_V2]))
    topic = draw(st.text(_safe, max_size=30) | st.text(_safe, min_size=128, max_size=300))
    if len(topic.encode()) > 127:
        magic = MAGIC_CODE_V2  # V1 cannot hold it (Java reads a signed byte)
    born = draw(_host)
    store = draw(_host)
    sys_flag = draw(st.sampled_from([0, 0x2, 0x4, 0x8, 0xC, 0x40, 0x80]))
    sys_flag |= BORNHOST_V6_FLAG if born.version == 6 else 0
    sys_flag |= STOREHOST_V6_FLAG if store.version == 6 else 0
    if draw(st.booleans()):
        sys_flag |= COMPRESSED_FLAG | draw(st.sampled_from([0, 1, 2, 3])) << 8
    body = draw(st.binary(max_size=600) | st.just(b"compress me " * 50))
    return MessageExt(
        magic=magic,
        body_crc=body_crc(body),
        queue_id=draw(_i32),
        flag=draw(_i32),
        queue_offset=draw(_i64),
        commit_log_offset=draw(_i64),
        sys_flag=sys_flag,
        born_timestamp=draw(_i64),
        born_host=str(born),
        born_port=draw(st.integers(0, 65535)),
        store_timestamp=draw(_i64),
        store_host=str(store),
        store_port=draw(st.integers(0, 65535)),
        reconsume_times=draw(_i32),
        prepared_transaction_offset=draw(_i64),
        body=body,
        topic=topic,
        properties=draw(st.dictionaries(_name, _value, max_size=8)),
    )


def _fields(msg: MessageExt) -> tuple:
    return (
        msg.magic,
        msg.body_crc,
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.commit_log_offset,
        msg.sys_flag,
        msg.born_timestamp,
        ipaddress.ip_address(msg.born_host),
        msg.born_port,
        msg.store_timestamp,
        ipaddress.ip_address(msg.store_host),
        msg.store_port,
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        msg.body,
        msg.topic,
        list(msg.properties.items()),
    )


@settings(max_examples=150, deadline=None)
@given(messages())
def test_encode_decode_round_trip(msg: MessageExt) -> None:
    raw = encode_message(msg)
    event("V2 topic > 127 bytes" if len(msg.topic.encode()) > 127 else "short topic")
    born, store = ipaddress.ip_address(msg.born_host), ipaddress.ip_address(msg.store_host)
    event(f"hosts v{born.version}/v{store.version}")
    event(f"compression {msg.compression_type}" if msg.is_compressed else "plain body")
    decoded = decode_message(raw, check_crc=not msg.is_compressed)
    assert decoded.store_size == len(raw)
    assert _fields(decoded) == _fields(msg)
    assert encode_message(decoded) == raw
    if msg.is_compressed:
        assert decoded.stored_body is not None
        assert decode_message(raw, decompress=False).body == decoded.stored_body
    fields = read_index_fields(raw)
    assert (fields.topic, fields.keys, fields.unique_key) == (
        msg.topic,
        msg.properties.get("KEYS"),
        msg.properties.get("UNIQ_KEY"),
    )
    assert (fields.commit_log_offset, fields.store_timestamp, fields.sys_flag) == (
        msg.commit_log_offset,
        msg.store_timestamp,
        msg.sys_flag,
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(messages(), min_size=1, max_size=5))
def test_concatenated_records_decode_in_order(batch: list[MessageExt]) -> None:
    raw = b"".join(encode_message(m) for m in batch)
    assert [_fields(m) for m in decode_messages(raw)] == [_fields(m) for m in batch]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab\x01\x02é🔑 "), max_size=30))
def test_property_parsing_rules(text: str) -> None:
    parsed = string_to_properties(text)
    # Java's rules: non-empty name without \x01, non-empty value without \x02.
    for name, value in parsed.items():
        assert name and value and "\x01" not in name and "\x02" not in name + value
    # Writing and re-reading is stable, and the byte-level fast path agrees with the full parser.
    assert string_to_properties(properties_to_string(parsed)) == parsed
    names = tuple({*parsed, "a", "KEYS"})
    assert find_properties(text.encode(), tuple(n.encode() for n in names)) == [parsed.get(n) for n in names]


def test_property_parsing_examples() -> None:
    assert string_to_properties("") == {}
    assert string_to_properties("a\x01b\x01c\x02") == {"a": "b\x01c"}  # first \x01 splits
    assert string_to_properties("\x01x\x02y\x01\x02z\x01w") == {"z": "w"}  # empty name / value skipped
    assert string_to_properties("k\x011\x02k\x012") == {"k": "2"}  # the last one wins
    assert properties_to_string({"a": "1", "b": None, "c": "3"}) == "a\x011\x02c\x013"  # type: ignore[dict-item]
