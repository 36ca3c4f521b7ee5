"""The admin requests under ``serve --writable``, over the wire with a raw client: the codes, remarks
and bodies 4.9.7's ``AdminBrokerProcessor`` and ``Broker2Client`` give (expected values written
from the Java sources), what they change in the broker's files, and the calls relayed to a client.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from protocol.admin_bodies import QueueKey, decode_consume_stats, decode_reset_offset_body
from protocol.codes import RPC_TYPE_RESPONSE, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message_id import create_offset_msg_id
from server.remoting.processors.client_relay import ClientRelayProcessor
from store.write.writer import StoreRecord
from tests.support.harness import RawClient
from tests.support.topics_json import durable_topics

pytestmark = pytest.mark.asyncio


def _create_fields(
    topic: str, nums: int = 8, perm: int = 6, filter_type: str = "SINGLE_TAG"
) -> dict[str, str]:
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(nums),
        "writeQueueNums": str(nums),
        "perm": str(perm),
        "topicFilterType": filter_type,
        "topicSysFlag": "0",
        "order": "false",
    }


def _heartbeat(client_id: str, group: str, topic: str) -> bytes:
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1}
                    ],
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": "PG"}],
        }
    ).encode()


async def _next_request(client: RawClient, code: int) -> RemotingCommand:
    """The next request the server sends this client with ``code`` (others, e.g. notifications, skipped)."""
    while True:
        command = await client.receive()
        if not command.flag & RPC_TYPE_RESPONSE and command.code == code:
            return command


async def _ask(client: RawClient, request: RemotingCommand) -> RemotingCommand:
    """Send ``request`` and wait for its answer (requests the server sends meanwhile are skipped)."""
    await client.send(request)
    return await _answer_for(client, request.opaque)


async def _answer_for(client: RawClient, opaque: int) -> RemotingCommand:
    while True:
        command = await client.receive()
        if command.flag & RPC_TYPE_RESPONSE and command.opaque == opaque:
            return command


async def test_update_topic_saves_it_and_routes_follow_at_once(writable_server) -> None:
    srv, store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        answer = await _ask(
            client, RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, _create_fields("Adm", 8))
        )
        # The broker sets only the code of its default answer: the default remark stays.
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "not set any response code")
        assert durable_topics(store.config.store_path_root_dir)["Adm"] == {
            "order": False,
            "perm": 6,
            "readQueueNums": 8,
            "topicFilterType": "SINGLE_TAG",
            "topicName": "Adm",
            "topicSysFlag": 0,
            "writeQueueNums": 8,
        }
        route = await _ask(client, RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Adm"}))
        assert b'"readQueueNums":8' in route.body and b'"writeQueueNums":8' in route.body
        # An update (perm read-only, 2 queues) is routed at once too.
        await _ask(
            client, RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, _create_fields("Adm", 2, perm=4))
        )
        route = await _ask(client, RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Adm"}))
        assert b'"perm":4' in route.body and b'"writeQueueNums":2' in route.body
        all_topics = await _ask(client, RawClient.request(RequestCode.GET_ALL_TOPIC_CONFIG))
        assert all_topics.code == ResponseCode.SUCCESS and all_topics.ext_fields == {}
        wrapper = json.loads(all_topics.body)
        assert list(wrapper) == ["dataVersion", "topicConfigTable"]
        assert (
            wrapper["topicConfigTable"]["Adm"]["readQueueNums"] == 2
            and "TBW102" in wrapper["topicConfigTable"]
        )
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("fields", "remark"),
    [
        ({"topic": ""}, "The specified topic is blank."),
        ({}, "The specified topic is blank."),
        (
            {"topic": "a b"},
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        ({"topic": "x" * 128}, "The specified topic is longer than topic max length."),
        ({"topic": "TBW102"}, "The topic[TBW102] is conflict with system topic."),
        ({"topic": "RMQ_SYS_TRACE_TOPIC"}, "The topic[RMQ_SYS_TRACE_TOPIC] is conflict with system topic."),
        ({"topic": "rmq_sys_mine"}, "The topic[rmq_sys_mine] is conflict with system topic."),
        ({"topic": "DefaultCluster"}, "The topic[DefaultCluster] is conflict with system topic."),
        ({"topic": "b1"}, "The topic[b1] is conflict with system topic."),
    ],
)
async def test_topic_names_the_broker_refuses(writable_server, fields: dict[str, str], remark: str) -> None:
    srv, store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        create = {**_create_fields("placeholder"), **fields}
        if "topic" not in fields:
            del create["topic"]
        before = dict(store.topics.topics)
        answer = await _ask(client, RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create))
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        deleted = await _ask(client, RawClient.request(RequestCode.DELETE_TOPIC_IN_BROKER, fields))
        assert (deleted.code, deleted.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert store.topics.topics == before
    finally:
        await client.close()


async def test_bad_numbers_and_filter_types_are_refused_without_a_change(writable_server) -> None:
    srv, store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        bad_nums = {**_create_fields("N"), "readQueueNums": "eight"}
        answer = await _ask(client, RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, bad_nums))
        assert answer.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in answer.remark
        answer = await _ask(
            client,
            RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, _create_fields("N", filter_type="SQL")),
        )
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "topicFilterType = [SQL] value invalid" in answer.remark
        assert store.topic_config("N") is None
    finally:
        await client.close()


async def test_delete_topic_removes_config_and_route_but_not_offsets(writable_server) -> None:
    srv, store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await _ask(client, RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, _create_fields("Gone", 2)))
        commit = {"consumerGroup": "G", "topic": "Gone", "queueId": "0", "commitOffset": "3"}
        await _ask(client, RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit))
        answer = await _ask(client, RawClient.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"}))
        assert answer.code == ResponseCode.SUCCESS
        assert store.topic_config("Gone") is None
        assert "Gone" not in durable_topics(store.config.store_path_root_dir)
        route = await _ask(client, RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Gone"}))
        assert route.code == ResponseCode.TOPIC_NOT_EXIST
        namesrv = await _ask(
            client, RawClient.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Gone"})
        )
        assert namesrv.code == ResponseCode.SUCCESS
        # The 4.9.7 broker keeps a deleted topic's committed offsets (only deleteSubGroup -r drops them).
        assert (
            store is srv._configure.broker.store and srv._configure.broker.query_offset("G", "Gone", 0) == 3
        )
        # Deleting what does not exist is SUCCESS, as the broker only logs it.
        again = await _ask(client, RawClient.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"}))
        assert again.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def test_subscription_groups_created_listed_and_deleted(writable_server) -> None:
    srv, store = writable_server
    broker = srv._configure.broker
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        body = b'{"groupName":"SG","retryMaxTimes":3,"consumeBroadcastEnable":false}'
        answer = await _ask(
            client, RawClient.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        )
        assert answer.code == ResponseCode.SUCCESS
        saved = json.loads(
            (store.config.store_path_root_dir / "config" / "subscriptionGroup.json").read_text()
        )
        entry = saved["subscriptionGroupTable"]["SG"]
        assert entry["retryMaxTimes"] == 3 and entry["consumeBroadcastEnable"] is False
        assert entry["retryQueueNums"] == 1  # missing fields keep the broker's defaults
        listed = await _ask(client, RawClient.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        table = json.loads(listed.body)
        assert list(table) == ["dataVersion", "subscriptionGroupTable"]
        assert table["subscriptionGroupTable"]["SG"]["retryMaxTimes"] == 3
        assert "TOOLS_CONSUMER" in table["subscriptionGroupTable"]
        for bad in (None, b"not json", b"[1]", b'{"retryMaxTimes":3}'):
            refused = await _ask(
                client, RawClient.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad)
            )
            assert refused.code == ResponseCode.SYSTEM_ERROR
        broker.commit_offset("SG", "T", 0, 7)
        kept = await _ask(
            client, RawClient.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "SG"})
        )
        assert kept.code == ResponseCode.SUCCESS and broker.groups.get("SG") is None
        assert broker.query_offset("SG", "T", 0) == 7
        await _ask(client, RawClient.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body))
        fields = {"groupName": "SG", "removeOffset": "true"}
        removed = await _ask(client, RawClient.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields))
        assert removed.code == ResponseCode.SUCCESS and broker.query_offset("SG", "T", 0) == -1
        missing = await _ask(client, RawClient.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {}))
        assert missing.code == ResponseCode.SYSTEM_ERROR
    finally:
        await client.close()


async def test_groups_not_online_get_the_brokers_answers(writable_server) -> None:
    srv, _store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        consumers = await _ask(
            client, RawClient.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
        )
        assert (consumers.code, consumers.remark) == (
            ResponseCode.CONSUMER_NOT_ONLINE,
            "the consumer group[G] not online",
        )
        producers = await _ask(
            client, RawClient.request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "P"})
        )
        assert (producers.code, producers.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "the producer group[P] not exist",
        )
        stats = await _ask(client, RawClient.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"}))
        assert stats.code == ResponseCode.SUCCESS and stats.body == b'{"consumeTps":0.0,"offsetTable":{}}'
        fields = {"consumerGroup": "G", "clientId": "c1"}
        running = await _ask(client, RawClient.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields))
        assert (running.code, running.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The Consumer <G> <c1> not online",
        )
    finally:
        await client.close()


async def test_consume_stats_and_connections_of_an_online_group(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("S", 2)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        appended = store.put([StoreRecord(topic="S", queue_id=0, body=b"x") for _ in range(3)])
        heartbeat = await _ask(
            client, RawClient.request(RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "S"))
        )
        assert heartbeat.code == ResponseCode.SUCCESS
        commit = {"consumerGroup": "G", "topic": "S", "queueId": "0", "commitOffset": "2"}
        await _ask(client, RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit))
        stats = await _ask(client, RawClient.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"}))
        rows = decode_consume_stats(stats.body)
        q0, q1 = QueueKey("S", "b1", 0), QueueKey("S", "b1", 1)
        assert set(rows) == {q0, q1}
        assert (rows[q0].broker_offset, rows[q0].consumer_offset) == (3, 2)
        assert rows[q0].last_timestamp == appended[1].store_timestamp  # the last message consumed
        assert (rows[q1].broker_offset, rows[q1].consumer_offset, rows[q1].last_timestamp) == (0, 0, 0)
        connection = await _ask(
            client, RawClient.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
        )
        body = json.loads(connection.body)
        assert body["consumeType"] == "CONSUME_PASSIVELY" and body["messageModel"] == "CLUSTERING"
        assert body["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
        ((member,),) = [body["connectionSet"]]
        assert member["clientId"] == "c1" and member["language"] == "JAVA" and member["version"] == 407
        assert member["clientAddr"].startswith("127.0.0.1:")
        assert body["subscriptionTable"]["S"]["subString"] == "*"
        producers = await _ask(
            client, RawClient.request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
        )
        assert [c["clientId"] for c in json.loads(producers.body)["connectionSet"]] == ["c1"]
    finally:
        await client.close()


async def test_reset_offset_refusals_in_the_brokers_order(writable_server) -> None:
    srv, store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        fields = {"topic": "R", "group": "G", "timestamp": "0", "isForce": "true"}
        no_topic = await _ask(client, RawClient.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
        assert (no_topic.code, no_topic.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "[reset-offset] reset offset failed, no topic in this broker. topic=R",
        )
        store.create_topic("R", 2)
        no_group = await _ask(client, RawClient.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
        assert (no_group.code, no_group.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "THe consumer group <G> not exist",
        )
        for queue in ("0", "1"):
            commit = {"consumerGroup": "G", "topic": "R", "queueId": queue, "commitOffset": "0"}
            await _ask(client, RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit))
        offline = await _ask(client, RawClient.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
        assert (offline.code, offline.remark) == (
            ResponseCode.CONSUMER_NOT_ONLINE,
            "Consumer not online, so can not reset offset, Group: G Topic: R Timestamp: 0",
        )
    finally:
        await client.close()


async def test_reset_offset_is_sent_to_each_online_consumer(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("R", 2)
    store.put([StoreRecord(topic="R", queue_id=0, body=b"x") for _ in range(4)])
    consumer = await RawClient.connect("127.0.0.1", srv.port)
    admin = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await _ask(consumer, RawClient.request(RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "R")))
        for queue, offset in (("0", "1"), ("1", "0")):
            commit = {"consumerGroup": "G", "topic": "R", "queueId": queue, "commitOffset": offset}
            await _ask(admin, RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit))
        # Not forced, timestamp -1 (each queue's end): a target past the committed offset keeps it.
        fields = {"topic": "R", "group": "G", "timestamp": "-1", "isForce": "false"}
        answer = await _ask(admin, RawClient.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "not set any response code")
        assert decode_reset_offset_body(answer.body) == {QueueKey("R", "b1", 0): 1, QueueKey("R", "b1", 1): 0}
        # Forced: the ends.
        forced = {**fields, "isForce": "true"}
        answer = await _ask(admin, RawClient.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, forced))
        assert decode_reset_offset_body(answer.body) == {QueueKey("R", "b1", 0): 4, QueueKey("R", "b1", 1): 0}
        first = await _next_request(consumer, RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        assert first.ext_fields == {"topic": "R", "isForce": "false", "group": "G", "timestamp": "-1"}
        assert decode_reset_offset_body(first.body)[QueueKey("R", "b1", 0)] == 1
        second = await _next_request(consumer, RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        assert decode_reset_offset_body(second.body)[QueueKey("R", "b1", 0)] == 4
        # The broker only tells the clients: the committed offsets are theirs to move.
        assert srv._configure.broker.query_offset("G", "R", 0) == 1
    finally:
        await consumer.close()
        await admin.close()


async def test_calls_to_a_client_are_relayed_and_answered_back(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("D", 1)
    (stored,) = store.put([StoreRecord(topic="D", queue_id=0, body=b"direct")])
    consumer = await RawClient.connect("127.0.0.1", srv.port)
    admin = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await _ask(consumer, RawClient.request(RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "D")))
        running = RawClient.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G", "clientId": "c1"}
        )
        await admin.send(running)
        relayed = await _next_request(consumer, RequestCode.GET_CONSUMER_RUNNING_INFO)
        assert list(relayed.ext_fields.items()) == [("clientId", "c1"), ("consumerGroup", "G")]
        reply = RemotingCommand(
            code=ResponseCode.SUCCESS, language=relayed.language, version=407, opaque=relayed.opaque,
            flag=RPC_TYPE_RESPONSE, remark=None, ext_fields=None, body=b'{"properties":{}}',
        )  # fmt: skip
        await consumer.send(reply)
        answer = await _answer_for(admin, running.opaque)
        assert (answer.code, answer.body) == (ResponseCode.SUCCESS, b'{"properties":{}}')

        msg_id = create_offset_msg_id("127.0.0.1", srv.port, stored.offset)
        fields = {"consumerGroup": "G", "clientId": "c1", "msgId": msg_id}
        direct = RawClient.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
        await admin.send(direct)
        relayed = await _next_request(consumer, RequestCode.CONSUME_MESSAGE_DIRECTLY)
        assert relayed.ext_fields == {**fields, "brokerName": "b1"}
        # In the order of the broker's HashMap, not the caller's (golden: consume-side recording).
        assert list(relayed.ext_fields) == ["clientId", "msgId", "brokerName", "consumerGroup"]
        assert b"direct" in bytes(relayed.body) and len(relayed.body) == stored.size
        await consumer.send(
            RemotingCommand(
                code=ResponseCode.SYSTEM_ERROR,
                language=relayed.language,
                version=407,
                opaque=relayed.opaque,
                flag=RPC_TYPE_RESPONSE,
                remark="listener threw",
                ext_fields=None,
                body=None,
            )
        )
        answer = await _answer_for(admin, direct.opaque)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "listener threw")

        bad = await _ask(
            admin, RawClient.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {**fields, "msgId": "zz"})
        )
        assert bad.code == ResponseCode.SYSTEM_ERROR
    finally:
        await consumer.close()
        await admin.close()


async def test_a_client_that_never_answers_is_a_timeout_not_a_hang(writable_server) -> None:
    srv, _store = writable_server
    relay = ClientRelayProcessor(srv._configure.broker, call_timeout=0.3)
    srv.dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, relay.get_consumer_running_info)
    consumer = await RawClient.connect("127.0.0.1", srv.port)
    admin = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await _ask(consumer, RawClient.request(RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "T")))
        fields = {"consumerGroup": "G", "clientId": "c1"}
        answer = await asyncio.wait_for(
            admin.call(RawClient.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields)), 3
        )
        assert answer.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert answer.remark.startswith("consumer <G> <c1> Timeout")
        # A client whose connection closes while asked: SYSTEM_ERROR at once.
        request = RawClient.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
        await admin.send(request)
        await _next_request(consumer, RequestCode.GET_CONSUMER_RUNNING_INFO)
        await consumer.close()
        answer = await asyncio.wait_for(_answer_for(admin, request.opaque), 3)
        assert answer.code == ResponseCode.SYSTEM_ERROR
    finally:
        await admin.close()
