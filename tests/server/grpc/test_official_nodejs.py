"""The official RocketMQ 5 Node.js client (``rocketmq-client-nodejs`` 1.0.8) against ``serve --writable``.

The client is pinned with every dependency in ``tests/server/interop5/package-lock.json`` and driven
by ``tests/server/interop5/client.js`` (``tests.support.node_client``). Its start-up is QueryRoute for
its topics, then the wait for the first Settings answered on its Telemetry stream: here in tens of
ms, well under its 3 s request timeout (the start-up failure the issue saw after 3 s was QueryRoute
to a port that did not speak gRPC yet). The producer is started with one topic: with several, 1.0.8
opens Telemetry after the first route and only starts waiting for the Settings after the last, so an
answer that comes in between (ours, on loopback, always does) is missed and start-up never ends.

- Producer: normal, FIFO (message group) and delayed (delivery timestamp) sends, each then found by
  the remoting side as a 4.x tool looks (query by key, a pull of the FIFO queue, the delay level's
  topic). The transactional producer is in ``test_official_nodejs_transactions.py``.
- SimpleConsumer: messages of the 4.x remoting producer and of the Node producer are received and
  acked; one left unacked comes back after its invisible duration with delivery attempt 2; one whose
  invisible duration was extended stays away, its old receipt handle is refused and the new one
  acks it; the group's offsets are committed for all of them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from clients.producer import Producer
from store.config.consumer_offsets import ConsumerOffsetTable
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics

#: The client's request timeout (ms): start-up must not come near it.
CLIENT_REQUEST_TIMEOUT_MS = 3000


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
    finally:
        await kill_if_running(proc)
    assert proc.returncode == 0


async def test_node_producer_sends_are_found_by_the_remoting_side(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"NodeNormal": None, "NodeFifo": "FIFO", "NodeDelay": "DELAY"})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        messages = [
            {"name": "normal", "topic": "NodeNormal", "body": "normal body", "tag": "TagA",
             "keys": ["k-normal"], "properties": {"color": "red"}},
            *({"name": f"fifo-a{i}", "topic": "NodeFifo", "body": f"a{i}", "keys": [f"k-a{i}"],
               "messageGroup": "ga"} for i in range(3)),
            {"name": "fifo-b", "topic": "NodeFifo", "body": "b", "keys": ["k-b"], "messageGroup": "gb"},
            {"name": "delay", "topic": "NodeDelay", "body": "later", "keys": ["k-delay"], "delayMs": 3000},
        ]  # fmt: skip
        job = {
            "mode": "produce",
            "endpoints": f"127.0.0.1:{grpc_port}",
            "topics": ["NodeNormal", "NodeFifo", "NodeDelay"],
            "messages": messages,
        }
        report = await run_node_client(job, timeout=30)
        assert report["startupMs"] < CLIENT_REQUEST_TIMEOUT_MS
        receipts = report["receipts"]
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            broker = (await admin.get_route("NodeFifo")).broker_datas[0].broker_name
            (found,) = (await admin.query_by_key("NodeNormal", "k-normal")).messages
            assert found.body == b"normal body"
            assert found.properties["TAGS"] == "TagA" and found.properties["color"] == "red"
            assert found.properties["UNIQ_KEY"] == receipts["normal"]["messageId"]
            assert abs(int(found.properties["BORN_TIMESTAMP"]) - time.time() * 1000) < 120_000
            # FIFO: one message group lands in one queue, in send order
            placed = [(await admin.query_by_key("NodeFifo", f"k-a{i}")).messages for i in range(3)]
            queue_ids = {m.queue_id for (m,) in placed}
            assert len(queue_ids) == 1
            pulled = await admin.pull(MessageQueue("NodeFifo", broker, queue_ids.pop()), "*", 0, 32)
            group_a = [m for m in pulled.messages if m.properties.get("__SHARDINGKEY") == "ga"]
            assert [m.body for m in group_a] == [b"a0", b"a1", b"a2"]
            assert [m.properties["UNIQ_KEY"] for m in group_a] == [
                receipts[f"fifo-a{i}"]["messageId"] for i in range(3)
            ]
            (b_found,) = (await admin.query_by_key("NodeFifo", "k-b")).messages
            assert b_found.properties["__SHARDINGKEY"] == "gb"
            # delay: not in its topic at once; there once its time (3 s ahead) has come
            for queue in range(4):
                assert not (await admin.pull(MessageQueue("NodeDelay", broker, queue), "*", 0, 32)).messages
            deadline = time.monotonic() + 15
            delivered: list = []
            while not delivered and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                for queue in range(4):
                    pulled = await admin.pull(MessageQueue("NodeDelay", broker, queue), "*", 0, 32)
                    delivered += pulled.messages
            (late,) = delivered
            assert late.body == b"later" and late.properties["REAL_TOPIC"] == "NodeDelay"
            # the 5.x timer wheel: TIMER_DELIVER_MS as asked, stored not before it, within a precision
            asked = int(late.properties["TIMER_DELIVER_MS"])
            assert "DELAY" not in late.properties
            assert asked <= late.store_timestamp <= asked + 1000 + 1500
            assert late.store_timestamp >= receipts["delay"]["deliveryTimestamp"]
    finally:
        await stop(proc)


async def test_node_simple_consumer_receives_acks_and_changes_invisible_duration(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {"NodeRecv": None})
    proc, port, grpc_port = await start_writable_grpc(store)
    endpoints = f"127.0.0.1:{grpc_port}"
    try:
        async with Producer(f"127.0.0.1:{port}", timeout=5.0) as producer:
            sent = await producer.send(
                "NodeRecv", b"m0 from 4.x", keys="k0", tags="TagB", properties={"n": "0"}
            )
        assert sent is not None
        produced = await run_node_client(
            {
                "mode": "produce",
                "endpoints": endpoints,
                "topics": ["NodeRecv"],
                "messages": [
                    {
                        "name": f"m{i}",
                        "topic": "NodeRecv",
                        "body": f"m{i} from 5.x",
                        "tag": "TagA",
                        "keys": [f"k{i}"],
                        "properties": {"n": str(i)},
                    }
                    for i in (1, 2)
                ],
            },
            timeout=20,
        )
        job = {
            "mode": "consume",
            "endpoints": endpoints,
            "group": "NodeSimpleGroup",
            "topic": "NodeRecv",
            "count": 3,
            "awaitMs": 5000,
            "invisibleMs": 10_000,
            "extendMs": 30_000,
            "receiveWithinMs": 10_000,
            "redeliverWithinMs": 20_000,
        }
        report = await run_node_client(job, timeout=40)
    finally:
        await stop(proc)
    assert report["startupMs"] < CLIENT_REQUEST_TIMEOUT_MS
    by_body = {m["body"]: m for m in report["first"]}
    assert sorted(by_body) == ["m0 from 4.x", "m1 from 5.x", "m2 from 5.x"]
    v4 = by_body["m0 from 4.x"]
    assert v4["messageId"] == sent.msg_id and v4["tag"] == "TagB" and v4["keys"] == ["k0"]
    assert v4["properties"] == {"n": "0"} and v4["deliveryAttempt"] == 1
    v5 = by_body["m1 from 5.x"]
    assert v5["messageId"] == produced["receipts"]["m1"]["messageId"]
    assert v5["tag"] == "TagA" and v5["properties"] == {"n": "1"} and v5["topic"] == "NodeRecv"
    # the extended one got a new handle, and its old one is refused (INVALID_RECEIPT_HANDLE)
    assert report["newHandle"] is True
    assert "response-code=40013" in report["staleAck"]
    # the unacked one came back once its 10 s were over, attempt 2; the extended one (30 s) did not
    (back,) = report["back"]
    assert back["body"] == "m0 from 4.x" and back["deliveryAttempt"] == 2
    assert 9_000 <= report["backAfterMs"] < 20_000
    # every message was acked in the end: the group's offsets cover all three
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    assert sum(offsets.queues("NodeSimpleGroup", "NodeRecv").values()) == 3
