"""Offset message ids match Java's ``createMessageId``/``decodeMessageId``; unique ids follow
``MessageClientIDSetter``'s layout."""

from __future__ import annotations

import ipaddress
import json
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from protocol.errors import MessageIdError
from protocol.message_id import (
    UniqueIdGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    parse_unique_id,
)


def _java_address(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    host, _, port = text.lstrip("/").rpartition(":")
    return ipaddress.ip_address(host.strip("[]")), int(port)


def test_offset_id_vectors(vectors_by_name: dict) -> None:
    items = vectors_by_name["message_ids"]["items"]
    assert any(item["offset"] == -1 for item in items)
    assert any(len(item["msgId"]) == 56 for item in items)
    for item in items:
        assert create_offset_msg_id(item["host"], item["port"], item["offset"]) == item["msgId"]
        host, port, offset = decode_offset_msg_id(item["msgId"])
        assert (ipaddress.ip_address(host), port) == _java_address(item["decodedAddress"])
        assert offset == item["decodedOffset"]
        # Java's string2bytes accepts lower case too.
        assert decode_offset_msg_id(item["msgId"].lower()) == (host, port, offset)


def test_reference_example() -> None:
    assert decode_offset_msg_id("0AAF0895000078BF000000000009BB4A") == ("10.175.8.149", 30911, 637770)


def test_offset_ids_of_the_real_store(stores_dir: Path) -> None:
    expected = json.loads((stores_dir / "java-4.9.7-a.expected.json").read_text(encoding="utf-8"))
    ids = [m["offsetMsgId"] for m in expected["messages"]]
    assert {len(i) for i in ids} == {32, 56}
    for message in expected["messages"]:
        host, port, offset = decode_offset_msg_id(message["offsetMsgId"])
        assert offset == message["commitLogOffset"]
        assert create_offset_msg_id(host, port, offset) == message["offsetMsgId"]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "7F00000100002A9F000000000000000",  # 31 chars
        "7F00000100002A9F00000000000000000",  # 33 chars
        "7F00000100002A9F000000000000000G",  # not hex
        "7F00000100002A9F00000000000000 0",
        "7F00000100002A9F0000000000000０00",  # full-width digit
        "7F00000100002A9F00000000000000é0"[:32],
    ],
)
def test_bad_offset_ids(bad: str) -> None:
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(bad)
    with pytest.raises(MessageIdError):
        parse_unique_id(bad)


def test_bad_inputs_to_create() -> None:
    with pytest.raises(MessageIdError):
        create_offset_msg_id("not-an-ip", 1, 1)
    with pytest.raises(MessageIdError):
        create_offset_msg_id("127.0.0.1", 1, 1 << 63)
    with pytest.raises(MessageIdError):
        create_offset_msg_id("127.0.0.1", 1 << 31, 1)


def test_unique_id_fields_of_real_ids(stores_dir: Path) -> None:
    expected = json.loads((stores_dir / "java-4.9.7-a.expected.json").read_text(encoding="utf-8"))
    v6 = parse_unique_id("FD0000000000000000000000000000024D645FFD2B2766DB16790000")
    assert v6.ip == "fd00::2"
    assert (v6.pid, v6.class_loader_hash, v6.month_offset_ms, v6.counter) == (
        0x4D64,
        0x5FFD2B27,
        0x66DB1679,
        0,
    )
    v4 = parse_unique_id("0A0100091F906D06D69C0000001A0002")
    assert v4 == ("10.1.0.9", 0x1F90, 0x6D06D69C, 0x1A, 2)
    uniq = [m["uniqKey"] for m in expected["messages"] if m["uniqKey"]]
    assert all(parse_unique_id(u) for u in uniq)


