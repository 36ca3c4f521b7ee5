"""HEART_BEAT bodies (``HeartbeatData`` JSON), decoded at a bounded cost.

A heartbeat is the one request body an unauthenticated client can make the server parse (with ACL
on, the check itself must read the consumer groups and topics out of it). Decoding it into generic
Python objects let a 15 MiB ``[{},{},...]`` cost ~1 s of the event loop and ~430 MB, so a body is
measured before it is parsed, and parsed only into the few fields anyone reads (unknown fields and
the contents of an unused object are skipped by msgspec without being built).

The bounds come from what real clients send: a Java client's heartbeat carries one ~30-byte entry per
producer group and one ~150-byte ``SubscriptionData`` (about 8 JSON values) per consumer
subscription, plus two per tag; a client with 100 consumer groups of 10 subscriptions each is about
200 KB and 10,000 values. ``MAX_HEARTBEAT_BODY`` (1 MiB) and ``MAX_HEARTBEAT_VALUES`` (100,000
objects and array elements, counted as ``{`` and ``,`` bytes, an upper bound of what a decoder
builds) leave room for far more than that, and cap what one request may allocate at a few MB.

Bytes that are not UTF-8 are read as Java reads them (``new String(body, UTF_8)`` replaces each bad
sequence with U+FFFD before fastjson sees it), so they never raise ``UnicodeDecodeError``.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

#: The largest HEART_BEAT body decoded (bytes); see the module docstring for why.
MAX_HEARTBEAT_BODY = 1024 * 1024
#: The most ``{`` plus ``,`` bytes a decoded HEART_BEAT body may hold (objects and array elements).
MAX_HEARTBEAT_VALUES = 100_000

#: The remark for a body that is absent or not a JSON object (the broker's is fastjson's message).
MALFORMED = "HeartbeatData: the request body is missing or is not a JSON object"

T = TypeVar("T")


class HeartbeatBodyError(ValueError):
    """The body is missing, too large, or not a HeartbeatData JSON object; the text is the remark."""


class SubscriptionData(msgspec.Struct):
    topic: str | None = None


class ConsumerData(msgspec.Struct):
    groupName: str | None = None
    subscriptionDataSet: list[SubscriptionData] | None = None


class HeartbeatData(msgspec.Struct):
    """The parts of ``HeartbeatData`` an access check reads; every other field is skipped."""

    consumerDataSet: list[ConsumerData] | None = None


class AnyObject(msgspec.Struct):
    """Any JSON object, its contents skipped: what answering a heartbeat needs to know."""


_DECODERS: dict[type, msgspec.json.Decoder] = {}


def decode_heartbeat(body: bytes | bytearray | memoryview | None, kind: type[T]) -> T:
    """``body`` decoded as ``kind`` (``HeartbeatData`` or ``AnyObject``), or ``HeartbeatBodyError``.

    The size and value-count bounds are checked before any parsing, so a refused body costs one
    scan of its bytes.
    """
    if not body:
        raise HeartbeatBodyError(MALFORMED)
    data = bytes(body)
    if len(data) > MAX_HEARTBEAT_BODY:
        raise HeartbeatBodyError(
            f"HeartbeatData: the request body is {len(data)} bytes, more than the"
            f" {MAX_HEARTBEAT_BODY} this server decodes"
        )
    values = data.count(b"{") + data.count(b",")
    if values > MAX_HEARTBEAT_VALUES:
        raise HeartbeatBodyError(
            f"HeartbeatData: the request body holds {values} JSON values, more than the"
            f" {MAX_HEARTBEAT_VALUES} this server decodes"
        )
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind)
    try:
        try:
            return decoder.decode(data)
        except UnicodeDecodeError:
            return decoder.decode(data.decode("utf-8", "replace"))
    except (msgspec.DecodeError, RecursionError):  # RecursionError: JSON nested ~1000 levels deep
        raise HeartbeatBodyError(MALFORMED) from None


# The whole HeartbeatData, as the broker registers it (``ClientManageProcessor.heartBeat``) ----------
#
# fastjson writes a Java client's heartbeat from its getters: enums by name, ``tagsSet`` and
# ``codeSet`` as arrays, ``filterClassSource`` never. Fields a client leaves out take the Java
# defaults, so an old or foreign client's heartbeat still registers.


class ClientSubscription(msgspec.Struct):
    """``SubscriptionData``: one topic a consumer group subscribes, with its filter expression."""

    topic: str | None = None
    subString: str | None = None
    tagsSet: list[str] | None = None
    codeSet: list[int] | None = None
    subVersion: int = 0
    expressionType: str | None = "TAG"
    classFilterMode: bool | None = False


class ClientConsumerData(msgspec.Struct):
    """``ConsumerData``: one consumer group of the client, its model and subscriptions."""

    groupName: str | None = None
    consumeType: str | None = None
    messageModel: str | None = None
    consumeFromWhere: str | None = None
    subscriptionDataSet: list[ClientSubscription] | None = None
    unitMode: bool | None = False


class ClientProducerData(msgspec.Struct):
    """``ProducerData``: one producer group of the client."""

    groupName: str | None = None


class ClientHeartbeat(msgspec.Struct):
    """``HeartbeatData`` whole: the client's id, its producer groups and its consumer groups."""

    clientID: str | None = None
    producerDataSet: list[ClientProducerData] | None = None
    consumerDataSet: list[ClientConsumerData] | None = None
