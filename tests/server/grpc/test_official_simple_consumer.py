"""The official RocketMQ 5 Python client's SimpleConsumer against ``serve --writable``'s gRPC port.

Messages sent by the 5.x Producer (gRPC) and by the 4.x remoting producer (``clients.producer``) are
received, acked and never handed out again; a message not acked comes back once its invisible
duration is over, with delivery attempt 2, while one whose invisible duration was extended
(ChangeInvisibleDuration) stays away and is acked with its new receipt handle; past the group's
max attempts a message goes to its dead-letter topic. The Proxy's minimum
invisible duration for a receive is 10 s and its minimum long polling 5 s, which bound how fast
these can go.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from clients.producer import Producer
from protocol.message import decode_message
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")

GROUP = "GrpcSimpleGroup"
#: Seconds a receive long-polls (the Proxy's minimum).
AWAIT = 5


def config(grpc_port: int) -> object:
    return rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )


def produce(grpc_port: int, topic: str, count: int) -> list[str]:
    """``count`` messages by the official producer; their message ids."""
    producer = rocketmq.Producer(config(grpc_port), (topic,))
    producer.startup()
    try:
        ids = []
        for i in range(count):
            msg = rocketmq.Message()
            msg.topic = topic
            msg.body = b"v5 body %d" % i
            msg.tag = "TagA"
            msg.keys = f"k{i}"
            msg.add_property("n", str(i))
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


def simple_consumer(grpc_port: int, topic: str, group: str = GROUP) -> object:
    consumer = rocketmq.SimpleConsumer(
        config(grpc_port), group, {topic: rocketmq.FilterExpression("*")}, await_duration=AWAIT
    )
    consumer.startup()
    return consumer


def receive_until(consumer: object, count: int, invisible: int, deadline: float) -> list:
    got: list = []
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.receive(16, invisible) or []  # type: ignore[attr-defined]
    return got


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
    finally:
        await kill_if_running(proc)
    assert proc.returncode == 0


async def test_receive_and_ack_messages_of_both_producers_never_redelivered(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"GrpcRecv": None})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        ids = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, "GrpcRecv", 3), 30)
        async with Producer(f"127.0.0.1:{port}", timeout=5.0) as producer:
            sent = await producer.send("GrpcRecv", b"v4 body", keys="k4", tags="TagB", properties={"n": "4"})
        assert sent is not None

        def consume() -> tuple[list, list]:
            consumer = simple_consumer(grpc_port, "GrpcRecv")
            try:
                got = receive_until(consumer, 4, 10, time.monotonic() + 20)
                leased_until = time.monotonic() + 10
                for message in got:
                    consumer.ack(message)
                # acked: nothing comes back once the 10 s the messages were leased for are over
                time.sleep(max(0.0, leased_until - time.monotonic()))
                again = consumer.receive(16, 10) or []
                return got, again
            finally:
                consumer.shutdown()

        started = time.monotonic()
        got, again = await asyncio.wait_for(asyncio.to_thread(consume), 40)
        assert again == []
        assert 10 + AWAIT <= time.monotonic() - started < 30  # the empty receive long-polled
        by_body = {m.body: m for m in got}
        assert sorted(by_body) == [b"v4 body", b"v5 body 0", b"v5 body 1", b"v5 body 2"]
        v5 = by_body[b"v5 body 1"]
        assert v5.message_id == ids[1] and v5.tag == "TagA" and "k1" in v5.keys
        assert v5.properties["n"] == "1" and v5.delivery_attempt == 1 and v5.topic == "GrpcRecv"
        assert v5.receipt_handle
        v4 = by_body[b"v4 body"]
        assert v4.message_id == sent.msg_id and v4.tag == "TagB" and v4.properties["n"] == "4"
        assert abs(v4.born_timestamp - time.time() * 1000) < 120_000
    finally:
        await stop(proc)
    # the acked offsets were committed for the group, in the broker's own file
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues(GROUP, "GrpcRecv").values()) == 4


async def test_unacked_comes_back_with_attempt_2_and_change_invisible_keeps_one_away(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"GrpcRedeliver": None})
    proc, _, grpc_port = await start_writable_grpc(store)
    try:
        await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, "GrpcRedeliver", 2), 30)

        def consume() -> dict[str, object]:
            consumer = simple_consumer(grpc_port, "GrpcRedeliver")
            try:
                first = receive_until(consumer, 2, 10, time.monotonic() + 15)
                leased_at = time.monotonic()
                kept, dropped = sorted(first, key=lambda m: m.body)
                stale_handle = dropped.receipt_handle
                consumer.change_invisible_duration(kept, 30)  # the client takes the new handle
                back = receive_until(consumer, 1, 10, time.monotonic() + 20)
                waited = time.monotonic() - leased_at
                for message in back:
                    consumer.ack(message)
                consumer.ack(kept)
                dropped.receipt_handle = stale_handle
                try:
                    consumer.ack(dropped)
                    stale = "accepted"
                except Exception as exc:  # the client raises on a non-OK status
                    stale = str(exc)
                return {"first": first, "back": back, "waited": waited, "stale": stale}
            finally:
                consumer.shutdown()

        result = await asyncio.wait_for(asyncio.to_thread(consume), 45)
        first, back = result["first"], result["back"]
        assert [m.delivery_attempt for m in first] == [1, 1]  # type: ignore[union-attr]
        assert [(m.body, m.delivery_attempt) for m in back] == [(b"v5 body 1", 2)]  # type: ignore[union-attr]
        assert 9 <= result["waited"] < 20  # type: ignore[operator]
        assert "40013" in str(result["stale"])  # INVALID_RECEIPT_HANDLE: redelivered since
    finally:
        await stop(proc)


async def test_past_the_groups_max_attempts_the_message_goes_to_its_dead_letter_queue(tmp_path: Path) -> None:
    """A group with ``retryMaxTimes`` 0 allows one delivery: the next receive, once the lease is
    over, stores the message in ``%DLQ%group`` instead of handing it out again."""
    store = tmp_path / "store"
    write_topics(store, {"GrpcDead": None})
    groups = {"subscriptionGroupTable": {"OneShot": {"groupName": "OneShot", "retryMaxTimes": 0}}}
    (store / "config" / "subscriptionGroup.json").write_text(json.dumps(groups))
    proc, _, grpc_port = await start_writable_grpc(store)
    try:
        (sent_id,) = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, "GrpcDead", 1), 30)

        def consume() -> tuple[list, list]:
            consumer = simple_consumer(grpc_port, "GrpcDead", "OneShot")
            try:
                first = receive_until(consumer, 1, 10, time.monotonic() + 15)
                time.sleep(10.2)  # the lease runs out unacked
                return first, consumer.receive(16, 10) or []
            finally:
                consumer.shutdown()

        first, after = await asyncio.wait_for(asyncio.to_thread(consume), 40)
        assert [m.message_id for m in first] == [sent_id] and after == []
    finally:
        await stop(proc)
    reader = MessageStore.open(StoreConfig.for_store(store))
    try:
        (dead,) = [decode_message(bytes(b)) for b in reader.get_message("%DLQ%OneShot", 0, 0, 8).buffers]
    finally:
        reader.close()
    assert dead.properties["UNIQ_KEY"] == sent_id and dead.body == b"v5 body 0"
    assert dead.properties["RETRY_TOPIC"] == "GrpcDead"
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues("OneShot", "GrpcDead").values()) == 1
