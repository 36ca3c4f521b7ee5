"""The PushConsumers of both official 5.x clients against ``serve --writable``'s gRPC port.

Both ship one (``rocketmq.PushConsumer`` in the Python client 5.1.2, ``PushConsumer`` in the Node.js
client 1.0.8), built on the calls the SimpleConsumer uses: every 5 s QueryAssignment for each
subscribed topic, then per assigned queue a loop of ReceiveMessage with ``auto_renew`` set (no
invisible duration of its own: the Proxy leases the messages for its ``defaultInvisibleTimeMills``,
60 s), the listener's SUCCESS acked (AckMessage) and its FAILURE answered with
ChangeInvisibleDuration to the client's backoff for that attempt, so the message comes back with the
next delivery attempt. Here a message of the 4.x remoting producer and messages of the 5.x producer
are each delivered once, the one the listener fails once comes back with delivery attempt 2 and the
same message id, and the group's offsets cover all of them once the consumer has stopped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from clients.producer import Producer
from store.config.consumer_offsets import ConsumerOffsetTable
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")

#: Seconds a consumer may take to see every delivery (the first assignment scan is 1 s after start).
WITHIN = 25


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
    finally:
        await kill_if_running(proc)
    assert proc.returncode == 0


def config(grpc_port: int) -> object:
    return rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )


def produce_v5(grpc_port: int, topic: str, count: int) -> list[str]:
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
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


async def send_v4(port: int, topic: str) -> str:
    async with Producer(f"127.0.0.1:{port}", timeout=5.0) as producer:
        sent = await producer.send(topic, b"v4 body", keys="k4", tags="TagB", properties={"n": "4"})
    assert sent is not None
    return sent.msg_id


class FailOnce(rocketmq.MessageListener):  # type: ignore[misc, name-defined]
    """Records every delivery; answers FAILURE to the first delivery of ``fail_body``."""

    def __init__(self, fail_body: bytes) -> None:
        self.fail_body = fail_body
        self.started = time.monotonic()
        self.deliveries: list[tuple[bytes, str, int, float]] = []
        self.lock = threading.Lock()

    def consume(self, message: object) -> object:
        with self.lock:
            self.deliveries.append(
                (message.body, message.message_id, message.delivery_attempt, time.monotonic() - self.started)  # type: ignore[attr-defined]
            )
        if message.body == self.fail_body and message.delivery_attempt == 1:  # type: ignore[attr-defined]
            return rocketmq.ConsumeResult.FAILURE
        return rocketmq.ConsumeResult.SUCCESS


def push_consume(grpc_port: int, topic: str, group: str, listener: FailOnce, count: int) -> None:
    """A PushConsumer until ``count`` deliveries were seen (or WITHIN ran out), then 1 s more."""
    consumer = rocketmq.PushConsumer(
        config(grpc_port), group, listener, {topic: rocketmq.FilterExpression("*")}
    )
    consumer.startup()
    try:
        deadline = time.monotonic() + WITHIN
        while len(listener.deliveries) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a duplicate would show here
    finally:
        consumer.shutdown()


async def test_python_push_consumer_consumes_redelivers_a_failure_and_commits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"PyPush": None})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        ids = await asyncio.wait_for(asyncio.to_thread(produce_v5, grpc_port, "PyPush", 3), 30)
        v4_id = await send_v4(port, "PyPush")
        listener = FailOnce(b"v5 body 0")
        await asyncio.wait_for(
            asyncio.to_thread(push_consume, grpc_port, "PyPush", "PyPushGroup", listener, 5), 40
        )
    finally:
        await stop(proc)
    seen = sorted((body, message_id, attempt) for body, message_id, attempt, _ in listener.deliveries)
    assert seen == [
        (b"v4 body", v4_id, 1),
        (b"v5 body 0", ids[0], 1),
        (b"v5 body 0", ids[0], 2),
        (b"v5 body 1", ids[1], 1),
        (b"v5 body 2", ids[2], 1),
    ]
    # back after the client's first backoff step (the customized policy's 1 s), not the 60 s lease
    failed_at = [at for body, _, _, at in listener.deliveries if body == b"v5 body 0"]
    assert 0.8 <= failed_at[1] - failed_at[0] < 10
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues("PyPushGroup", "PyPush").values()) == 4


async def test_node_push_consumer_consumes_redelivers_a_failure_and_commits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"NodePush": None})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        ids = await asyncio.wait_for(asyncio.to_thread(produce_v5, grpc_port, "NodePush", 2), 30)
        v4_id = await send_v4(port, "NodePush")
        job = {
            "mode": "push",
            "endpoints": f"127.0.0.1:{grpc_port}",
            "group": "NodePushGroup",
            "topic": "NodePush",
            "failBody": "v5 body 1",
            "count": 4,
            "withinMs": WITHIN * 1000,
            "graceMs": 1000,
        }
        report = await run_node_client(job, timeout=40)
    finally:
        await stop(proc)
    seen = sorted((d["body"], d["messageId"], d["deliveryAttempt"]) for d in report["deliveries"])
    assert seen == [
        ("v4 body", v4_id, 1),
        ("v5 body 0", ids[0], 1),
        ("v5 body 1", ids[1], 1),
        ("v5 body 1", ids[1], 2),
    ]
    v4 = next(d for d in report["deliveries"] if d["body"] == "v4 body")
    assert v4["tag"] == "TagB" and v4["keys"] == ["k4"] and v4["properties"] == {"n": "4"}
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues("NodePushGroup", "NodePush").values()) == 3
