"""Records written by Java's ``MessageDecoder.encode`` decode to their inputs and re-encode byte-exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.message import (
    MAGIC_CODE_V1,
    decode_message,
    decode_messages,
    encode_message,
    properties_to_string,
    read_index_fields,
    string_to_properties,
)

PLAIN = ["message_encode_v4_1", "message_encode_v4_2", "message_encode_v6_1", "message_encode_v6_2"]
COMPRESSED = [
    "message_encode_compressed_legacy_type0_zlib",
    "message_encode_compressed_zlib",
    "message_encode_compressed_lz4",
    "message_encode_compressed_zstd",
]


def _java_host(text: str) -> tuple[str, int]:
    """Split Java's ``/1.2.3.4:5`` or ``/[fd00:0:...:2]:5`` into a host and a port."""
    host, _, port = text.lstrip("/").rpartition(":")
    return host.strip("[]"), int(port)


def _same_ip(a: str, b: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(a) == ipaddress.ip_address(b)


@pytest.mark.parametrize("name", PLAIN + COMPRESSED)
def test_vector_decodes_to_its_inputs(name: str, vectors_by_name: dict, vectors_dir: Path) -> None:
    vector = vectors_by_name[name]
    inputs = vector["inputs"]
    raw = (vectors_dir / vector["file"]).read_bytes()
    msg = decode_message(raw)

    assert msg.store_size == vector["length"] == len(raw)
    assert msg.magic == MAGIC_CODE_V1
    assert msg.topic == inputs["topic"]
    assert msg.queue_id == inputs["queueId"]
    assert msg.flag == inputs["flag"]
    assert msg.properties == inputs["properties"]
    assert properties_to_string(msg.properties) == inputs["propertiesString"]
    assert msg.body == bytes.fromhex(inputs["bodyHex"])
    assert msg.body_crc == inputs["bodyCRC"]
    assert msg.born_timestamp == inputs["bornTimestamp"]
    assert msg.store_timestamp == inputs["storeTimestamp"]
    assert msg.queue_offset == inputs["queueOffset"]
    assert msg.commit_log_offset == inputs["commitLogOffset"]
    assert msg.sys_flag == inputs["sysFlag"]
    assert msg.reconsume_times == inputs["reconsumeTimes"]
    assert msg.prepared_transaction_offset == inputs["preparedTransactionOffset"]
    born_host, born_port = _java_host(inputs["bornHost"])
    store_host, store_port = _java_host(inputs["storeHost"])
    assert _same_ip(msg.born_host, born_host) and msg.born_port == born_port
    assert _same_ip(msg.store_host, store_host) and msg.store_port == store_port
    assert msg.keys == [t for t in inputs["properties"]["KEYS"].split(" ") if t]
    assert msg.tags == inputs["properties"]["TAGS"]
    assert msg.unique_key == inputs["properties"]["UNIQ_KEY"]
    assert msg.msg_id == msg.unique_key
    if "decodedOffsetMsgId" in vector:
        assert msg.offset_msg_id == vector["decodedOffsetMsgId"]
    if name in COMPRESSED:
        assert msg.is_compressed
        assert msg.stored_body == bytes.fromhex(vector["storedBodyHex"])
        assert len(msg.stored_body) == vector["storedBodyLen"]
    else:
        assert not msg.is_compressed and msg.stored_body is None


@pytest.mark.parametrize("name", PLAIN + COMPRESSED)
def test_vector_reencodes_byte_exact(name: str, vectors_by_name: dict, vectors_dir: Path) -> None:
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    assert encode_message(decode_message(raw)) == raw
    assert encode_message(decode_message(raw, decompress=False)) == raw


@pytest.mark.parametrize("name", COMPRESSED)
def test_compressed_vector_without_decompression_keeps_the_stored_bytes(
    name: str, vectors_by_name: dict, vectors_dir: Path
) -> None:
    vector = vectors_by_name[name]
    msg = decode_message((vectors_dir / vector["file"]).read_bytes(), decompress=False)
    assert msg.body == msg.stored_body == bytes.fromhex(vector["storedBodyHex"])


@pytest.mark.parametrize("name", COMPRESSED)
def test_compressed_vector_crc_is_over_the_uncompressed_input(
    name: str, vectors_by_name: dict, vectors_dir: Path
) -> None:
    """``MessageDecoder.encode`` writes the BODYCRC it is given; these vectors carry the CRC of the
    uncompressed body, so the on-demand check (over the stored bytes, like the broker) rejects them."""
    from protocol.errors import MessageDecodeError
    from protocol.message import body_crc

    vector = vectors_by_name[name]
    raw = (vectors_dir / vector["file"]).read_bytes()
    assert body_crc(bytes.fromhex(vector["inputs"]["bodyHex"])) == vector["inputs"]["bodyCRC"]
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_message(raw, check_crc=True)


@pytest.mark.parametrize("name", PLAIN)
def test_plain_vector_passes_the_crc_check(name: str, vectors_by_name: dict, vectors_dir: Path) -> None:
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    assert decode_message(raw, check_crc=True).body_crc == vectors_by_name[name]["inputs"]["bodyCRC"]


@pytest.mark.parametrize("name", PLAIN + COMPRESSED)
def test_index_fast_path_agrees_with_full_decode(name: str, vectors_by_name: dict, vectors_dir: Path) -> None:
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    msg = decode_message(raw)
    fields = read_index_fields(raw)
    assert fields == (
        msg.store_size,
        msg.magic,
        msg.sys_flag,
        msg.commit_log_offset,
        msg.store_timestamp,
        msg.topic,
        msg.properties["KEYS"],
        msg.unique_key,
    )


def test_properties_string_vector(vectors_by_name: dict, vectors_dir: Path) -> None:
    vector = vectors_by_name["properties_string"]
    raw = (vectors_dir / vector["file"]).read_bytes()
    parsed = string_to_properties(raw.decode("utf-8"))
    assert parsed == vector["string2messageProperties"] == vector["inputs"]
    # The file is in Java's HashMap order; our dict keeps it, so writing it back is byte-exact.
    assert properties_to_string(parsed).encode("utf-8") == raw


@pytest.mark.parametrize("name", ["resp_query_message_success.json", "resp_query_message_success.rocketmq"])
def test_query_message_body_decodes_every_record(name: str, vectors_by_name: dict) -> None:
    vector = vectors_by_name[name]
    body = bytes.fromhex(vector["bodyHex"])
    messages = decode_messages(body)
    assert [m.store_size for m in messages] == vector["inputs"]["bodyLens"]
    assert len(messages) == vector["inputs"]["bodyMessages"]
    assert [m.topic for m in messages] == ["TopicA", "topic_c-1"]
    assert b"".join(encode_message(m) for m in messages) == body


def test_query_message_transfer_layout_ends_with_the_records(
    vectors_by_name: dict, vectors_dir: Path
) -> None:
    """The broker's zero-copy transfer is header bytes then raw records: the records decode in place."""
    transfer = (
        vectors_dir / vectors_by_name["resp_query_message_success_transfer.json"]["file"]
    ).read_bytes()
    body = bytes.fromhex(vectors_by_name["resp_query_message_success.json"]["bodyHex"])
    assert transfer.endswith(body)
    view = memoryview(transfer)[len(transfer) - len(body) :]
    assert [m.unique_key for m in decode_messages(view)] == [
        "0A0100091F906D06D69C0000001A0001",
        "0A0100091F906D06D69C0000001A0002",
    ]
