"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID over TCP answer exactly what the real Java store answered.

``java-4.9.7-a.expected.json`` lists what ``DefaultMessageStore`` returned for 476 queries (every key
shape: multi-key, unicode, emoji, hash collisions, time windows, maxNum edge cases) and 163 offsets.
Each is sent to the server, pipelined on one connection, in both header serializations; the answer
must carry the same records (by sha256 of the raw bytes, in the same order), the same index
watermark in both response header fields, QUERY_NOT_FOUND with the broker's remark when nothing
matched, and SYSTEM_ERROR where the Java store threw.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from server.app import QueryServer
from server.remoting.processors.query_message import QUERY_NOT_FOUND_REMARK, view_not_found_remark
from tests.support.harness import Connect, RawClient

SERIALIZATIONS = [SerializeType.JSON, SerializeType.ROCKETMQ]


def split_records(body: bytes) -> list[bytes]:
    """Whole CommitLog records, by their TOTALSIZE prefix."""
    records, pos = [], 0
    while pos < len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        records.append(body[pos : pos + size])
        pos += size
    assert pos == len(body)
    return records


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_queries_match_the_java_store(
    serialize_type: SerializeType, java_expected: dict[str, Any], connect: Connect
) -> None:
    client = await connect()
    queries = java_expected["queries"]
    requests = [
        RawClient.request(
            RequestCode.QUERY_MESSAGE,
            {
                "topic": q["topic"],
                "key": q["key"],
                "maxNum": str(q["maxNum"]),
                "beginTimestamp": str(q["begin"]),
                "endTimestamp": str(q["end"]),
                "_UNIQUE_KEY_QUERY": "false",
            },
            serialize_type=serialize_type,
        )
        for q in queries
    ]
    answers = await client.ask_all(requests)
    found = 0
    for query, answer in zip(queries, answers, strict=True):
        assert answer.serialize_type == serialize_type
        label = f"{query['label']} {query['topic']}#{query['key']!r}"
        if "exception" in query:
            assert answer.code == ResponseCode.SYSTEM_ERROR, label
            assert answer.remark, label
            continue
        if query["key"] == "" and serialize_type == SerializeType.ROCKETMQ:
            # The ROCKETMQ header encodes "" as a zero-length string, which 4.9.7 decodes as null; its
            # header decoder only logs the missing key, and the broker looks up "<topic>#null". No
            # message here has the key "null": QUERY_NOT_FOUND, as the real broker answered by hand
            # (RELIABILITY.md; tests/server/remoting/test_null_header_fields.py).
            assert answer.code == ResponseCode.QUERY_NOT_FOUND, label
            assert answer.ext_fields == {"indexLastUpdatePhyoffset": "0", "indexLastUpdateTimestamp": "0"}
            continue
        assert answer.ext_fields == {
            "indexLastUpdatePhyoffset": str(query["indexLastUpdatePhyoffset"]),
            "indexLastUpdateTimestamp": str(query["indexLastUpdateTimestamp"]),
        }, label
        if query["count"] == 0:
            assert (answer.code, answer.remark, answer.body) == (
                ResponseCode.QUERY_NOT_FOUND,
                QUERY_NOT_FOUND_REMARK,
                None,
            ), label
            continue
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None), label
        records = split_records(bytes(answer.body or b""))
        assert [hashlib.sha256(r).hexdigest() for r in records] == [
            r["rawSha256"] for r in query["results"]
        ], label
        assert sum(len(r) for r in records) == query["bufferTotalSize"], label
        found += 1
    assert found > 300


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_views_match_the_java_store(
    serialize_type: SerializeType, java_expected: dict[str, Any], connect: Connect
) -> None:
    client = await connect()
    views = java_expected["views"]
    requests = [
        RawClient.request(
            RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(v["offset"])}, serialize_type=serialize_type
        )
        for v in views
    ]
    answers = await client.ask_all(requests)
    for view, answer in zip(views, answers, strict=True):
        if view["found"]:
            assert (answer.code, answer.remark, answer.ext_fields) == (ResponseCode.SUCCESS, None, None)
            assert hashlib.sha256(bytes(answer.body or b"")).hexdigest() == view["rawSha256"]
        else:
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert answer.remark == view_not_found_remark(view["offset"])
            assert answer.body is None


async def test_unique_key_query_uses_the_default_max_num(
    java_expected: dict[str, Any], connect: Connect
) -> None:
    """``_UNIQUE_KEY_QUERY=true`` replaces the client's maxNum by defaultQueryMaxNum (32), like the broker."""
    common = next(q for q in java_expected["queries"] if q["maxNum"] == 64 and q["count"] > 32)
    client = await connect()
    fields = {
        "topic": common["topic"],
        "key": common["key"],
        "maxNum": "1",
        "beginTimestamp": str(common["begin"]),
        "endTimestamp": str(common["end"]),
    }
    plain = await client.call(
        RawClient.request(RequestCode.QUERY_MESSAGE, {**fields, "_UNIQUE_KEY_QUERY": "false"})
    )
    unique = await client.call(
        RawClient.request(RequestCode.QUERY_MESSAGE, {**fields, "_UNIQUE_KEY_QUERY": "true"})
    )
    assert len(split_records(bytes(plain.body or b""))) == 1
    assert len(split_records(bytes(unique.body or b""))) == 32


async def test_the_fast_port_answers_like_the_main_port(
    java_expected: dict[str, Any], server: QueryServer, connect: Connect
) -> None:
    """The dashboard's VIP channel talks to port - 2; the broker serves the same requests there."""
    assert server.fast_port == server.port - 2
    view = next(v for v in java_expected["views"] if v["found"])
    query = next(q for q in java_expected["queries"] if q["count"] > 0 and q["maxNum"] == 32)
    requests = [
        RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(view["offset"])}, opaque=1),
        RawClient.request(
            RequestCode.QUERY_MESSAGE,
            {
                "topic": query["topic"],
                "key": query["key"],
                "maxNum": "32",
                "beginTimestamp": str(query["begin"]),
                "endTimestamp": str(query["end"]),
            },
            opaque=2,
        ),
    ]
    main = await (await connect()).ask_all(requests)
    fast = await (await connect(port=server.fast_port)).ask_all(requests)
    assert main == fast
    assert main[0].code == main[1].code == ResponseCode.SUCCESS
