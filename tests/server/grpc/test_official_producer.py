"""The official RocketMQ 5 Python client's Producer against ``serve --writable``'s gRPC port.

The client (``rocketmq-python-client``, pinned in the test extras) starts as against a 5.x Proxy:
QueryRoute for its topics, Telemetry with its Settings (it refuses to start without the answer),
Heartbeat; then sends normal, FIFO (message group), delayed (delivery timestamp) and asynchronous
messages. Each is then looked for through the remoting port, as a 4.x tool would: query by key, by
unique key (the id the client made), and a pull of the queue it went to.

Delays: the 5.1.2 client writes ``Message.delivery_timestamp`` into the Timestamp's seconds field
as it is, so a value in seconds is what it sends as the right instant (a value in milliseconds is a
date tens of thousands of years ahead, which a Proxy refuses with ILLEGAL_DELIVERY_TIME).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")

TOPICS = {"GrpcNormal": None, "GrpcFifo": "FIFO", "GrpcDelay": "DELAY"}


def message(topic: str, body: bytes, key: str, **fields: object) -> object:
    msg = rocketmq.Message()
    msg.topic = topic
    msg.body = body
    msg.keys = key
    for name, value in fields.items():
        setattr(msg, name, value)
    return msg


def produce(grpc_port: int) -> tuple[dict[str, object], int]:
    """Run the official producer (blocking; its own threads and loop): one receipt per message, and
    the delivery time (s) asked for the delayed one: 3 s after its send, whatever the start-up took."""
    config = rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )
    producer = rocketmq.Producer(config, tuple(TOPICS))
    producer.startup()
    try:
        normal = message("GrpcNormal", b"normal body", "k-normal", tag="TagA")
        normal.add_property("color", "red")
        receipts = {"normal": producer.send(normal)}
        for i in range(3):
            receipts[f"fifo-a{i}"] = producer.send(
                message("GrpcFifo", b"a%d" % i, f"k-a{i}", message_group="ga")
            )
        receipts["fifo-b"] = producer.send(message("GrpcFifo", b"b", "k-b", message_group="gb"))
        delay_at = int(time.time()) + 3
        receipts["delay"] = producer.send(
            message("GrpcDelay", b"later", "k-delay", delivery_timestamp=delay_at)
        )
        receipts["async"] = producer.send_async(message("GrpcNormal", b"async body", "k-async")).result(
            timeout=10
        )
        return receipts, delay_at
    finally:
        producer.shutdown()


def queue_of(receipt: object) -> tuple[str, int]:
    queue = receipt.message_queue.message_queue0()  # type: ignore[attr-defined]
    return queue.broker.name, queue.id


async def test_official_producer_sends_are_found_by_the_remoting_side(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, TOPICS)
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        receipts, delay_at = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port), 60)
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            # normal: key, tag, user property and the client's id as UNIQ_KEY
            (found,) = (await admin.query_by_key("GrpcNormal", "k-normal")).messages
            assert found.body == b"normal body"
            assert found.properties["TAGS"] == "TagA" and found.properties["color"] == "red"
            assert found.properties["UNIQ_KEY"] == receipts["normal"].message_id
            assert found.properties["PGROUP"] == "GrpcNormal" and found.properties["CLUSTER"]
            assert abs(int(found.properties["BORN_TIMESTAMP"]) - time.time() * 1000) < 120_000
            (by_id,) = await admin.query_by_unique_key("GrpcNormal", receipts["async"].message_id)
            assert by_id.body == b"async body"
            # FIFO: one group, one queue (the server's choice, as the Proxy's: a receipt names the
            # queue the client picked, the Proxy picks again), in send order; the group is the 5.x
            # sharding key
            broker_name = queue_of(receipts["fifo-a0"])[0]
            placed = [(await admin.query_by_key("GrpcFifo", f"k-a{i}")).messages for i in range(3)]
            queue_ids = {found.queue_id for (found,) in placed}
            assert len(queue_ids) == 1
            queue_id = queue_ids.pop()
            pulled = await admin.pull(MessageQueue("GrpcFifo", broker_name, queue_id), "*", 0, 32)
            group_a = [m for m in pulled.messages if m.properties.get("__SHARDINGKEY") == "ga"]
            assert [m.body for m in group_a] == [b"a0", b"a1", b"a2"]
            assert [m.queue_offset for m in group_a] == [receipts[f"fifo-a{i}"].offset for i in range(3)]
            (b_found,) = (await admin.query_by_key("GrpcFifo", "k-b")).messages
            assert b_found.properties["__SHARDINGKEY"] == "gb"
            # delay: not in the topic at once; delivered there when its time (3 s ahead) has come
            for queue in range(4):
                early = await admin.pull(MessageQueue("GrpcDelay", broker_name, queue), "*", 0, 32)
                assert not early.messages
            deadline = time.monotonic() + 20
            delivered: list = []
            while not delivered and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                for queue in range(4):
                    pulled = await admin.pull(MessageQueue("GrpcDelay", broker_name, queue), "*", 0, 32)
                    delivered += pulled.messages
            (late,) = delivered
            assert late.body == b"later" and late.properties["REAL_TOPIC"] == "GrpcDelay"
            # the 5.x timer wheel: at the asked time, to its precision (1 s), not a 4.x delay level
            assert (
                late.properties["TIMER_DELIVER_MS"] == str(delay_at * 1000) and "DELAY" not in late.properties
            )
            assert delay_at * 1000 <= late.store_timestamp <= delay_at * 1000 + 1000 + 1500
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
