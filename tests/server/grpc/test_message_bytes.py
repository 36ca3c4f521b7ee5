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
from tests.support.received_cases import BASE, CASES, with_properties


def _fast() -> ModuleType | None:
    try:
        return importlib.import_module("server.grpc._message_bytes_fast")
    except ImportError:
        return None


ENCODERS: list[tuple[str, Callable[..., bytes] | None]] = [
    ("python", python_encode_response),
    ("compiled", getattr(_fast(), "encode_response", None)),
]


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
    "a delivery time past year 9999": (with_properties(TIMER_DELIVER_MS="999999999999999999"), ValueError),
    "a property value that is not UTF-8": (with_properties(name="\ud800"), UnicodeEncodeError),
    "a tag that is not UTF-8": (with_properties(TAGS="\udcff"), UnicodeEncodeError),
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
