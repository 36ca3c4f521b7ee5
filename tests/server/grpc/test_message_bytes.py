"""A received message's ReceiveMessageResponse bytes (``server/grpc/message_bytes.py`` and its compiled
twin ``_message_bytes_fast.c``) against the protobuf objects' serialization of ``build_message``.

Each case is encoded three ways: ``ReceiveMessageResponse(message=build_message(...))`` serialized
deterministically, the Python reference and the C twin (loaded directly, so it is checked whichever
way the suite runs). The twins give the same bytes; those are the objects' bytes exactly, bar the
order of the user properties' map entries when there are several (in key order here; upb's
deterministic order puts a key after the keys it is a prefix of), and parse to the same message.
The cases set and leave out every optional field ``build_message`` writes, with numbers at the
varint and timestamp edges, and the refusals (a timestamp out of range, a string that is not UTF-8)
must be refused by all three.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from protocol.message import MessageExt
from server.grpc import message_bytes
from server.grpc.conversion import SYSTEM_PROPERTY_NAMES
from server.grpc.message_bytes import (
    ReceivedMessages,
    delivery_timestamp_response,
    python_encode_response,
    varint,
)
from server.grpc.receiving import build_message
from server.grpc.v2 import service


def _fast() -> ModuleType | None:
    try:
        return importlib.import_module("server.grpc._message_bytes_fast")
    except ImportError:
        return None


ENCODERS: list[tuple[str, Callable[..., bytes] | None]] = [
    ("python", python_encode_response),
    ("compiled", getattr(_fast(), "encode_response", None)),
]

BASE = MessageExt(
    topic="OrderTopic",
    body=b"hello body",
    queue_id=3,
    queue_offset=12_345,
    commit_log_offset=987_654,
    born_timestamp=1_764_400_000_123,
    store_timestamp=1_764_400_000_456,
    born_host="10.0.0.7",
    store_host="127.0.0.1",
    store_port=10911,
    properties={
        "UNIQ_KEY": "7F00000100012A9F1B2C3D4E5F60000A",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "zeta": "last",
        "alpha": "first",
        "PGROUP": "OrderTopic",
        "RECONSUME_TIME": "0",
        "__BORNHOST": "10.0.0.7:5555",
        "BORN_TIMESTAMP": "1764400000123",
    },
)


def _with(**props: str | None) -> MessageExt:
    """BASE with properties set (a value) or removed (None)."""
    merged = dict(BASE.properties)
    for name, value in props.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return replace(BASE, properties=merged)


CASES: dict[str, tuple[MessageExt, int, str, int | None]] = {
    "every usual field": (BASE, 1, "handle-1", 30_000),
    "no properties at all": (replace(BASE, properties={}), 1, "h", 30_000),
    "an empty body": (replace(BASE, body=b""), 2, "h", 30_000),
    "a body over 127 and 16383 bytes": (replace(BASE, body=bytes(range(256)) * 70), 3, "h", 30_000),
    "queue id 0, queue offset 0": (replace(BASE, queue_id=0, queue_offset=0), 1, "h", 30_000),
    "a negative queue id": (replace(BASE, queue_id=-1), 1, "h", 30_000),
    "a large queue offset": (replace(BASE, queue_offset=(1 << 62) + 5), 1, "h", 30_000),
    "attempt 0 and a large one": (BASE, 0, "h", 30_000),
    "attempt 300": (BASE, 300, "h", 30_000),
    "no receipt handle, no invisible duration (a check-back)": (BASE, 1, "", None),
    "an invisible duration of whole seconds": (BASE, 1, "h", 10_000),
    "an invisible duration with milliseconds": (BASE, 1, "h", 43_200_001),
    "an empty tag": (_with(TAGS=""), 1, "h", 30_000),
    "keys with empty items": (_with(KEYS=" a  b "), 1, "h", 30_000),
    "one key": (_with(KEYS="only"), 1, "h", 30_000),
    "an empty KEYS": (_with(KEYS=""), 1, "h", 30_000),
    "no tag, no keys": (_with(TAGS=None, KEYS=None), 1, "h", 30_000),
    "no UNIQ_KEY: the offset message id": (_with(UNIQ_KEY=None), 1, "h", 30_000),
    "no __BORNHOST: the record's born host": (_with(__BORNHOST=None), 1, "h", 30_000),
    "no born host anywhere": (replace(_with(__BORNHOST=None), born_host=""), 1, "h", 30_000),
    "a FIFO message": (_with(__SHARDINGKEY="group-7"), 1, "h", 30_000),
    "an empty message group": (_with(__SHARDINGKEY=""), 1, "h", 30_000),
    "a trace context": (_with(TRACE_CONTEXT="00-abc-def-01"), 1, "h", 30_000),
    "a timer message": (_with(TIMER_DELIVER_MS="1764400060000"), 1, "h", 30_000),
    "a timer message before 1970": (_with(TIMER_DELIVER_MS="-1500"), 1, "h", 30_000),
    "a delivery time that is not a number": (_with(TIMER_DELIVER_MS="soon"), 1, "h", 30_000),
    "a DELAY level": (_with(DELAY="3"), 1, "h", 30_000),
    "TIMER_DELAY_SEC": (_with(TIMER_DELAY_SEC="10"), 1, "h", 30_000),
    "TIMER_DELAY_MS": (_with(TIMER_DELAY_MS="10"), 1, "h", 30_000),
    "a half message": (_with(TRAN_MSG="true", __SHARDINGKEY="g"), 1, "h", 30_000),
    "TRAN_MSG not true": (_with(TRAN_MSG="false"), 1, "h", 30_000),
    "timestamps 0 and before 1970": (replace(BASE, born_timestamp=0, store_timestamp=-1), 1, "h", 30_000),
    "timestamps of whole seconds": (
        replace(BASE, born_timestamp=5_000, store_timestamp=1000),
        1,
        "h",
        30_000,
    ),
    "unicode everywhere": (
        replace(
            _with(TAGS="标签", KEYS="ключ κλειδί", **{"名字": "值 🚀", "é": ""}),
            topic="主题",
            body="тело 🚀".encode(),
        ),
        1,
        "句柄",
        30_000,
    ),
    "many user properties, unsorted": (
        _with(**{f"p{n % 7}{n}": "v" * n for n in range(40, 0, -1)}),
        1,
        "h",
        30_000,
    ),
    "an empty topic": (replace(BASE, topic=""), 1, "h", 30_000),
    "a store host with another port": (
        replace(BASE, store_host="192.168.1.20", store_port=0),
        1,
        "h",
        30_000,
    ),
}


def reference(message: MessageExt, attempt: int, handle: str, invisible: int | None) -> bytes:
    built = build_message(message, attempt=attempt, receipt_handle=handle, invisible_ms=invisible)
    return service.ReceiveMessageResponse(message=built).SerializeToString(deterministic=True)


def encoded(
    encoder: Callable[..., bytes],
    message: MessageExt,
    attempt: int,
    handle: str,
    invisible: int | None,
    topic: str,
) -> bytes:
    original = message_bytes.encode_response
    message_bytes.encode_response = encoder
    try:
        return ReceivedMessages(topic, invisible).response(message, attempt=attempt, receipt_handle=handle)
    finally:
        message_bytes.encode_response = original


@pytest.mark.parametrize(("name", "encoder"), ENCODERS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_bytes_as_the_protobuf_objects(
    case: str, name: str, encoder: Callable[..., bytes] | None
) -> None:
    if encoder is None:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")
    message, attempt, handle, invisible = CASES[case]
    expected = reference(message, attempt, handle, invisible)
    got = encoded(encoder, message, attempt, handle, invisible, message.topic)
    same_as_reference(got, expected, message)
    # a record of another topic than the receive's (a retry topic's) keeps its own
    assert encoded(encoder, message, attempt, handle, invisible, "%RETRY%Group") == got
    # the twins give the same bytes
    assert encoded(python_encode_response, message, attempt, handle, invisible, message.topic) == got
    assert service.ReceiveMessageResponse.FromString(got).message.body == message.body


def user_names(message: MessageExt) -> list[str]:
    return [k for k in message.properties if k not in SYSTEM_PROPERTY_NAMES]


def same_as_reference(got: bytes, expected: bytes, message: MessageExt) -> None:
    """``got`` is the reference's bytes: exactly, or, with more than one user property, the same
    message with the map's entries in key order (upb's deterministic order of a map differs: a key
    that is a prefix of another goes after it), which clients read as the same map."""
    parsed = service.ReceiveMessageResponse.FromString(got)
    assert parsed == service.ReceiveMessageResponse.FromString(expected)
    assert parsed.SerializeToString(deterministic=True) == expected
    names = user_names(message)
    if len(names) <= 1:
        assert got == expected
    else:
        at = [got.index(b"\x0a" + varint(len(n.encode())) + n.encode() + b"\x12") for n in sorted(names)]
        assert at == sorted(at)


@pytest.mark.parametrize(("name", "encoder"), ENCODERS)
def test_a_receive_encodes_its_messages_in_turn(name: str, encoder: Callable[..., bytes] | None) -> None:
    """One ``ReceivedMessages`` for several records: its per-call parts do not leak between them."""
    if encoder is None:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")
    messages = ReceivedMessages("OrderTopic", 30_000)
    original = message_bytes.encode_response
    message_bytes.encode_response = encoder
    try:
        for case in sorted(CASES):
            message, attempt, handle, _ = CASES[case]
            got = messages.response(message, attempt=attempt, receipt_handle=handle)
            same_as_reference(got, reference(message, attempt, handle, 30_000), message)
    finally:
        message_bytes.encode_response = original


REFUSED: dict[str, tuple[MessageExt, type[Exception]]] = {
    "a born time past year 9999": (replace(BASE, born_timestamp=253_402_300_800_000), ValueError),
    "a store time before year 1": (replace(BASE, store_timestamp=-62_135_596_801_000), ValueError),
    "a born time past a Java long": (replace(BASE, born_timestamp=1 << 70), ValueError),
    "a delivery time past year 9999": (_with(TIMER_DELIVER_MS="999999999999999999"), ValueError),
    "a property value that is not UTF-8": (_with(name="\ud800"), UnicodeEncodeError),
    "a tag that is not UTF-8": (_with(TAGS="\udcff"), UnicodeEncodeError),
}


@pytest.mark.parametrize(("name", "encoder"), ENCODERS)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_objects_refuse_is_refused(
    case: str, name: str, encoder: Callable[..., bytes] | None
) -> None:
    """A record the protobuf objects cannot carry is refused (the receive answers an error), never
    sent half-written."""
    if encoder is None:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")
    message, error = REFUSED[case]
    with pytest.raises((ValueError, TypeError)):
        reference(message, 1, "h", 30_000)
    with pytest.raises(error):
        encoded(encoder, message, 1, "h", 30_000, message.topic)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (-1, b"\xff" * 9 + b"\x01"),
        ((1 << 63) - 1, b"\xff" * 8 + b"\x7f"),
    ],
)
def test_varint(value: int, expected: bytes) -> None:
    """The protobuf encoding's own examples (``300`` is the documentation's ``ac 02``)."""
    assert varint(value) == expected


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 1_764_400_000_123, -1, -1500])
def test_the_delivery_timestamp_response(ms: int) -> None:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    expected = service.ReceiveMessageResponse(delivery_timestamp=stamp).SerializeToString()
    assert delivery_timestamp_response(ms) == expected
