"""QueryAdmin against a peer answering with the real name server's and broker's frames."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from clients.admin import LONG_MAX, QueryAdmin, java_split_space
from clients.errors import ConnectError, InvalidMessageIdError, MQBrokerError, MQClientError
from clients.namesrv import split_namesrv
from protocol.command import RemotingCommand
from protocol.frame import decode_frame
from protocol.message import decode_messages, encode_message
from protocol.message_id import create_offset_msg_id


def _stdout_ids(vectors_dir: Path, scenario: str) -> list[str]:
    lines = (vectors_dir / "wire" / scenario / "client-stdout.jsonl").read_text(encoding="utf-8").splitlines()
    return [line.split()[0] for line in lines[1:]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_query_by_key_sends_what_java_sends_and_keeps_its_order(
    scenario_peer, vectors_dir: Path
) -> None:
    peer = await scenario_peer("mqadmin_queryMsgByKey")
    async with QueryAdmin(peer.addr) as admin:
        result = await admin.query_by_key("TopicA", "k-3")
    assert [m.msg_id for m in result.messages] == _stdout_ids(vectors_dir, "mqadmin_queryMsgByKey")
    assert result.index_last_update_timestamp == 1795216843063
    route, query = peer.requests
    assert (route.code, route.ext_fields) == (105, {"topic": "TopicA"})
    assert query.code == 12
    assert query.ext_fields == {
        "topic": "TopicA",
        "key": "k-3",
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": str(LONG_MAX),
        "_UNIQUE_KEY_QUERY": "false",
    }


async def test_key_filter_keeps_only_exact_keys_of_the_topic(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("mqadmin_queryMsgByKey")
    async with QueryAdmin(peer.addr) as admin:
        result = await admin.query_by_key("TopicA", "k-2")  # the broker answers with the k-3 records
        assert result.messages
        assert all("k-2" in java_split_space(m.properties["KEYS"]) for m in result.messages)
        assert len(result.messages) < len(_stdout_ids(vectors_dir, "mqadmin_queryMsgByKey"))
        with pytest.raises(MQClientError) as info:
            await admin.query_by_key("TopicB", "k-3")  # right key, other topic: Java drops them all
    assert info.value.code == 208
    assert str(info.value) == "CODE: 208  DESC: query message by key finished, but no message."


async def test_query_not_found_is_no_message(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("v4_queryMsgByKey_notfound")
    async with QueryAdmin(peer.addr) as admin:
        with pytest.raises(MQClientError) as info:
            await admin.query_by_key("TopicA", "does-not-exist")
    assert info.value.code == 208


async def test_unknown_topic_is_topic_not_exist(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("v4_unknownTopic")
    async with QueryAdmin(peer.addr) as admin:
        with pytest.raises(MQClientError) as info:
            await admin.query_by_key("NoSuchTopic", "k-1")
    assert info.value.code == 17
    assert info.value.error_message == "The topic[NoSuchTopic] not matched route info"


async def test_success_without_index_header_fields_is_dropped_like_java(
    scenario_peer, vectors_dir: Path
) -> None:
    def wrap(real):
        def strip_header(request: RemotingCommand) -> RemotingCommand | bytes | None:
            answer = real(request)
            if request.code == 12 and isinstance(answer, RemotingCommand):
                answer.ext_fields = {"indexLastUpdateTimestamp": "1"}
            return answer

        return strip_header

    peer = await scenario_peer("mqadmin_queryMsgByKey", wrap)
    async with QueryAdmin(peer.addr) as admin:
        with pytest.raises(MQClientError) as info:
            await admin.query_by_key("TopicA", "k-3")
    assert info.value.code == 208


async def test_broker_error_without_any_answer_is_the_broker_error(scenario_peer, vectors_dir: Path) -> None:
    def wrap(real):
        def fail_query(request: RemotingCommand) -> RemotingCommand | bytes | None:
            if request.code == 12:
                return request.make_response(1, remark="store is closed")
            return real(request)

        return fail_query

    peer = await scenario_peer("mqadmin_queryMsgByKey", wrap)
    async with QueryAdmin(peer.addr) as admin:
        with pytest.raises(MQBrokerError) as info:
            await admin.query_by_key("TopicA", "k-3")
    assert (info.value.code, info.value.remark, info.value.addr) == (1, "store is closed", peer.addr)


async def test_unreachable_broker_is_a_transport_error_not_no_message(
    scenario_peer, vectors_dir: Path
) -> None:
    peer = await scenario_peer("mqadmin_queryMsgByKey", route_to=f"127.0.0.1:{_free_port()}")
    async with QueryAdmin(peer.addr) as admin:
        with pytest.raises(ConnectError):
            await admin.query_by_key("TopicA", "k-3")


async def test_name_servers_are_tried_in_turn(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("mqadmin_queryMsgByKey")
    dead = f"127.0.0.1:{_free_port()}"
    async with QueryAdmin(f"{dead};{peer.addr}") as admin:
        route = await admin.get_route("TopicA")
        assert route.broker_addrs() == [peer.addr]
        assert await admin.get_route("TopicA") is route  # cached
    async with QueryAdmin(dead) as admin:
        with pytest.raises(ConnectError):
            await admin.get_route("TopicA")


async def test_query_by_unique_key(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("mqadmin_queryMsgByUniqueKey")
    uniq = "0A0100091F906D06D69C0000001A0002"
    async with QueryAdmin(peer.addr) as admin:
        messages = await admin.query_by_unique_key("topic_c-1", uniq)
        with pytest.raises(MQClientError) as info:
            await admin.query_by_unique_key("topic_c-1", "0A0100091F906D06D69C0000001A0003")
    assert [m.msg_id for m in messages] == [uniq]
    assert messages[0].commit_log_offset == 16772
    query = next(r for r in peer.requests if r.code == 12)
    assert query.ext_fields is not None
    assert (query.ext_fields["_UNIQUE_KEY_QUERY"], query.ext_fields["maxNum"]) == ("true", "32")
    assert info.value.code == 208 and "unique key" in info.value.error_message


async def test_view_message_goes_to_the_address_inside_the_id(scenario_peer, vectors_dir: Path) -> None:
    broker = await scenario_peer("mqadmin_queryMsgById")
    host, port = broker.addr.split(":")
    msg_id = create_offset_msg_id(host, int(port), 17457)
    async with QueryAdmin(None) as admin:
        msg = await admin.view_message(msg_id)
    assert msg.offset_msg_id == "7F00000100002A9F0000000000004431"  # the store host written in the record
    assert msg.unique_key == "0A0100091F906D06D69C000000270003"
    assert broker.requests[0].code == 33 and broker.requests[0].ext_fields == {"offset": "17457"}


async def test_view_of_an_empty_offset_is_the_broker_error(scenario_peer, vectors_dir: Path) -> None:
    broker = await scenario_peer("v4_viewMessage_badoffset")
    host, port = broker.addr.split(":")
    async with QueryAdmin(None) as admin:
        with pytest.raises(MQBrokerError) as info:
            await admin.view_message(create_offset_msg_id(host, int(port), 16777215), topic="TopicA")
    assert info.value.code == 1
    assert info.value.remark == "can not find message by the offset, 16777215"
    assert broker.requests[0].ext_fields == {"offset": "16777215", "topic": "TopicA"}


@pytest.mark.parametrize("bad", ["", "XYZ", "7F00000100002A9F000000000000443", "G" * 32])
async def test_malformed_ids_are_invalid_message_id(bad: str) -> None:
    async with QueryAdmin(None) as admin:
        with pytest.raises(InvalidMessageIdError):
            await admin.view_message(bad)


async def test_query_by_id_falls_back_to_the_unique_key_over_three_days(
    scenario_peer, vectors_dir: Path
) -> None:
    body = decode_frame(
        (vectors_dir / "wire/mqadmin_queryMsgByUniqueKey/005_resp_code0.bin").read_bytes()
    ).body
    record = decode_messages(bytes(body or b""))[0]
    holder: list[str] = []

    def wrap(real):
        def handler(request: RemotingCommand) -> RemotingCommand | bytes | None:
            if request.code == 33:  # the view fails: nothing at that offset
                return request.make_response(1, remark="can not find message by the offset, 1")
            answer = real(request)
            if request.code == 12 and isinstance(answer, RemotingCommand):
                record.properties["UNIQ_KEY"] = holder[0]  # a message whose unique key is the id
                answer.body = encode_message(record)
            return answer

        return handler

    peer = await scenario_peer("mqadmin_queryMsgByUniqueKey", wrap)
    host, port = peer.addr.split(":")
    msg_id = create_offset_msg_id(host, int(port), 1)  # also "a unique key": any 32 hex chars are
    holder.append(msg_id)
    async with QueryAdmin(peer.addr) as admin:
        before = int(time.time() * 1000)
        msg = await admin.query_by_id(msg_id, "topic_c-1")
        with pytest.raises(MQClientError) as info:
            await admin.query_by_id(create_offset_msg_id(host, int(port), 2), "topic_c-1", begin=0)
    assert msg.msg_id == msg_id
    codes = [r.code for r in peer.requests]
    assert codes[:3] == [33, 105, 12]
    queries = [r for r in peer.requests if r.code == 12]
    assert queries[0].ext_fields is not None and queries[1].ext_fields is not None
    assert queries[0].ext_fields["_UNIQUE_KEY_QUERY"] == "true"
    begin = int(queries[0].ext_fields["beginTimestamp"])
    assert before - 3 * 86400_000 - 1000 <= begin <= before - 3 * 86400_000 + 5000
    assert queries[1].ext_fields["beginTimestamp"] == "0"
    assert info.value.code == 208 and "by id" in info.value.error_message


async def test_query_by_id_without_topic_keeps_the_view_error() -> None:
    async with QueryAdmin("127.0.0.1:1") as admin:
        with pytest.raises(InvalidMessageIdError):
            await admin.query_by_id("not-an-id")


async def test_consumer_groups(scenario_peer, vectors_dir: Path) -> None:
    peer = await scenario_peer("mqadmin_queryMsgById")
    async with QueryAdmin(peer.addr) as admin:
        assert await admin.consumer_groups(peer.addr, "TopicA") == []
    body = decode_frame((vectors_dir / "wire/mqadmin_queryMsgById/007_resp_code0.bin").read_bytes()).body
    assert bytes(body or b"") == b'{"groupList":[]}'


def test_java_split_space_drops_trailing_empties() -> None:
    assert java_split_space("a  b ") == ["a", "", "b"]
    assert java_split_space("") == []


def test_split_namesrv() -> None:
    assert split_namesrv(" a:1; b:2 ;") == ["a:1", "b:2"]
    assert split_namesrv(["a:1"]) == ["a:1"]


def _two_broker_route(good: str, bad: str) -> bytes:
    brokers = [
        {"brokerAddrs": {"0": good}, "brokerName": "broker-a", "cluster": "c1"},
        {"brokerAddrs": {"1": bad}, "brokerName": "broker-b", "cluster": "c2"},
    ]
    return json.dumps({"brokerDatas": brokers, "queueDatas": []}).encode()


async def test_one_broker_down_of_two_keeps_the_others_results(scenario_peer, caplog) -> None:
    dead = f"127.0.0.1:{_free_port()}"

    def wrap(real):
        def handler(request: RemotingCommand) -> RemotingCommand | bytes | None:
            answer = real(request)
            if request.code == 105 and isinstance(answer, RemotingCommand):
                answer.body = _two_broker_route(peer_addr[0], dead)
            return answer

        return handler

    peer_addr: list[str] = []
    peer = await scenario_peer("mqadmin_queryMsgByKey", wrap)
    peer_addr.append(peer.addr)
    async with QueryAdmin(peer.addr) as admin:
        result = await admin.query_by_key("TopicA", "k-3")
        assert len(result.messages) == 18
        assert [addr for addr, _ in result.errors] == [dead]
        assert isinstance(result.errors[0][1], ConnectError)
    assert f"query of broker {dead} failed" in caplog.text


async def test_cluster_filter_picks_the_brokers_asked_for(scenario_peer) -> None:
    dead = f"127.0.0.1:{_free_port()}"
    peer_addr: list[str] = []

    def wrap(real):
        def handler(request: RemotingCommand) -> RemotingCommand | bytes | None:
            answer = real(request)
            if request.code == 105 and isinstance(answer, RemotingCommand):
                answer.body = _two_broker_route(peer_addr[0], dead)
            return answer

        return handler

    peer = await scenario_peer("mqadmin_queryMsgByKey", wrap)
    peer_addr.append(peer.addr)
    async with QueryAdmin(peer.addr) as admin:
        assert len((await admin.query_by_key("TopicA", "k-3", cluster="c1")).messages) == 18
        with pytest.raises(ConnectError):
            await admin.query_by_key("TopicA", "k-3", cluster="c2")  # the replica-only broker, down
        with pytest.raises(MQClientError) as info:
            await admin.query_by_key("TopicA", "k-3", cluster="c3")
    assert info.value.code == 17


async def test_a_torn_answer_keeps_the_records_before_the_tear(scenario_peer) -> None:
    def wrap(real):
        def tear(request: RemotingCommand) -> RemotingCommand | bytes | None:
            answer = real(request)
            if request.code == 12 and isinstance(answer, RemotingCommand) and answer.body:
                body = bytes(answer.body)
                first = int.from_bytes(body[:4], "big")
                answer.body = body[: first + 10]  # one whole record, then ten bytes of the next
            return answer

        return tear

    peer = await scenario_peer("mqadmin_queryMsgByKey", wrap)
    async with QueryAdmin(peer.addr) as admin:
        result = await admin.query_by_key("TopicA", "k-3")
    assert [m.msg_id for m in result.messages] == ["0A0100091F906D06D69C0000015F001B"]
