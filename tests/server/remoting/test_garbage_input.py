"""Garbage on the wire: random bytes and mutated real requests never crash, hang or leak.

Every mutated frame gets either an answer or a closed connection (never silence past the timeout),
no processor error escapes as an unhandled exception, and a well-behaved client on another
connection is answered throughout.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import tracemalloc

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.frame import encode_frame
from server.app import QueryServer
from tests.support.harness import Connect, RawClient

SEED = 20261121
ROUNDS = 60


def _mutations(rng: random.Random) -> list[bytes]:
    base = [
        encode_frame(
            RawClient.request(
                RequestCode.QUERY_MESSAGE,
                {"topic": "TopicA", "key": "k-3", "maxNum": "64", "beginTimestamp": "0", "endTimestamp": "9"},
                serialize_type=st,
            )
        )
        for st in (SerializeType.JSON, SerializeType.ROCKETMQ)
    ] + [encode_frame(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "17457"}))]
    out = []
    for _ in range(ROUNDS):
        frame = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(4, len(frame))  # keep the length word: exercise header/body decoding
            frame[pos] = rng.randrange(256)
        out.append(bytes(frame))
    out += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) for _ in range(ROUNDS // 3)]
    return out


async def test_mutated_frames_get_an_answer_or_a_closed_connection(
    server: QueryServer, connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(SEED)
    witness = await connect()
    with caplog.at_level(logging.WARNING):
        for data in _mutations(rng):
            client = await connect()
            await client.send_bytes(data)
            try:
                reader = client.reader
                result = await asyncio.wait_for(reader.read(1 << 20), 1.0)
            except (ConnectionResetError, TimeoutError):
                result = b""
            if result == b"" and not client.reader.at_eof():
                # Silence is fine only for a frame still incomplete (its declared length not reached).
                declared = int.from_bytes(data[:4], "big", signed=True) if len(data) >= 4 else None
                assert declared is None or declared + 4 > len(data)
            await client.close()
            answer = await witness.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
            assert answer.code == ResponseCode.SUCCESS
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records
    ]
    assert not [r for r in caplog.records if r.exc_info]


def _query(**fields: str) -> dict[str, str]:
    base = {"topic": "TopicA", "key": "k-3", "maxNum": "64", "beginTimestamp": "0", "endTimestamp": "9"}
    base.update(fields)
    return {k: v for k, v in base.items() if v != "<absent>"}


_FIELD = "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field"

#: (request code, extFields, body) -> (response code, the exact remark or its required prefix).
HOSTILE_REQUESTS: dict[str, tuple[int, dict[str, str] | None, bytes | None, int, str]] = {
    "unknown-code": (
        9999,
        None,
        None,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        " request type 9999 not supported",
    ),
    "negative-code": (
        -7,
        {"a": "b"},
        None,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        " request type -7 not supported",
    ),
    "view-offset-garbage": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "0x1f"},
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <offset> is not a valid Java long: '0x1f'",
    ),
    "view-offset-past-long": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "99999999999999999999"},
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <offset> is not a valid Java long: '99999999999999999999' is out of range",
    ),
    "view-offset-past-end": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": str(2**62)},
        None,
        ResponseCode.SYSTEM_ERROR,
        f"can not find message by the offset, {2**62}",
    ),
    "view-offset-negative": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "-1"},
        None,
        ResponseCode.SYSTEM_ERROR,
        "can not find message by the offset, -1",
    ),
    "view-offset-mid-record": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "3"},
        None,
        ResponseCode.SYSTEM_ERROR,
        "can not find message by the offset, 3",
    ),
    "view-offset-absent": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        None,
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <offset> is null",
    ),
    "query-maxnum-garbage": (
        RequestCode.QUERY_MESSAGE,
        _query(maxNum="many"),
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <maxNum> is not a valid Java int: 'many'",
    ),
    "query-end-garbage": (
        RequestCode.QUERY_MESSAGE,
        _query(endTimestamp="9e9"),
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <endTimestamp>",
    ),
    "query-topic-absent": (  # 4.9.7 queries "null#k-3" (tests/server/remoting/test_null_header_fields.py)
        RequestCode.QUERY_MESSAGE,
        _query(topic="<absent>"),
        None,
        ResponseCode.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    ),
    "query-maxnum-5000-digits": (
        RequestCode.QUERY_MESSAGE,
        _query(maxNum="9" * 5000),
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <maxNum> is not a valid Java int: '{'9' * 40}'... (5000 characters) is out of range",
    ),
    "query-begin-5000-digits": (
        RequestCode.QUERY_MESSAGE,
        _query(beginTimestamp="-" + "1" * 5000),
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <beginTimestamp> is not a valid Java long: '-{'1' * 39}'... (5001 characters) "
        "is out of range",
    ),
    "query-maxnum-5000-leading-zeros": (  # Integer.parseInt accepts them: the real broker answered SUCCESS
        RequestCode.QUERY_MESSAGE,
        _query(maxNum="0" * 5000 + "5", endTimestamp=str(2**63 - 1)),
        None,
        ResponseCode.SUCCESS,
        "",
    ),
    "query-maxnum-arabic-zeros": (
        RequestCode.QUERY_MESSAGE,
        _query(maxNum="\u0660" * 5000 + "5", endTimestamp=str(2**63 - 1)),
        None,
        ResponseCode.SUCCESS,
        "",
    ),
    "view-offset-5000-digits": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "1" * 5000},
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <offset> is not a valid Java long: '{'1' * 40}'... (5000 characters) is out of range",
    ),
    "view-offset-garbage-5000-characters": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "x" * 5000},
        None,
        ResponseCode.SYSTEM_ERROR,
        f"{_FIELD} <offset> is not a valid Java long: '{'x' * 40}'... (5000 characters)",
    ),
    "query-unknown-topic-huge-maxnum": (
        RequestCode.QUERY_MESSAGE,
        _query(topic="NoSuchTopic", maxNum=str(2**31 - 1), endTimestamp=str(2**63 - 1)),
        None,
        ResponseCode.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    ),
    "heartbeat-deep-json-body": (
        RequestCode.HEART_BEAT,
        None,
        b"[" * 100_000 + b"]" * 100_000,
        ResponseCode.SYSTEM_ERROR,
        "HeartbeatData: the request body is missing or is not a JSON object",
    ),
    "heartbeat-array-body": (
        RequestCode.HEART_BEAT,
        None,
        b'[{"clientID":"c"}]',
        ResponseCode.SYSTEM_ERROR,
        "HeartbeatData: the request body is missing or is not a JSON object",
    ),
    "consume-by-who-topic-absent": (  # as the 4.9.7 broker (tests/server/remoting/test_null_header_fields.py)
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        {"group": "g"},
        None,
        ResponseCode.SUCCESS,
        "",
    ),
}


#: Remarks of the answers built from an exception (a failed header or body decode).
EXCEPTION_REMARKS = ("org.apache.rocketmq.remoting.exception.RemotingCommandException", "HeartbeatData:")


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize("name", sorted(HOSTILE_REQUESTS))
async def test_each_hostile_request_gets_its_exact_answer(
    name: str, serialize_type: SerializeType, connect: Connect
) -> None:
    code, fields, body, expected_code, remark = HOSTILE_REQUESTS[name]
    witness = await connect()
    hostile = await connect()
    if serialize_type == SerializeType.ROCKETMQ and not -(2**15) <= code < 2**15:
        pytest.skip("the ROCKETMQ header holds a 16-bit code")
    request = RawClient.request(code, fields, body, serialize_type=serialize_type)
    answer = await hostile.call(request)
    # answers the broker builds from an exception are JSON whatever the request used
    # (``server.remoting.reply.exception_answer``)
    from_exception = remark.startswith(EXCEPTION_REMARKS) if remark else False
    expected_serialization = SerializeType.JSON if from_exception else serialize_type
    assert (answer.code, answer.serialize_type) == (expected_code, expected_serialization)
    if remark:
        assert answer.remark is not None and answer.remark.startswith(remark), answer.remark
    else:
        assert not answer.remark
    # The same connection keeps serving, and so does every other one.
    assert (await hostile.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))).code == 0
    assert (await witness.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))).code == 0


async def test_huge_ext_fields_under_the_header_limit_are_answered_without_blowing_up(
    server: QueryServer, connect: Connect
) -> None:
    """20,000 tiny extFields (just under the header limit) decode into one dict; the request is
    answered, and what it costs the server stays within a small multiple of the header's size."""
    fields = {f"f{i}": "v" for i in range(20_000)} | {"offset": "0"}
    request = RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, fields, serialize_type=SerializeType.ROCKETMQ)
    frame = encode_frame(request)
    assert len(frame) < server.settings.max_header_length
    client = await connect()
    tracemalloc.start()
    try:
        await client.send_bytes(frame)
        answer = await client.receive()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (answer.opaque, answer.code) == (request.opaque, ResponseCode.SUCCESS)
    assert peak < 20 * len(frame), (peak, len(frame))


async def test_a_huge_declared_length_is_refused_without_allocating_it(
    server: QueryServer, connect: Connect
) -> None:
    """A frame that declares 16 MiB minus a byte (within the frame limit) but a 16 MiB - 12 header is
    refused from its first 8 bytes: the server closes at once instead of buffering 16 MiB."""
    witness = await connect()
    client = await connect()
    length = server.settings.max_frame_length - 5
    tracemalloc.start()
    try:
        await client.send_bytes(struct.pack(">ii", length, length - 4) + b"{" * 1024)
        assert await client.closed_by_server()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, peak
    assert (await witness.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))).code == 0
