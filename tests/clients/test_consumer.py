"""``clients.consumer.PullConsumer`` against ``serve --writable`` (``RmqServer``, in-process).

What is sent comes back whole, once, in queue order per queue, filtered by tag; a new member of the
group (and a restarted server) resumes from the offsets committed for what was taken, and nothing
pulled but not taken is lost; fewer messages than asked end in a ``TimeoutError`` that names what
came. The broker side is the server's own consume side: the group is listed by
GET_CONSUMER_LIST_BY_GROUP while the consumer runs and not after it left, and the offsets land in
the broker's ``config/consumerOffset.json``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest

from clients.client import RemotingClient
from clients.consumer import PullConsumer, ReceiveTimeoutError, Subscription
from clients.errors import MQBrokerError, UsageError
from clients.message_queue import MessageQueue
from clients.producer import Producer
from clients.response_errors import NoPermissionError
from clients.testkit.server import RmqServer, kit_store_config
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message import MessageExt, encode_message


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def server(store_root: Path) -> Iterator[RmqServer]:
    srv = RmqServer(kit_store_config(store_root))
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
async def producer(server: RmqServer) -> AsyncIterator[Producer]:
    async with Producer(server.address) as p:
        yield p


async def send_all(producer: Producer, topic: str, n: int, **options: object) -> list[str]:
    """Send ``n`` messages ``<topic>-<i>``; their bodies, in sending order."""
    bodies = [f"{topic}-{i}" for i in range(n)]
    for body in bodies:
        await producer.send(topic, body.encode(), keys=body, **options)  # type: ignore[arg-type]
    return bodies


def bodies(messages: list[MessageExt]) -> list[str]:
    return [m.body.decode() for m in messages]


def assert_queue_order(messages: list[MessageExt]) -> None:
    by_queue: dict[int, list[int]] = {}
    for m in messages:
        by_queue.setdefault(m.queue_id, []).append(m.queue_offset)
    for offsets in by_queue.values():
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), by_queue


async def consumer_ids(addr: str, group: str) -> list[str] | None:
    """GET_CONSUMER_LIST_BY_GROUP as the broker answers it; None for "no consumer for this group"."""
    async with RemotingClient() as client:
        response = await client.invoke(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if response.code != ResponseCode.SUCCESS:
        return None
    return msgspec.json.decode(response.body)["consumerIdList"]


async def test_receives_what_was_sent_once_in_queue_order(server: RmqServer, producer: Producer) -> None:
    sent = await send_all(producer, "Orders", 12)
    async with PullConsumer(server.address, "g-orders", subscriptions={"Orders": "*"}) as consumer:
        got = await consumer.receive(12, timeout=10)
        assert sorted(bodies(got)) == sorted(sent)
        assert_queue_order(got)
        assert {m.queue_id for m in got} == {0, 1, 2, 3}
        with pytest.raises(ReceiveTimeoutError):
            await consumer.receive(1, timeout=0.3)  # nothing twice
        with pytest.raises(UsageError):
            consumer.subscribe("Other")  # after start


async def test_a_send_wakes_the_held_pull_at_once(server: RmqServer, producer: Producer) -> None:
    """Started on a topic nobody sent to yet: the route is found when the first SEND creates it, and
    a later SEND answers the held pull long before its 15 s suspend ends."""
    async with PullConsumer(server.address, "g-late", subscriptions={"Late": "*"}) as consumer:
        await send_all(producer, "Late", 1)
        (first,) = await consumer.receive(1, timeout=5)
        await asyncio.sleep(0.3)  # the pulls are held now
        started = time.monotonic()
        await producer.send("Late", b"second", queue_id=first.queue_id)
        (second,) = await consumer.receive(1, timeout=5)
        assert second.body == b"second"
        assert time.monotonic() - started < 3.0


async def test_a_new_member_resumes_from_the_committed_offsets(server: RmqServer, producer: Producer) -> None:
    sent = await send_all(producer, "Resume", 20)
    async with PullConsumer(server.address, "g-resume", subscriptions={"Resume": "*"}) as first:
        taken = await first.receive(7, timeout=10)
        await asyncio.sleep(0.2)
        assert first.ready == 13  # everything was pulled; only 7 were taken
    async with PullConsumer(server.address, "g-resume", subscriptions={"Resume": "*"}) as second:
        rest = await second.receive(13, timeout=10)
        assert sorted(bodies(taken) + bodies(rest)) == sorted(sent)  # none lost, none twice
        with pytest.raises(ReceiveTimeoutError):
            await second.receive(1, timeout=0.3)
    # Another group has its own offsets: it starts from the first one.
    async with PullConsumer(server.address, "g-other", subscriptions={"Resume": "*"}) as other:
        assert sorted(bodies(await other.receive(20, timeout=10))) == sorted(sent)


async def test_the_offsets_survive_a_server_restart(store_root: Path) -> None:
    srv = RmqServer(kit_store_config(store_root))
    try:
        async with Producer(srv.address) as producer:
            sent = await send_all(producer, "Durable", 8, queue_id=0)
        consumer = PullConsumer(srv.address, "g-durable")
        consumer.subscribe("Durable")
        await consumer.start()
        taken = await consumer.receive(5, timeout=10)
        await consumer.close()
    finally:
        srv.close()
    saved = (store_root / "config" / "consumerOffset.json").read_text()
    # The broker's format (fastjson, integer keys bare): topic@group -> {queue id: offset}.
    assert re.search(r'"Durable@g-durable":\{0:5\s*\}', saved), saved

    srv = RmqServer(kit_store_config(store_root))
    try:
        consumer = PullConsumer(srv.address, "g-durable")
        consumer.subscribe("Durable")
        await consumer.start()
        try:
            rest = await consumer.receive(3, timeout=10)
        finally:
            await consumer.close()
    finally:
        srv.close()
    assert bodies(taken) + bodies(rest) == sent  # one queue: exactly the sending order


async def test_tag_filter(server: RmqServer, producer: Producer) -> None:
    for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA", "TagC", "TagB"]):
        await producer.send("Tagged", f"{tag}-{i}".encode(), tags=tag)
    await producer.send("Tagged", b"untagged")
    consumer = PullConsumer(server.address, "g-tags")
    consumer.subscribe("Tagged", "TagA || TagB")
    await consumer.start()
    try:
        got = await consumer.receive(4, timeout=10)
        assert sorted(bodies(got)) == ["TagA-0", "TagA-3", "TagB-1", "TagB-5"]
        with pytest.raises(ReceiveTimeoutError):
            await consumer.receive(1, timeout=0.5)
    finally:
        await consumer.close()


async def test_the_group_is_registered_while_running_and_left_at_close(server: RmqServer) -> None:
    consumer = PullConsumer(server.address, "g-members")
    consumer.subscribe("Members")
    await consumer.start()
    try:
        # No route for Members yet: the consumer knows no broker to heartbeat.
        assert await consumer_ids(server.address, "g-members") is None
        async with Producer(server.address) as producer:
            await producer.send("Members", b"x")
        await consumer.receive(1, timeout=5)
        assert await consumer_ids(server.address, "g-members") == [consumer.client_id]
    finally:
        await consumer.close()
    assert await consumer_ids(server.address, "g-members") is None


async def test_timeout_names_what_arrived_and_leaves_it_untaken(
    server: RmqServer, producer: Producer
) -> None:
    await producer.send("Short", b"only one", keys="k-1", tags="T1", queue_id=0)
    await producer.send("Short", b"and two", keys="k-2", tags="T1", queue_id=0)
    consumer = PullConsumer(server.address, "g-short")
    consumer.subscribe("Short")
    await consumer.start()
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await consumer.receive(3, timeout=1.0)
        assert 0.9 <= time.monotonic() - started < 5
        text = str(caught.value)
        assert text.startswith("received 2 of 3 messages within 1s from Short (tags *), group g-short: ")
        assert "Short[0]@0 tags=T1 keys=k-1 body=b'only one'" in text
        assert "Short[0]@1 tags=T1 keys=k-2 body=b'and two'" in text
        assert isinstance(caught.value, ReceiveTimeoutError)
        assert [m.body for m in caught.value.received] == [b"only one", b"and two"]
        await producer.send("Short", b"three", queue_id=0)
        assert bodies(await consumer.receive(3, timeout=5)) == ["only one", "and two", "three"]
    finally:
        await consumer.close()


async def test_timeout_on_a_topic_never_sent_says_so(server: RmqServer) -> None:
    consumer = PullConsumer(server.address, "g-none")
    consumer.subscribe("Never", "A")
    await consumer.start()
    try:
        with pytest.raises(TimeoutError, match=r"received 0 of 1 messages .* Never \(tags A\).*no route yet"):
            await consumer.receive(1, timeout=0.3)
    finally:
        await consumer.close()


async def test_close_commits_only_what_was_taken(server: RmqServer, producer: Producer) -> None:
    await send_all(producer, "Partial", 6, queue_id=2)
    consumer = PullConsumer(server.address, "g-partial")
    consumer.subscribe("Partial")
    await consumer.start()
    await consumer.receive(2, timeout=10)
    await consumer.close()
    probe = PullConsumer(server.address, "g-partial")
    probe.subscribe("Partial")
    await probe.start()
    try:
        assert await probe.committed_offset(MessageQueue("Partial", "broker-a", 2)) == 2
    finally:
        await probe.close()


def test_subscription_is_built_as_the_java_client_builds_it() -> None:
    """Values printed by ``javac``-compiled ``"TagA".hashCode()`` and a ``HashSet`` of the tags."""
    sub = Subscription.build("T", " TagA||zz|| 订单 ||TagB||TagA||")
    assert sub.sub_string == " TagA||zz|| 订单 ||TagB||TagA||"
    assert sub.tags == ("TagA", "zz", "订单", "TagB")
    assert sub.codes == (2598919, 3904, 1129459, 2598920)
    assert Subscription.build("T", "*").tags == () and Subscription.build("T", "").sub_string == "*"
    assert Subscription.build("T", None).sub_string == "*"
    with pytest.raises(UsageError):
        Subscription.build("T", "||")


def test_heartbeat_body_is_the_java_clients_shape() -> None:
    consumer = PullConsumer("127.0.0.1:1", "g-hb")
    consumer.subscribe("T", "TagA || TagB")
    body = json.loads(consumer.heartbeat_body())
    (data,) = body["consumerDataSet"]
    assert body["clientID"] == consumer.client_id and body["producerDataSet"] == []
    assert {k: data[k] for k in ("consumeFromWhere", "consumeType", "groupName", "messageModel")} == {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": "g-hb",
        "messageModel": "CLUSTERING",
    }
    (sub,) = data["subscriptionDataSet"]
    assert sub["codeSet"] == [2598919, 2598920] and sub["tagsSet"] == ["TagA", "TagB"]
    assert sub["expressionType"] == "TAG" and sub["subString"] == "TagA || TagB"
    assert abs(sub["subVersion"] - time.time() * 1000) < 60_000


# -- against a scripted broker: what only a misbehaving or refusing broker shows -------------------


def scripted_broker(addr_ref: list[str], pulls: list[RemotingCommand | None], queries: list[RemotingCommand]):
    """A name server and broker in one: one topic ``T`` with one queue, heartbeats accepted, the pulls
    and consumer-offset queries answered in turn from the lists (a pull answered None is held; once
    the queries are used up, the last offset committed is answered)."""
    committed: list[str] = []
    route = (
        '{"brokerDatas":[{"brokerName":"b","cluster":"c","brokerAddrs":{0:"ADDR"}}],'
        '"queueDatas":[{"brokerName":"b","readQueueNums":1,"writeQueueNums":1,"perm":6}]}'
    )

    def handle(request: RemotingCommand) -> RemotingCommand | None:
        response: RemotingCommand | None = answer(ResponseCode.SUCCESS, ext_fields={})
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            response = answer(ResponseCode.SUCCESS, body=route.replace("ADDR", addr_ref[0]).encode())
        elif request.code == RequestCode.PULL_MESSAGE:
            response = pulls.pop(0) if pulls else None
        elif request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            committed.append((request.ext_fields or {})["commitOffset"])
        elif request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            if queries:
                response = queries.pop(0)
            elif committed:
                response = answer(ResponseCode.SUCCESS, ext_fields={"offset": committed[-1]})
            else:
                response = answer(ResponseCode.QUERY_NOT_FOUND)
        if response is not None:
            response.flag = 1  # a response
        return response

    return handle


def answer(code: int, **kwargs: object) -> RemotingCommand:
    return RemotingCommand(code=code, flag=1, **kwargs)  # type: ignore[arg-type]


def found(*bodies: bytes) -> RemotingCommand:
    records = b"".join(
        encode_message(MessageExt(topic="T", queue_offset=i, body=b, properties={"TAGS": "a"}))
        for i, b in enumerate(bodies)
    )
    fields = {"suggestWhichBrokerId": "0", "nextBeginOffset": str(len(bodies)), "minOffset": "0"}
    return answer(ResponseCode.SUCCESS, ext_fields={**fields, "maxOffset": str(len(bodies))}, body=records)


async def test_a_refused_pull_is_raised_as_its_error_class(fake_peer) -> None:
    addr_ref = [""]
    refused = answer(ResponseCode.NO_PERMISSION, remark="the topic[T] pulling message is forbidden")
    queries = [answer(ResponseCode.QUERY_NOT_FOUND)]
    peer = await fake_peer(scripted_broker(addr_ref, [refused], queries))
    addr_ref[0] = peer.addr
    async with PullConsumer(peer.addr, "g", subscriptions={"T": "*"}) as consumer:
        with pytest.raises(NoPermissionError) as caught:
            await consumer.receive(1, timeout=5)
        assert isinstance(caught.value, MQBrokerError)
        assert caught.value.remark == "the topic[T] pulling message is forbidden"
    assert RequestCode.UNREGISTER_CLIENT in [r.code for r in peer.requests]


async def test_close_commits_again_when_the_broker_reads_back_less(fake_peer) -> None:
    """A pull carrying an older offset with its commit flag may be applied after the close's commit:
    the close reads the offset back and commits again until the broker holds what was taken."""
    addr_ref = [""]
    ok = {"offset": "2"}
    queries = [
        answer(ResponseCode.QUERY_NOT_FOUND),  # at start: nothing committed, start at 0
        answer(ResponseCode.SUCCESS, ext_fields={"offset": "1"}),  # read back: behind
        answer(ResponseCode.SUCCESS, ext_fields=ok),
    ]
    peer = await fake_peer(scripted_broker(addr_ref, [found(b"x0", b"x1")], queries))
    addr_ref[0] = peer.addr
    # Room for two waiting messages: the second pull goes out once they are taken.
    consumer = PullConsumer(peer.addr, "g", subscriptions={"T": "*"}, threshold_per_queue=2)
    await consumer.start()
    assert bodies(await consumer.receive(2, timeout=5)) == ["x0", "x1"]
    for _ in range(50):
        if sum(r.code == RequestCode.PULL_MESSAGE for r in peer.requests) == 2:
            break
        await asyncio.sleep(0.1)
    await consumer.close()
    updates = [
        r.ext_fields["commitOffset"] for r in peer.requests if r.code == RequestCode.UPDATE_CONSUMER_OFFSET
    ]
    assert updates == ["2", "2"]
    heartbeat = next(r for r in peer.requests if r.code == RequestCode.HEART_BEAT)
    assert json.loads(heartbeat.body)["consumerDataSet"][0]["groupName"] == "g"
    # As the push consumer pulls: suspend flag (2), and once something was consumed, the commit
    # flag (1) with the consumed offset; no subscription in the pull (the heartbeat's is used).
    pulls = [r.ext_fields for r in peer.requests if r.code == RequestCode.PULL_MESSAGE]
    assert [(p["sysFlag"], p["queueOffset"], p["commitOffset"]) for p in pulls] == [
        ("2", "0", "0"),
        ("3", "2", "2"),
    ]
    assert "subscription" not in pulls[0] and pulls[0]["expressionType"] == "TAG"
