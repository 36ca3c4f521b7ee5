"""Delayed messages of the official RocketMQ 5 Python client against ``serve --writable``: the 5.x
timer wheel, across a clean restart and a kill -9.

The client sends a ``delivery_timestamp``; the server stores it as a 5.x broker behind its Proxy
does (``TIMER_DELIVER_MS``, the message in ``rmq_sys_wheel_timer``) and delivers it into its topic
once the wheel's slot has passed: not before the asked time, at most ``timerPrecisionMs`` (1 s)
after (plus the event loop's and the machine's jitter, allowed here as ``SLACK_MS``). The messages
are looked for through the remoting port (pulls of every queue), where each must be found exactly
once. (The 5.1.2 client writes the timestamp's seconds as given, so the times here are in seconds:
see ``test_official_producer.py``.)
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")

TOPIC = "GrpcTimer"
PRECISION_MS = 1000
SLACK_MS = 1500


def produce(grpc_port: int, delays: dict[bytes, int]) -> dict[bytes, int]:
    """Send one message per body, each due ``delays[body]`` seconds after the producer has started
    (blocking: the client's own threads); the delivery time (s) each was sent with."""
    config = rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )
    producer = rocketmq.Producer(config, (TOPIC,))
    producer.startup()
    try:
        start = int(time.time())
        asked: dict[bytes, int] = {}
        for body, delay in delays.items():
            msg = rocketmq.Message()
            msg.topic = TOPIC
            msg.body = body
            msg.keys = body.decode()
            msg.delivery_timestamp = start + delay
            producer.send(msg)
            asked[body] = start + delay
        return asked
    finally:
        producer.shutdown()


async def topic_messages(port: int) -> list:
    """Every message in the topic's queues now (remoting pulls)."""
    found: list = []
    async with QueryAdmin(f"127.0.0.1:{port}") as admin:
        for queue in await admin.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while True:
                pulled = await admin.pull(queue, "*", offset, 32)
                if not pulled.messages:
                    break
                found += pulled.messages
                offset = pulled.next_begin_offset
    return found


async def wait_for(port: int, count: int, deadline_s: float) -> list:
    """The topic's messages once there are ``count`` of them (or at the deadline), polled every 0.1 s;
    each arrival's wall-clock time is checked against its asked time by the caller."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = await topic_messages(port)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


def check_arrivals(found: list, asked: dict[bytes, int], serving_ms: int = 0) -> None:
    """Each asked message exactly once, stored not before its time and at most a precision after it
    (or after ``serving_ms``, when the server serving then started: one due while no server ran is
    delivered as it starts)."""
    assert sorted(m.body for m in found) == sorted(asked), "each message exactly once"
    for msg in found:
        at_ms = asked[msg.body] * 1000
        assert msg.properties["TIMER_DELIVER_MS"] == str(at_ms)
        latest = max(at_ms, serving_ms) + PRECISION_MS + SLACK_MS
        assert at_ms <= msg.store_timestamp <= latest, (
            f"{msg.body!r} stored at {msg.store_timestamp}, asked for {at_ms}"
        )


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    try:
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        await kill_if_running(proc)


async def test_a_delayed_message_arrives_at_its_time_and_not_before(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "DELAY"})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        asked = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, {b"in-2s": 2}), 60)
        due_ms = asked[b"in-2s"] * 1000
        while time.time() * 1000 < due_ms - 150:
            assert await topic_messages(port) == [], "delivered before its time"
            await asyncio.sleep(0.1)
        found = await wait_for(port, 1, (due_ms - time.time() * 1000 + PRECISION_MS + SLACK_MS) / 1000)
        check_arrivals(found, asked)
        (msg,) = found
        assert msg.properties["REAL_TOPIC"] == TOPIC and int(msg.properties["TIMER_OUT_MS"]) == due_ms - 1000
    finally:
        await stop(proc)


async def test_a_pending_timer_survives_a_restart_and_arrives_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "DELAY"})
    proc, _port, grpc_port = await start_writable_grpc(store)
    try:
        asked = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, {b"late": 4, b"early": 1}), 60)
        while time.time() < asked[b"early"] + 1.2:
            await asyncio.sleep(0.1)  # "early" delivered before the stop (out of queue order), "late" pending
    finally:
        await stop(proc)
    proc, port, _grpc_port = await start_writable_grpc(store)
    serving_ms = int(time.time() * 1000)
    try:
        found = await wait_for(
            port, 2, max(asked[b"late"] - time.time(), 0) + (PRECISION_MS + SLACK_MS) / 1000
        )
        await asyncio.sleep(0.5)  # nothing more comes
        check_arrivals(await topic_messages(port), asked, serving_ms)
        assert len(found) == 2
    finally:
        await stop(proc)


async def test_pending_timers_are_delivered_exactly_once_after_a_kill_9(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "DELAY"})
    # sent later-due first: the ones delivered before the kill sit above a pending one in the
    # timer queue, so only the delivery log's intents (not its watermark) say they were delivered
    delays = {b"d5": 5, b"d1-a": 1, b"d4-a": 4, b"d1-b": 1, b"d4-b": 4}
    proc, _port, grpc_port = await start_writable_grpc(store)
    try:
        asked = await asyncio.wait_for(asyncio.to_thread(produce, grpc_port, delays), 60)
        while time.time() < asked[b"d1-a"] + 1.3:
            await asyncio.sleep(0.1)  # the 1 s ones delivered, the others pending
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    finally:
        await kill_if_running(proc)
    assert (store / "abort").exists()
    proc, port, _grpc_port = await start_writable_grpc(store)
    serving_ms = int(time.time() * 1000)
    try:
        await wait_for(
            port, len(delays), max(asked[b"d5"] - time.time(), 0) + (PRECISION_MS + SLACK_MS) / 1000
        )
        await asyncio.sleep(0.5)  # nothing more comes
        check_arrivals(await topic_messages(port), asked, serving_ms)
    finally:
        await stop(proc)
