"""Each processor's answers over a real socket: header errors, name-server role, client management.

A missing or malformed header field must cost one SYSTEM_ERROR naming the field (never the
connection); unknown codes get the broker's REQUEST_CODE_NOT_SUPPORTED remark; the name-server role
answers routes only for topics in the store, pointing at the advertised address; and the client
bookkeeping codes answer as the 4.9.7 broker does.
"""

from __future__ import annotations

import struct
from pathlib import Path

import msgspec
import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.custom_headers import QueryMessageResponseHeader
from protocol.frame import decode_frame, encode_frame
from server.app import QueryServer
from server.remoting.processors.client_manage import EMPTY_GROUP_LIST
from server.remoting.processors.name_server import topic_not_exist_remark
from server.remoting.processors.query_message import QueryMessageProcessor, cap_records, response_fields
from tests.support.harness import Connect, RawClient, StartServer

QUERY_FIELDS = {
    "topic": "TopicA",
    "key": "k-3",
    "maxNum": "64",
    "beginTimestamp": "0",
    "endTimestamp": "9223372036854775807",
}

#: Missing numbers only: a missing string field (topic, key, clientID) is null, as 4.9.7 decodes
#: it, and answered as the broker then answers (tests/server/remoting/test_null_header_fields.py).
BAD_HEADERS = [
    (RequestCode.QUERY_MESSAGE, {k: v for k, v in QUERY_FIELDS.items() if k != "maxNum"}, "maxNum"),
    (RequestCode.QUERY_MESSAGE, {**QUERY_FIELDS, "maxNum": "many"}, "maxNum"),
    (RequestCode.QUERY_MESSAGE, {**QUERY_FIELDS, "beginTimestamp": "1e3"}, "beginTimestamp"),
    (RequestCode.QUERY_MESSAGE, {**QUERY_FIELDS, "endTimestamp": "9223372036854775808"}, "endTimestamp"),
    (RequestCode.QUERY_MESSAGE, None, "maxNum"),
    (RequestCode.VIEW_MESSAGE_BY_ID, {}, "offset"),
    (RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0x10"}, "offset"),
]


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize(("code", "fields", "field"), BAD_HEADERS)
async def test_a_bad_header_field_is_a_system_error_naming_it(
    code: int, fields: dict[str, str] | None, field: str, serialize_type: SerializeType, connect: Connect
) -> None:
    client = await connect()
    answer = await client.call(RawClient.request(code, fields, serialize_type=serialize_type))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert f"<{field}>" in (answer.remark or "")
    # an answer built from an exception is JSON whatever the request used, as the broker's
    # (``createResponseCommand`` never copies the request's serialization; golden: the ROCKETMQ run
    # of consume_side_broker_4.9.7.json)
    assert answer.serialize_type == SerializeType.JSON
    # ... and the connection still serves.
    assert (await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))).code == 0


async def test_a_store_error_is_a_system_error(connect: Connect) -> None:
    client = await connect()
    answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, {**QUERY_FIELDS, "maxNum": "-1"}))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == "java.lang.IllegalArgumentException: Illegal Capacity: -1"


@pytest.mark.parametrize("offset", [-1, -(2**63), 2**63 - 1, 4330405, 4330404, 262143])
async def test_a_bad_offset_gets_the_brokers_remark(offset: int, connect: Connect) -> None:
    """Garbage offsets (e.g. a unique key decoded as an offset id) are answered, never a crash."""
    client = await connect()
    answer = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
    assert (answer.code, answer.remark, answer.body) == (
        ResponseCode.SYSTEM_ERROR,
        f"can not find message by the offset, {offset}",
        None,
    )


