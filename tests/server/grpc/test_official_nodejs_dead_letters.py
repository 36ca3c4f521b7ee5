"""Dead letters with the official RocketMQ 5 Node.js client's SimpleConsumer against ``serve --writable``.

The group is created over the remoting port as ``mqadmin updateSubGroup`` does
(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) with ``retryMaxTimes`` 0: its max delivery attempts, sent to
the client in the Settings and applied by the server, is 1. The Node consumer receives the messages
and never acks them; once their lease (the Proxy's minimum invisible duration, 10 s) is over, the
next receive stores them in ``%DLQ%group`` instead of handing them out again, and the group's
offsets move past them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clients.producer import Producer
from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import RawClient
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics

TOPIC = "NodeDead"
GROUP = "NodeOneShot"


async def create_group(port: int) -> None:
    """The group with one delivery allowed, as ``mqadmin updateSubGroup -r 0`` creates it."""
    config = {"groupName": GROUP, "consumeEnable": True, "consumeFromMinEnable": True,
              "consumeBroadcastEnable": False, "retryQueueNums": 1, "retryMaxTimes": 0, "brokerId": 0,
              "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}  # fmt: skip
    client = await RawClient.connect("127.0.0.1", port)
    try:
        request = RawClient.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(config).encode()
        )
        answer = await client.call(request)
    finally:
        client.writer.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_node_simple_consumer_unacked_past_max_attempts_goes_to_dead_letters(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        await create_group(port)
        async with Producer(f"127.0.0.1:{port}", timeout=5.0) as producer:
            sent = [await producer.send(TOPIC, b"dead %d" % i, keys=f"k{i}") for i in range(2)]
        job = {
            "mode": "dead",
            "endpoints": f"127.0.0.1:{grpc_port}",
            "group": GROUP,
            "topic": TOPIC,
            "count": 2,
            "awaitMs": 5000,
            "invisibleMs": 10_000,
            "receiveWithinMs": 5000,
            "holdMs": 10_300,
        }
        report = await run_node_client(job, timeout=28)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
    ids = sorted(s.msg_id for s in sent if s is not None)
    assert len(ids) == 2
    assert sorted(m["messageId"] for m in report["first"]) == ids
    assert {m["deliveryAttempt"] for m in report["first"]} == {1}
    assert report["after"] == []  # not handed out again: attempt 2 is past the group's maximum
    reader = MessageStore.open(StoreConfig.for_store(store))
    try:
        dead = [decode_message(bytes(b)) for b in reader.get_message(f"%DLQ%{GROUP}", 0, 0, 8).buffers]
    finally:
        reader.close()
    assert sorted(m.properties["UNIQ_KEY"] for m in dead) == ids
    assert sorted(m.body for m in dead) == [b"dead 0", b"dead 1"]
    assert {m.properties["RETRY_TOPIC"] for m in dead} == {TOPIC}
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues(GROUP, TOPIC).values()) == 2
