"""The consume side of ``serve --writable`` over raw requests: heartbeats register a group, pulls
take its subscription and commit its offsets, members are told of changes, and leave on close."""

from __future__ import annotations

import asyncio
import json
import time

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message import decode_message
from server.app import QueryServer
from server.broker.writable_store import WritableStore
from tests.support.harness import RawClient
from tests.support.pulls import heartbeat, pull_fields, records

ServerAndStore = tuple[QueryServer, WritableStore]


def send_fields(topic: str, queue_id: int = 0, tags: str | None = None) -> dict[str, str]:
    props = "WAIT\x01true" + (f"\x02TAGS\x01{tags}" if tags else "")
    return {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "1",
            "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}  # fmt: skip


def consumer_pull(group: str, topic: str, offset: int, *, sys_flag: int, commit: int = 0) -> dict[str, str]:
    fields = pull_fields(topic, 0, offset, 32)
    fields.update(consumerGroup=group, sysFlag=str(sys_flag), commitOffset=str(commit))
    fields.pop("subscription")
    return fields


def bodies(pull_body: object) -> list[bytes]:
    return [bytes(decode_message(record).body) for record in records(pull_body)]  # type: ignore[arg-type]


async def server_request(client: RawClient) -> RemotingCommand:
    """The next request the server sent this client (kept by ``call`` or still to come)."""
    if client.server_requests:
        return client.server_requests.pop(0)
    return await client.receive()


async def send(client: RawClient, topic: str, body: bytes, tags: str | None = None) -> None:
    answer = await client.call(
        RawClient.request(RequestCode.SEND_MESSAGE_V2, send_fields(topic, tags=tags), body)
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_a_heartbeat_registers_the_group_and_its_members_are_listed(
    writable_server: ServerAndStore,
) -> None:
    server, _ = writable_server
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        listing = RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        before = await client.call(listing)
        assert (before.code, before.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, G")
        beat = await client.call(
            RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("c1", "G", {"T": "*"}))
        )
        assert beat.code == ResponseCode.SUCCESS
        after = await client.call(
            RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        )
        assert after.code == ResponseCode.SUCCESS
        assert json.loads(bytes(after.body or b"")) == {"consumerIdList": ["c1"]}
        # The retry topic of the group is created by the heartbeat, as the broker does.
        route = await client.call(
            RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%G"})
        )
        assert route.code == ResponseCode.SUCCESS
        gone = await client.call(
            RawClient.request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "G"})
        )
        assert gone.code == ResponseCode.SUCCESS
        last = await client.call(
            RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        )
        assert last.code == ResponseCode.SYSTEM_ERROR
    finally:
        await client.close()


async def test_a_pull_without_subscription_takes_the_heartbeats_and_commits_its_offset(
    writable_server: ServerAndStore,
) -> None:
    server, _ = writable_server
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        await send(client, "T", b"a", tags="TagA")
        await send(client, "T", b"b", tags="TagB")
        await send(client, "T", b"c", tags="TagA")
        # Not registered: the broker's answer to a push consumer's pull before its heartbeat.
        unknown = await client.call(
            RawClient.request(RequestCode.PULL_MESSAGE, consumer_pull("G", "T", 0, sys_flag=0))
        )
        assert unknown.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        assert unknown.remark.startswith("the consumer's group info not exist")
        await client.call(RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("c1", "G", {"U": "*"})))
        other = await client.call(
            RawClient.request(RequestCode.PULL_MESSAGE, consumer_pull("G", "T", 0, sys_flag=0))
        )
        assert other.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        assert other.remark.startswith("the consumer's subscription not exist")
        beat = heartbeat("c1", "G", {"T": "TagA"})
        body = json.loads(beat)
        body["consumerDataSet"][0]["subscriptionDataSet"][0]["codeSet"] = [2598919]  # "TagA".hashCode()
        await client.call(RawClient.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode()))
        # sysFlag 1: commit offset, no subscription: filtered by the heartbeat's TagA.
        pulled = await client.call(
            RawClient.request(RequestCode.PULL_MESSAGE, consumer_pull("G", "T", 0, sys_flag=1, commit=0))
        )
        assert pulled.code == ResponseCode.SUCCESS
        assert bodies(pulled.body) == [b"a", b"c"]
        committed = await client.call(
            RawClient.request(RequestCode.PULL_MESSAGE, consumer_pull("G", "T", 3, sys_flag=1, commit=3))
        )
        assert committed.code == ResponseCode.PULL_NOT_FOUND
        query = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
        asked = await client.call(RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, query))
        assert (asked.code, asked.ext_fields) == (ResponseCode.SUCCESS, {"offset": "3"})
        update = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "2"}
        updated = await client.call(RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, update))
        assert updated.code == ResponseCode.SUCCESS
        asked = await client.call(RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, query))
        assert asked.ext_fields == {"offset": "2"}
    finally:
        await client.close()