async def test_an_offset_inside_a_record_returns_what_its_size_word_says(
    java_store_dir: Path, connect: Connect
) -> None:
    """Like the broker, VIEW reads the 4-byte size at the offset and returns that many bytes."""
    offset = 17458  # one byte into the record at 17457
    with open(java_store_dir / "commitlog" / "00000000000000000000", "rb") as f:
        f.seek(offset)
        size = int.from_bytes(f.read(4), "big")
        f.seek(offset)
        expected = f.read(size)
    client = await connect()
    answer = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
    assert answer.code == ResponseCode.SUCCESS
    assert bytes(answer.body or b"") == expected


async def test_a_view_too_large_for_a_frame_is_no_message(start_server: StartServer) -> None:
    """A size word read inside a record may claim up to the rest of the CommitLog file: whatever does
    not fit a frame is answered as no message (never copied, never sent for the client to refuse)."""
    server = await start_server(max_frame_length=4096 + 1000)
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        small = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
        assert (small.code, len(small.body or b"")) == (ResponseCode.SUCCESS, 503)
        big = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "3670016"}))
        assert (big.code, big.remark, big.body) == (
            ResponseCode.SYSTEM_ERROR,
            "can not find message by the offset, 3670016",
            None,
        )
        again = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
        assert again.code == ResponseCode.SUCCESS
    finally:
        await client.close()


@pytest.mark.parametrize("code", [10, 13, 103, 0, 32767, -5])
async def test_unknown_codes_are_not_supported_with_the_brokers_remark(code: int, connect: Connect) -> None:
    client = await connect()
    answer = await client.call(RawClient.request(code, {"topic": "TopicA"}))
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answer.remark == f" request type {code} not supported"


async def test_routes_point_at_the_advertised_address(start_server: StartServer) -> None:
    server = await start_server(advertise="mq.example:19876")
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        for topic in ("TopicA", "TopicB", "topic_c-1"):
            answer = await client.call(
                RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            )
            assert (answer.code, answer.remark, answer.ext_fields) == (ResponseCode.SUCCESS, None, None)
            body = bytes(answer.body or b"")
            assert b" " not in body and b"\n" not in body  # compact: the Go client needs it
            assert msgspec.json.decode(body) == {
                "brokerDatas": [
                    {
                        "brokerAddrs": {"0": "mq.example:19876"},
                        "brokerName": "broker-a",
                        "cluster": "DefaultCluster",
                        "enableActingMaster": False,
                    }
                ],
                "filterServerTable": {},
                "queueDatas": [
                    {
                        "brokerName": "broker-a",
                        "perm": 6,
                        "readQueueNums": 4,
                        "topicSysFlag": 0,
                        "writeQueueNums": 4,
                    }
                ],
            }
        missing = await client.call(
            RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        )
        assert (missing.code, missing.remark, missing.body) == (
            ResponseCode.TOPIC_NOT_EXIST,
            topic_not_exist_remark("TBW102"),
            None,
        )
    finally:
        await client.close()


async def test_cluster_info_names_this_broker(server: QueryServer, connect: Connect) -> None:
    client = await connect()
    answer = await client.call(RawClient.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert answer.code == ResponseCode.SUCCESS
    assert msgspec.json.decode(bytes(answer.body or b"")) == {
        "brokerAddrTable": {
            "broker-a": {
                "brokerAddrs": {"0": f"127.0.0.1:{server.port}"},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
                "enableActingMaster": False,
            }
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-a"]},
    }


async def test_client_management_answers(connect: Connect) -> None:
    client = await connect()
    heartbeat = await client.call(
        RawClient.request(
            RequestCode.HEART_BEAT, body=b'{"clientID":"c","consumerDataSet":[],"producerDataSet":[]}'
        )
    )
    assert (heartbeat.code, heartbeat.ext_fields, heartbeat.body) == (ResponseCode.SUCCESS, None, None)
    for body in (None, b"not json", b"[1,2]"):
        bad = await client.call(RawClient.request(RequestCode.HEART_BEAT, body=body))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "HeartbeatData" in (bad.remark or "")
    unregister = await client.call(
        RawClient.request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "g"})
    )
    assert (unregister.code, unregister.ext_fields) == (ResponseCode.SUCCESS, {})
    who = await client.call(RawClient.request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "TopicA"}))
    assert (who.code, bytes(who.body or b"")) == (ResponseCode.SUCCESS, EMPTY_GROUP_LIST)


