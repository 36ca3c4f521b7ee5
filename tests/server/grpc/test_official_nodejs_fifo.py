"""FIFO consumption with the official RocketMQ 5 Node.js client, as ``test_official_fifo.py`` for Python.

The Node producer sends three messages of one message group to a FIFO topic (one queue); the group
is orderly (``consumeMessageOrderly``, created over the remoting port as ``mqadmin updateSubGroup -o
true`` does), so the server answers the consumer's Settings with ``subscription.fifo`` and pops the
queue orderly: while the first message is out unacked, a receive asking for more gets nothing for
its whole long polling time; after the ack the rest come at once, in send order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import RawClient
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics

TOPIC = "NodeFifoRecv"
GROUP = "NodeFifoGroup"
#: Milliseconds a receive long-polls (the Proxy's minimum).
AWAIT_MS = 5000


async def create_orderly_group(port: int) -> None:
    config = {"groupName": GROUP, "consumeEnable": True, "consumeFromMinEnable": True,
              "consumeBroadcastEnable": False, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
              "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
              "consumeMessageOrderly": True}  # fmt: skip
    client = await RawClient.connect("127.0.0.1", port)
    try:
        request = RawClient.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(config).encode()
        )
        answer = await client.call(request)
    finally:
        client.writer.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_node_orderly_groups_next_messages_come_only_after_the_ack_in_order(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "FIFO"})
    proc, port, grpc_port = await start_writable_grpc(store)
    endpoints = f"127.0.0.1:{grpc_port}"
    try:
        await create_orderly_group(port)
        messages = [
            {"name": f"a{i}", "topic": TOPIC, "body": f"a{i}", "keys": [f"k{i}"], "messageGroup": "ga"}
            for i in range(3)
        ]
        produced = await run_node_client(
            {"mode": "produce", "endpoints": endpoints, "topics": [TOPIC], "messages": messages}, timeout=10
        )
        job = {
            "mode": "fifo",
            "endpoints": endpoints,
            "group": GROUP,
            "topic": TOPIC,
            "awaitMs": AWAIT_MS,
            "invisibleMs": 10_000,
            "receiveWithinMs": 5000,
        }
        report = await run_node_client(job, timeout=40)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
    ids = [produced["receipts"][f"a{i}"]["messageId"] for i in range(3)]
    seen = [(m["body"], m["messageGroup"], m["deliveryAttempt"]) for m in report["first"]]
    assert seen == [("a0", "ga", 1)]
    assert report["first"][0]["messageId"] == ids[0]
    assert report["blocked"] == []
    assert report["blockedMs"] >= AWAIT_MS - 500  # held the whole long polling time
    assert [(m["body"], m["messageGroup"], m["deliveryAttempt"]) for m in report["second"]] == [
        ("a1", "ga", 1),
        ("a2", "ga", 1),
    ]
    assert [m["messageId"] for m in report["second"]] == ids[1:]
    assert report["secondMs"] < AWAIT_MS - 1000  # found at once: the ack unlocked the queue


async def test_node_fifo_push_consumer_keeps_each_message_groups_order(tmp_path: Path) -> None:
    """The PushConsumer of an orderly group consumes each message group in send order. Its listener
    fails ``b1`` once: 1.0.8 reads only an exponential backoff policy from the Settings and the
    Proxy (as we do, ``mergeSubscriptionData``) sends the group's customized one, so the client has
    no local retries for a FIFO message and forwards ``b1`` to the dead-letter queue at once
    (ForwardMessageToDeadLetterQueue); ``b2`` comes only after that."""
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "FIFO"})
    proc, port, grpc_port = await start_writable_grpc(store)
    endpoints = f"127.0.0.1:{grpc_port}"
    try:
        await create_orderly_group(port)
        messages = [
            {
                "name": f"{g}{i}",
                "topic": TOPIC,
                "body": f"{g}{i}",
                "keys": [f"k{g}{i}"],
                "messageGroup": f"g{g}",
            }
            for i in range(3)
            for g in "ab"
        ]
        produced = await run_node_client(
            {"mode": "produce", "endpoints": endpoints, "topics": [TOPIC], "messages": messages}, timeout=10
        )
        job = {
            "mode": "push",
            "endpoints": endpoints,
            "group": GROUP,
            "topic": TOPIC,
            "failBody": "b1",
            "count": 6,
            "withinMs": 10_000,
            "graceMs": 1000,
        }
        report = await run_node_client(job, timeout=60)  # the client holds its last long poll at shutdown
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
    deliveries = report["deliveries"]
    for group, expected in (("ga", ["a0", "a1", "a2"]), ("gb", ["b0", "b1", "b2"])):
        seen = [(d["body"], d["deliveryAttempt"]) for d in deliveries if d["messageGroup"] == group]
        assert seen == [(body, 1) for body in expected], deliveries
    reader = MessageStore.open(StoreConfig.for_store(store))
    try:
        dead = [decode_message(bytes(b)) for b in reader.get_message(f"%DLQ%{GROUP}", 0, 0, 8).buffers]
    finally:
        reader.close()
    assert [(m.body, m.properties["UNIQ_KEY"]) for m in dead] == [
        (b"b1", produced["receipts"]["b1"]["messageId"])
    ]
