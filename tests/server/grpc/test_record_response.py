"""A stored record's ReceiveMessageResponse written straight from its bytes (the compiled
``record_response`` behind ``ReceivedMessages.record``) against the reference: the record decoded
(``decode_message``) and written by ``ReceivedMessages.response``.

Every case of ``test_message_bytes`` is stored as a record (``encode_message``) and answered both
ways; then the records the compiled path must hand back to Python (None) and the property strings
only a record can hold (repeated names, malformed items, bytes that are not UTF-8). The compiled
module is loaded directly, so it is checked whichever way the suite runs.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from types import ModuleType

import pytest

from protocol.message import (
    COMPRESSED_FLAG,
    MAGIC_CODE_V1,
    STOREHOST_V6_FLAG,
    MessageEncodeError,
    MessageExt,
    decode_message,
    encode_message,
)
from server.grpc.conversion import SYSTEM_PROPERTY_NAMES
from server.grpc.message_bytes import ReceivedMessages, md5_hex
from tests.support.received_cases import BASE, CASES


def _fast() -> ModuleType | None:
    try:
        return importlib.import_module("server.grpc._message_bytes_fast")
    except ImportError:
        return None


FAST = _fast()
needs_fast = pytest.mark.skipif(FAST is None, reason="the compiled accelerators are not built")


def stored(message: MessageExt, properties: str | bytes | None = None) -> bytes | None:
    try:
        return encode_message(message, properties_string=properties)
    except MessageEncodeError:
        return None  # not a record a store can hold (an empty born host)


def both(
    raw: bytes, topic: str, attempt: int, handle: str, invisible: int | None
) -> tuple[bytes | None, bytes]:
    """(the compiled path's answer or None when it declines, the reference's)."""
    messages = ReceivedMessages(topic, invisible)
    assert FAST is not None
    fast = FAST.record_response(
        raw,
        topic.encode(),
        messages._topic_field,
        messages._invisible,
        SYSTEM_PROPERTY_NAMES,
        attempt,
        handle,
        md5_hex,
    )
    return fast, messages.response(decode_message(raw), attempt=attempt, receipt_handle=handle)


@needs_fast
def test_every_message_case_stored_gives_the_references_bytes() -> None:
    answered = 0
    for name, (message, attempt, handle, invisible) in sorted(CASES.items()):
        raw = stored(message)
        if raw is None:
            continue
        fast, expected = both(raw, message.topic, attempt, handle, invisible)
        assert fast is None or fast == expected, name
        # ReceivedMessages.record, whichever path it takes, is the reference's answer
        assert ReceivedMessages(message.topic, invisible).record(
            raw, attempt=attempt, receipt_handle=handle
        ) == (expected), name
        if "UNIQ_KEY" in message.properties and "TIMER_DELIVER_MS" not in message.properties:
            assert fast is not None, f"{name}: declined"
            answered += 1
    assert answered >= 30


DECLINED = {
    "a compressed body": replace(BASE, sys_flag=COMPRESSED_FLAG, body=b"x" * 300),
    "an IPv6 store host": replace(BASE, sys_flag=STOREHOST_V6_FLAG, store_host="::1"),
    "no UNIQ_KEY": replace(BASE, properties={k: v for k, v in BASE.properties.items() if k != "UNIQ_KEY"}),
    "a delivery time": replace(BASE, properties={**BASE.properties, "TIMER_DELIVER_MS": "1764400060000"}),
}


@needs_fast
@pytest.mark.parametrize("case", sorted(DECLINED))
def test_what_the_python_path_answers_is_declined(case: str) -> None:
    message = DECLINED[case]
    raw = stored(message)
    assert raw is not None
    fast, expected = both(raw, message.topic, 2, "h", 30_000)
    assert fast is None
    assert ReceivedMessages(message.topic, 30_000).record(raw, attempt=2, receipt_handle="h") == expected


@needs_fast
def test_a_record_of_another_topic_is_declined_and_answered_with_its_own_topic() -> None:
    raw = stored(replace(BASE, topic="%RETRY%group"))
    assert raw is not None
    fast, expected = both(raw, "OrderTopic", 1, "h", 30_000)
    assert fast is None
    got = ReceivedMessages("OrderTopic", 30_000).record(raw, attempt=1, receipt_handle="h")
    assert got == expected and b"%RETRY%group" in got


UNIQ = "UNIQ_KEY\x017F00000100012A9F1B2C3D4E5F60000A"
PROPERTY_STRINGS = {
    "a repeated name keeps its last value": f"{UNIQ}\x02a\x01one\x02TAGS\x01t1\x02a\x01two\x02TAGS\x01t2",
    "malformed items are skipped": f"\x02\x01v\x02n\x01\x02plain\x02{UNIQ}\x02x\x01\x01y\x02\x02",
    "a value holding separators": f"{UNIQ}\x02k\x01a\x01b\x01",
    "one item, no separator after it": UNIQ,
    "a trailing separator": UNIQ + "\x02",
    "non-ASCII names and values": f"{UNIQ}\x02名字\x01值 🚀\x02KEYS\x01ключ  κλειδί",
}


@needs_fast
@pytest.mark.parametrize("case", sorted(PROPERTY_STRINGS))
def test_property_strings_only_a_record_can_hold(case: str) -> None:
    raw = stored(BASE, PROPERTY_STRINGS[case])
    assert raw is not None
    fast, expected = both(raw, BASE.topic, 1, "h", 30_000)
    assert fast == expected


@needs_fast
def test_properties_that_are_not_utf8_are_declined_and_decoded_as_python_does() -> None:
    raw = stored(BASE, UNIQ.encode() + b"\x02bad\x01\xff\xfe")
    assert raw is not None
    fast, expected = both(raw, BASE.topic, 1, "h", 30_000)
    assert fast is None
    assert "\ufffd".encode() in expected


@needs_fast
def test_a_v1_record_and_numbers_at_their_edges() -> None:
    for message in (
        replace(BASE, magic=MAGIC_CODE_V1),
        replace(BASE, queue_id=-7, queue_offset=(1 << 63) - 1, store_port=65535),
        replace(BASE, born_timestamp=-1, store_timestamp=(1 << 41) + 999),
        replace(BASE, reconsume_times=16, body=b""),
    ):
        raw = stored(message)
        assert raw is not None
        fast, expected = both(raw, message.topic, 3, "7 1 2 3 N b 0 7 9", 10_001)
        assert fast == expected