def test_records_are_capped_whole_below_the_limit() -> None:
    records = [memoryview(struct.pack(">i", n) + bytes(n - 4)) for n in (100, 200, 300)]
    assert cap_records(records, 10_000) == records
    assert cap_records(records, 300) == records[:2]
    assert cap_records(records, 299) == records[:1]
    assert cap_records(records, 99) == []


async def test_query_bodies_stay_below_the_frame_limit(start_server: StartServer) -> None:
    """A query whose records would overflow the frame limit is answered with the records that fit."""
    full = await start_server()
    small = await start_server(max_frame_length=4096 + 3000)
    fields = {**QUERY_FIELDS, "topic": "TopicB", "key": "common"}
    answers = []
    for srv in (full, small):
        client = await RawClient.connect("127.0.0.1", srv.port)
        try:
            answers.append(await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields)))
        finally:
            await client.close()
    whole, capped = (bytes(a.body or b"") for a in answers)
    assert len(whole) > 3000
    assert 0 < len(capped) <= 3000
    assert whole.startswith(capped)
    size, pos = 0, 0
    while pos < len(capped):
        (size,) = struct.unpack_from(">i", capped, pos)
        pos += size
    assert pos == len(capped)


@pytest.mark.parametrize(("timestamp", "phyoffset"), [(0, 0), (1795216843063, 4330121), (-1, 2**63 - 1)])
def test_response_fields_equal_the_protocol_header(timestamp: int, phyoffset: int) -> None:
    """The precomputed QUERY_MESSAGE response header is the protocol's, key order included."""
    expected = QueryMessageResponseHeader(
        index_last_update_timestamp=timestamp, index_last_update_phyoffset=phyoffset
    ).to_ext_fields()
    assert list(response_fields(timestamp, phyoffset).items()) == list(expected.items())


class _OneRecordStore:
    """A store holding one record at one offset: the record of the Java broker's captured VIEW answer."""

    def __init__(self, offset: int, record: bytes) -> None:
        self.offset = offset
        self.record = record

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        return self.record if offset == self.offset and len(self.record) <= max_size else None

    def query_message(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("not a key query")

    def topics(self) -> set[str]:
        return set()


@pytest.mark.parametrize("serialization", ["json", "rocketmq"])
def test_view_answers_are_the_java_brokers_bytes(
    vectors_dir: Path, vectors_by_name: dict[str, dict], serialization: str
) -> None:
    """The success answer is built without ``make_response`` (one call fewer per VIEW): it must be
    the same command, and encode to the bytes the 4.9.7 broker sent, found or not."""
    request = decode_frame((vectors_dir / f"view_message_by_id.{serialization}.encode.bin").read_bytes())
    assert request.ext_fields is not None
    found = vectors_by_name[f"resp_view_message_success.{serialization}"]
    record = bytes.fromhex(found["bodyHex"])
    processor = QueryMessageProcessor(_OneRecordStore(int(request.ext_fields["offset"]), record))  # type: ignore[arg-type]
    answer = processor.view_message_by_id(request)
    assert encode_frame(answer) == (vectors_dir / found["file"]).read_bytes()
    for opaque in (0, 1, -1, 2**31 - 1, -(2**31)):
        request.opaque = opaque
        answer = processor.view_message_by_id(request)
        assert answer == request.make_response(ResponseCode.SUCCESS, body=record)
        assert encode_frame(answer) == encode_frame(request.make_response(ResponseCode.SUCCESS, body=record))
    request.opaque = found["opaque"]
    request.ext_fields = {"offset": "99999999"}
    missing = processor.view_message_by_id(request)
    expected = (vectors_dir / f"resp_view_message_not_found.{serialization}.encode.bin").read_bytes()
    assert encode_frame(missing) == expected
