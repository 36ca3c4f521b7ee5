"""FIFO consumption with the official RocketMQ 5 Python client: an orderly group's queue is locked
while a message of it is out.

The group is orderly in ``config/subscriptionGroup.json`` (5.x's ``consumeMessageOrderly``); the
server answers the consumer's Settings with ``subscription.fifo`` set, as the Proxy does, and its
receives pop orderly (``ReceiveLeases``): of two messages of one message group (one queue), the
second is not handed out while the first is unacked, even to a receive asking for more, and comes
at once after the ack (the ack wakes the held receive's queue).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")

TOPIC = "GrpcFifoRecv"
GROUP = "GrpcFifoGroup"
#: Seconds a receive long-polls (the Proxy's minimum).
AWAIT = 5


def write_config(root: Path) -> None:
    """A FIFO topic of 4 queues and an orderly consumer group."""
    (root / "config").mkdir(parents=True)
    topic = {
        "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": TOPIC,
        "topicSysFlag": 0, "writeQueueNums": 4, "attributes": {"message.type": "FIFO"},
    }  # fmt: skip
    version = {"counter": 1, "timestamp": 1}
    topics = {"dataVersion": version, "topicConfigTable": {TOPIC: topic}}
    (root / "config" / "topics.json").write_text(json.dumps(topics))
    group = {"groupName": GROUP, "consumeMessageOrderly": True}
    groups = {"dataVersion": version, "subscriptionGroupTable": {GROUP: group}}
    (root / "config" / "subscriptionGroup.json").write_text(json.dumps(groups))


def config(grpc_port: int) -> object:
    return rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )


def produce(grpc_port: int) -> None:
    producer = rocketmq.Producer(config(grpc_port), (TOPIC,))
    producer.startup()
    try:
        for i in range(2):
            msg = rocketmq.Message()
            msg.topic = TOPIC
            msg.body = b"a%d" % i
            msg.message_group = "ga"
            producer.send(msg)
    finally:
        producer.shutdown()


def consume(grpc_port: int) -> dict[str, object]:
    consumer = rocketmq.SimpleConsumer(
        config(grpc_port), GROUP, {TOPIC: rocketmq.FilterExpression("*")}, await_duration=AWAIT
    )
    consumer.startup()
    try:
        first: list = []
        deadline = time.monotonic() + 15
        while not first and time.monotonic() < deadline:
            first = consumer.receive(1, 10) or []
        started = time.monotonic()
        blocked = consumer.receive(16, 10) or []  # a1 is there, behind the unacked a0
        blocked_for = time.monotonic() - started
        for message in first:
            consumer.ack(message)
        started = time.monotonic()
        second = consumer.receive(16, 10) or []
        second_after = time.monotonic() - started
        for message in second:
            consumer.ack(message)
        return {
            "first": [(m.body, m.message_group, m.delivery_attempt) for m in first],
            "blocked": [m.body for m in blocked],
            "blocked_for": blocked_for,
            "second": [(m.body, m.message_group, m.delivery_attempt) for m in second],
            "second_after": second_after,
        }
    finally:
        consumer.shutdown()


async def test_an_orderly_groups_next_message_comes_only_after_the_ack(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_config(store)
    proc, _, grpc_port = await start_writable_grpc(store)
    try:
        await asyncio.wait_for(asyncio.to_thread(produce, grpc_port), 30)
        report = await asyncio.wait_for(asyncio.to_thread(consume, grpc_port), 35)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
    assert report["first"] == [(b"a0", "ga", 1)]
    assert report["blocked"] == []
    assert report["blocked_for"] >= AWAIT - 0.5  # the receive was held the whole long polling time
    assert report["second"] == [(b"a1", "ga", 1)]
    assert report["second_after"] < AWAIT - 1  # found at once: the ack unlocked the queue