def test_approximate_timestamp_resolves_within_the_last_month() -> None:
    tz = timezone(timedelta(hours=8))
    made = datetime(2026, 11, 20, 23, 20, 34, 258000, tzinfo=tz)
    month_start = datetime(2026, 11, 1, tzinfo=tz)
    offset_ms = int((made - month_start).total_seconds() * 1000)
    uid = parse_unique_id("0A010009" + "1F90" + "6D06D69C" + f"{offset_ms:08X}" + "0001")
    now = made + timedelta(seconds=5)
    assert uid.approximate_timestamp(int(now.timestamp() * 1000), tz) == int(made.timestamp() * 1000)
    # Read on the 2nd of next month, the same field still means November (the previous month start).
    later = datetime(2026, 12, 2, tzinfo=tz)
    assert uid.approximate_timestamp(int(later.timestamp() * 1000), tz) == int(made.timestamp() * 1000)
    # Read in another zone, the guess is off by the zone difference (the id does not say which)...
    much_later = int((made + timedelta(hours=9)).timestamp() * 1000)
    assert uid.approximate_timestamp(much_later, UTC) == int(made.timestamp() * 1000) + 8 * 3600_000
    # ...or, read soon after, that shifted time lies in the future, so the guess falls a month back.
    october = int(made.timestamp() * 1000) + 8 * 3600_000 - 31 * 86_400_000
    assert uid.approximate_timestamp(int(now.timestamp() * 1000), UTC) == october


def test_generator_layout_and_counter() -> None:
    tz = UTC
    now = int(datetime(2026, 11, 20, 23, 0, tzinfo=tz).timestamp() * 1000)
    gen = UniqueIdGenerator("10.1.0.9", pid=0x11F90, class_loader_hash=-1, clock=lambda: now, tz=tz)
    assert gen.prefix == "0A010009" + "1F90" + "FFFFFFFF"
    first, second = gen.next_id(), gen.next_id()
    assert len(first) == 32 and first.startswith(gen.prefix)
    parsed = parse_unique_id(first)
    assert (
        parsed.ip == "10.1.0.9"
        and parsed.pid == 0x1F90
        and parsed.class_loader_hash == 0xFFFFFFFF - (1 << 32)
    )
    assert parsed.month_offset_ms == now - int(datetime(2026, 11, 1, tzinfo=tz).timestamp() * 1000)
    assert parsed.approximate_timestamp(now + 1, tz) == now
    assert (parsed.counter, parse_unique_id(second).counter) == (0, 1)


def test_generator_ipv6_and_month_rollover_and_wrapping() -> None:
    tz = UTC
    clock = [int(datetime(2026, 1, 31, 23, 59, 59, 999000, tzinfo=tz).timestamp() * 1000)]
    gen = UniqueIdGenerator("fd00::2", pid=1, class_loader_hash=2, clock=lambda: clock[0], tz=tz)
    late = parse_unique_id(gen.next_id())
    assert len(gen.prefix) == 44 and late.ip == "fd00::2"
    # Past day ~24.8 the field exceeds 2^31: Java writes a wrapped int, read back unsigned.
    assert late.month_offset_ms == 31 * 86_400_000 - 1 > 2**31
    clock[0] += 1  # 1 February 00:00:00.000: a new month starts counting from zero
    assert parse_unique_id(gen.next_id()).month_offset_ms == 0
    for _ in range(65534):
        gen.next_id()
    assert parse_unique_id(gen.next_id()).counter == 0  # 16-bit counter wraps like Java's (short) cast


def test_generator_defaults_and_threads() -> None:
    gen = UniqueIdGenerator()
    ids: list[str] = []

    def work() -> None:
        ids.extend(gen.next_id() for _ in range(500))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 2000
    assert all(len(i) == 32 and i.startswith(gen.prefix) for i in ids)


def test_generator_refuses_bad_inputs() -> None:
    with pytest.raises(MessageIdError):
        UniqueIdGenerator("999.0.0.1")
    with pytest.raises(MessageIdError):
        UniqueIdGenerator("10.0.0.1", class_loader_hash=1 << 40)
