"""mqadmin's text layouts, pinned against what the real mqadmin 4.9.7 printed for the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from clients.admin import java_split_space
from clients.output import (
    KEY_TABLE_HEADER,
    consumer_trailer,
    format_properties,
    human_time,
    java_host_text,
    json_line,
    key_table,
    message_detail,
    message_record,
    socket_addr_text,
)
from protocol.frame import decode_frame
from protocol.java_hashmap import java_hashmap_order
from protocol.message import MessageExt, decode_message, decode_messages


def _response_body(vectors_dir: Path, scenario: str, name: str) -> bytes:
    body = decode_frame((vectors_dir / "wire" / scenario / name).read_bytes()).body
    assert body
    return bytes(body)


def _stdout(vectors_dir: Path, scenario: str) -> str:
    return (vectors_dir / "wire" / scenario / "client-stdout.jsonl").read_text(encoding="utf-8")


def test_key_table_matches_mqadmin_query_msg_by_key(vectors_dir: Path) -> None:
    messages = decode_messages(_response_body(vectors_dir, "mqadmin_queryMsgByKey", "005_resp_code0.bin"))
    kept = [m for m in messages if "k-3" in java_split_space(m.properties.get("KEYS", ""))]
    assert key_table(kept) == _stdout(vectors_dir, "mqadmin_queryMsgByKey")


def test_key_table_header_and_long_ids_overflow_the_column() -> None:
    msg = MessageExt(queue_id=2, queue_offset=152, properties={"UNIQ_KEY": "FD" * 28})
    lines = key_table([msg]).splitlines()
    assert lines[0] == KEY_TABLE_HEADER == "#Message ID" + " " * 40 + "#QID" + " " * 34 + "#Offset"
    assert lines[1] == "FD" * 28 + "    2" + " " * 38 + "152"


@pytest.mark.usefixtures("utc")
def test_detail_block_matches_mqadmin_query_msg_by_id(vectors_dir: Path) -> None:
    msg = decode_message(_response_body(vectors_dir, "mqadmin_queryMsgById", "001_resp_code0.bin"))
    path = f"<harness>/run/msgbodys/{msg.msg_id}"
    text = message_detail(msg, body_path=path, with_offset_id=True) + consumer_trailer([])
    assert text == _stdout(vectors_dir, "mqadmin_queryMsgById") + "\n"


@pytest.mark.usefixtures("utc")
def test_detail_block_matches_mqadmin_query_msg_by_unique_key(vectors_dir: Path) -> None:
    body = _response_body(vectors_dir, "mqadmin_queryMsgByUniqueKey", "005_resp_code0.bin")
    msg = next(m for m in decode_messages(body) if m.msg_id == "0A0100091F906D06D69C0000001A0002")
    path = f"<harness>/run/msgbodys/{msg.msg_id}"
    text = message_detail(msg, body_path=path, with_offset_id=False) + consumer_trailer([])
    assert text == _stdout(vectors_dir, "mqadmin_queryMsgByUniqueKey") + "\n"


def test_body_line_follows_the_path_line() -> None:
    msg = MessageExt(topic="T", body=b"hello")
    lines = message_detail(msg, body_path="/p", with_offset_id=False, body_text="hello").splitlines()
    assert lines[-2:] == [f"{'Message Body Path:':<20} /p", f"{'Message Body:':<20} hello"]


def test_missing_tags_and_keys_print_as_java_null() -> None:
    text = message_detail(MessageExt(topic="T"), body_path="/p", with_offset_id=False)
    assert "Tags:                [null]\n" in text
    assert "Keys:                [null]\n" in text


def test_hashmap_order_matches_java_properties_string(vectors_dir: Path, manifest: dict) -> None:
    vector = next(v for v in manifest["vectors"] if v["name"] == "properties_string")
    java_order = [
        pair.split("\x01")[0]
        for pair in (vectors_dir / vector["file"]).read_text(encoding="utf-8").split("\x02")
    ]
    assert java_hashmap_order(sorted(vector["inputs"])) == java_order


def test_hashmap_order_is_a_stable_permutation() -> None:
    keys = [f"key-{i}" for i in range(40)]  # forces two resizes (16 -> 32 -> 64)
    ordered = java_hashmap_order(keys)
    assert sorted(ordered) == sorted(keys)
    assert java_hashmap_order(ordered) == ordered  # re-inserting in iteration order keeps it


def test_format_properties() -> None:
    assert format_properties({"TAGS": "t", "KEYS": "a b"}) == "{KEYS=a b, TAGS=t}"
    assert format_properties({}) == "{}"
    assert format_properties(None) == ""


@pytest.mark.usefixtures("utc")
def test_human_time_is_java_time_millis_to_human_string2() -> None:
    assert human_time(1700000000039) == "2023-11-14 22:13:20,039"
    assert human_time(0) == "1970-01-01 00:00:00,000"
    assert human_time(-1) == "1969-12-31 23:59:59,999"
    assert human_time((1 << 63) - 1) == "292278994-08-17 07:12:55,807"  # Java's Long.MAX_VALUE date


@pytest.mark.parametrize(
    ("host", "port", "text"),
    [
        ("10.1.2.9", 50002, "10.1.2.9:50002"),
        ("fd00::1234:5678", 40003, "[fd00:0:0:0:0:0:1234:5678]:40003"),
        ("::1", 10911, "[0:0:0:0:0:0:0:1]:10911"),
    ],
)
def test_socket_addr_text_is_java_style(host: str, port: int, text: str) -> None:
    assert socket_addr_text(host, port) == text
    assert java_host_text(host) == text.rsplit(":", 1)[0].strip("[]")


def test_json_record_matches_the_java_reference_client_dump(vectors_dir: Path) -> None:
    body = _response_body(vectors_dir, "v4_queryMsgByKey", "003_resp_code0.bin")
    expected = [
        json.loads(line)
        for line in _stdout(vectors_dir, "v4_queryMsgByKey").splitlines()
        if json.loads(line)["type"] == "message"
    ]
    by_offset = {m.commit_log_offset: m for m in decode_messages(body)}
    assert expected
    for want in expected:
        got = message_record(by_offset[want["commitLogOffset"]], include_body=True)
        assert list(got) == list(want)
        assert got == want


def test_json_record_without_body_omits_body_bytes() -> None:
    record = message_record(MessageExt(topic="T", body=b"\xff"), include_body=False)
    assert record["bodyLen"] == 1 and "bodyHex" not in record
    assert message_record(MessageExt(body=b"\xff"), include_body=True)["bodyUtf8"] is None


def test_json_line_is_compact_utf8() -> None:
    line = json_line({"a": "ключ", "b": 1})
    assert line == '{"a":"ключ","b":1}\n'
    assert msgspec.json.decode(line) == {"a": "ключ", "b": 1}


def test_consumer_trailer_lists_groups() -> None:
    assert consumer_trailer([]) == "\n\nWARN: No Consumer\n"
    assert consumer_trailer(["g1"]) == "\n\nConsumer group: g1 (consumption state not checked)\n"
