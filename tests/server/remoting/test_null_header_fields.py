"""Header fields that 4.9.7 decodes as null: missing ones, and empty ones over ROCKETMQ serialization.

``RocketMQSerializable.readStr`` (4.9.7) returns null for any zero-length string, so an empty extField
value sent in ROCKETMQ serialization arrives as null; over JSON it stays ``""``. For a ``@CFNotNull``
field, ``decodeCommandCustomHeader`` throws "the custom field <f> is null" *inside* its own
``catch (Throwable)``, logs it and carries on with null: a null number then ends in a
NullPointerException (SYSTEM_ERROR), but a null string is used as Java concatenation uses it, as
``"null"``. ``EXPECTED`` is what the real 4.9.7 broker (QUERY_MESSAGE, UNREGISTER_CLIENT,
QUERY_TOPIC_CONSUME_BY_WHO) and name server (GET_ROUTEINFO_BY_TOPIC) answered to these requests, by
hand, over both serializations (RELIABILITY.md, "Bad input and null header fields"). Remarks of
number errors differ on purpose: Java's is a NullPointerException's text, ours names the field.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.custom_headers import QueryMessageRequestHeader
from protocol.frame import decode_frame, encode_frame
from server.app import QueryServer, ServerSettings
from server.remoting.processors.name_server import topic_not_exist_remark
from server.remoting.processors.query_message import QUERY_NOT_FOUND_REMARK
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter
from tests.support.harness import JAVA_LONG_MAX, Connect, RawClient, key_query_fields

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ
ABSENT = None


def _query(**fields: str | None) -> dict[str, str]:
    base: dict[str, str | None] = {**key_query_fields("TopicA", "k-1"), **fields}
    return {name: value for name, value in base.items() if value is not ABSENT}


NOT_FOUND = (ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)
NO_ROUTE_NULL = (ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark("null"))
NO_ROUTE_EMPTY = (ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(""))
OK = (ResponseCode.SUCCESS, None)

#: name -> (code, extFields, {serialization: (response code, remark)}), as the 4.9.7 Java processes answered.
EXPECTED: dict[str, tuple[int, dict[str, str], dict[SerializeType, tuple[int, str | None]]]] = {
    "query-key-empty": (RequestCode.QUERY_MESSAGE, _query(key=""), {JSON: NOT_FOUND, ROCKETMQ: NOT_FOUND}),
    "query-key-absent": (
        RequestCode.QUERY_MESSAGE,
        _query(key=ABSENT),
        {JSON: NOT_FOUND, ROCKETMQ: NOT_FOUND},
    ),
    "query-topic-empty": (
        RequestCode.QUERY_MESSAGE,
        _query(topic=""),
        {JSON: NOT_FOUND, ROCKETMQ: NOT_FOUND},
    ),
    "query-topic-absent": (
        RequestCode.QUERY_MESSAGE,
        _query(topic=ABSENT),
        {JSON: NOT_FOUND, ROCKETMQ: NOT_FOUND},
    ),
    "unregister-empty": (
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "", "producerGroup": "", "consumerGroup": ""},
        {JSON: OK, ROCKETMQ: OK},
    ),
    "unregister-absent": (RequestCode.UNREGISTER_CLIENT, {"x": "1"}, {JSON: OK, ROCKETMQ: OK}),
    "consume-by-who-empty": (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": ""}, {JSON: OK, ROCKETMQ: OK}),
    "consume-by-who-absent": (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"x": "1"}, {JSON: OK, ROCKETMQ: OK}),
    "route-topic-empty": (
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": ""},
        {JSON: NO_ROUTE_EMPTY, ROCKETMQ: NO_ROUTE_NULL},
    ),
    "route-topic-absent": (
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"x": "1"},
        {JSON: NO_ROUTE_NULL, ROCKETMQ: NO_ROUTE_NULL},
    ),
    "query-maxnum-empty": (
        RequestCode.QUERY_MESSAGE,
        _query(maxNum=""),
        {JSON: (ResponseCode.SYSTEM_ERROR, None), ROCKETMQ: (ResponseCode.SYSTEM_ERROR, None)},
    ),
    "view-offset-empty": (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": ""},
        {JSON: (ResponseCode.SYSTEM_ERROR, None), ROCKETMQ: (ResponseCode.SYSTEM_ERROR, None)},
    ),
}


@pytest.mark.parametrize("serialize_type", [JSON, ROCKETMQ])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_null_and_empty_fields_are_answered_as_the_4_9_7_broker_does(
    name: str, serialize_type: SerializeType, connect: Connect
) -> None:
    code, fields, answers = EXPECTED[name]
    expected_code, expected_remark = answers[serialize_type]
    client = await connect()
    answer = await client.call(RawClient.request(code, fields, serialize_type=serialize_type))
    assert answer.code == expected_code, answer.remark
    if expected_code == ResponseCode.SYSTEM_ERROR:
        field = "maxNum" if "maxNum" in fields else "offset"
        assert answer.remark is not None and f"<{field}>" in answer.remark
    else:
        assert answer.remark == expected_remark
    if expected_code == ResponseCode.QUERY_NOT_FOUND:
        # Nothing found: both index fields still present, "0" as the broker leaves them.
        assert answer.ext_fields == {"indexLastUpdatePhyoffset": "0", "indexLastUpdateTimestamp": "0"}


def test_an_empty_rocketmq_value_decodes_as_a_null_field() -> None:
    request = RawClient.request(RequestCode.QUERY_MESSAGE, _query(key=""), serialize_type=ROCKETMQ)
    decoded = decode_frame(encode_frame(request))
    assert "key" not in (decoded.ext_fields or {})
    assert QueryMessageRequestHeader.from_ext_fields(decoded.ext_fields).key is None
    json_decoded = decode_frame(encode_frame(RawClient.request(RequestCode.QUERY_MESSAGE, _query(key=""))))
    assert QueryMessageRequestHeader.from_ext_fields(json_decoded.ext_fields).key == ""


async def test_a_null_key_is_queried_as_the_text_null(tmp_path: Path) -> None:
    """The broker builds its index key as ``topic + "#" + key``: a null key looks up ``Nulls#null``.

    So over ROCKETMQ, ``key=""`` (null) finds a message whose key is the word ``null``, and over JSON
    (``""``, looking up ``Nulls#``) it finds nothing, as does a missing topic (``null#null``).
    """
    root = tmp_path / "store"
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=64, max_index_num=256
    )
    with StoreWriter(config) as writer:
        writer.append("Nulls", b"keyed null", keys="null")
        writer.append("Nulls", b"keyed other", keys="other")
        writer.index()
    store = MessageStore.open(config)
    server = QueryServer(store, ServerSettings(host="127.0.0.1", port=0))
    await server.start()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        fields = {
            "topic": "Nulls",
            "key": "",
            "maxNum": "64",
            "beginTimestamp": "0",
            "endTimestamp": JAVA_LONG_MAX,
        }
        over_rocketmq = await client.call(
            RawClient.request(RequestCode.QUERY_MESSAGE, fields, serialize_type=ROCKETMQ)
        )
        assert over_rocketmq.code == ResponseCode.SUCCESS
        assert over_rocketmq.body is not None and b"keyed null" in bytes(over_rocketmq.body)
        assert b"keyed other" not in bytes(over_rocketmq.body)
        over_json = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields))
        assert over_json.code == ResponseCode.QUERY_NOT_FOUND
        no_key = {name: value for name, value in fields.items() if name != "key"}
        absent = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, no_key))
        assert absent.code == ResponseCode.SUCCESS and b"keyed null" in bytes(absent.body or b"")
    finally:
        await client.close()
        await server.stop()
        store.close()
        shutil.rmtree(root, ignore_errors=True)