async def test_members_are_told_when_one_joins_and_when_one_leaves(writable_server: ServerAndStore) -> None:
    server, _ = writable_server
    first = await RawClient.connect("127.0.0.1", server.port)
    second = await RawClient.connect("127.0.0.1", server.port)
    try:
        await first.call(RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("c1", "G", {"T": "*"})))
        notice = await server_request(first)  # its own joining is a change too
        assert (notice.code, notice.ext_fields, notice.is_oneway) == (
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            {"consumerGroup": "G"},
            True,
        )
        await second.send(RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("c2", "G", {"T": "*"})))
        assert (await server_request(first)).code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        await second.close()
        assert (await server_request(first)).code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        listing = await first.call(
            RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        )
        assert json.loads(bytes(listing.body or b"")) == {"consumerIdList": ["c1"]}
    finally:
        await first.close()


async def test_a_held_pull_answers_as_soon_as_a_send_reaches_its_queue(
    writable_server: ServerAndStore,
) -> None:
    server, _ = writable_server
    consumer = await RawClient.connect("127.0.0.1", server.port)
    producer = await RawClient.connect("127.0.0.1", server.port)
    try:
        await send(producer, "T", b"first")
        await consumer.call(RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("c1", "G", {"T": "*"})))
        await server_request(consumer)  # NOTIFY_CONSUMER_IDS_CHANGED
        held = RawClient.request(RequestCode.PULL_MESSAGE, consumer_pull("G", "T", 1, sys_flag=2))
        await consumer.send(held)
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await send(producer, "T", b"second")
        answer = await consumer.receive(timeout=5)
        waited = time.monotonic() - started
        assert answer.opaque == held.opaque and answer.code == ResponseCode.SUCCESS
        assert bodies(answer.body) == [b"second"]
        # Not the 20 s suspend timeout: the SEND woke it.
        assert waited < 5, waited
    finally:
        await consumer.close()
        await producer.close()


async def test_offsets_are_written_in_the_brokers_file_when_the_server_stops(tmp_path) -> None:
    from server.app import ServerSettings
    from server.remoting.write_path import write_path
    from store.config.store_config import StoreConfig

    config = StoreConfig.for_store(tmp_path / "store", broker_name="b1")
    store = WritableStore(config)
    server = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store))
    await server.start()
    client = await RawClient.connect("127.0.0.1", server.port)
    update = {"consumerGroup": "G", "topic": "T", "queueId": "1", "commitOffset": "42"}
    await client.call(RawClient.request(RequestCode.UPDATE_CONSUMER_OFFSET, update))
    await client.close()
    await server.stop()
    store.close()
    text = (tmp_path / "store" / "config" / "consumerOffset.json").read_text(encoding="utf-8")
    assert text == '{\n\t"offsetTable":{\n\t\t"T@G":{1:42\n\t\t}\n\t}\n}'
