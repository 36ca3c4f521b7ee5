"""The official RocketMQ 5 Python client's SimpleConsumer with an SQL92 ``FilterExpression`` against
``serve --writable``'s gRPC port (issue 32).

Six messages are sent by the 5.x Producer: body ``s{i}``, user property ``a`` = i, tag TagA for even
i and TagB for odd. ``a > 2 AND TAGS = 'TagB'`` matches s3 and s5 (worked out by hand: TAGS is one of
the stored properties the broker's filter sees); one receive with room for all of them looks at
every queue, so it must bring exactly those two; ``TAGS CONTAINS 'B' AND a < 3`` (5.x grammar) s1
alone. An expression that does not compile is refused as
the Proxy in front of a broker refuses it: the broker's pop answers SUBSCRIPTION_PARSE_FAILED, which
the Proxy passes on as INTERNAL_SERVER_ERROR.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")
from rocketmq.grpc_protocol import FilterType  # noqa: E402

TOPIC = "GrpcSql"


def config(grpc_port: int) -> object:
    return rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )


def produce(grpc_port: int) -> None:
    producer = rocketmq.Producer(config(grpc_port), (TOPIC,))
    producer.startup()
    try:
        for i in range(6):
            msg = rocketmq.Message()
            msg.topic = TOPIC
            msg.body = b"s%d" % i
            msg.tag = "TagA" if i % 2 == 0 else "TagB"
            msg.add_property("a", str(i))
            producer.send(msg)
    finally:
        producer.shutdown()


def receive_once(grpc_port: int, group: str, expression: str) -> list[bytes] | str:
    """One receive (room for 16) by a SimpleConsumer subscribing ``expression`` by SQL92: the bodies,
    or the refusal's text."""
    consumer = rocketmq.SimpleConsumer(
        config(grpc_port),
        group,
        {TOPIC: rocketmq.FilterExpression(expression, FilterType.SQL)},
        await_duration=5,
    )
    consumer.startup()
    try:
        try:
            got = consumer.receive(16, 15) or []
        except Exception as exc:  # the client raises its own exception type for a refused status
            return str(exc)
        for message in got:
            consumer.ack(message)
        return sorted(m.body for m in got)
    finally:
        consumer.shutdown()


async def test_simple_consumer_by_sql_receives_exactly_the_matching_messages(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, _, grpc_port = await start_writable_grpc(store)
    try:
        await asyncio.wait_for(asyncio.to_thread(produce, grpc_port), 30)
        started = time.monotonic()
        got = await asyncio.wait_for(
            asyncio.to_thread(receive_once, grpc_port, "GrpcSqlGroup", "a > 2 AND TAGS = 'TagB'"), 30
        )
        assert got == [b"s3", b"s5"]
        assert time.monotonic() - started < 5  # found at once, not after a long poll
        # the 5.x grammar's string operators (the broker behind a Proxy is a 5.x one)
        fives = await asyncio.wait_for(
            asyncio.to_thread(receive_once, grpc_port, "GrpcSqlFive", "TAGS CONTAINS 'B' AND a < 3"), 30
        )
        assert fives == [b"s1"]
        refused = await asyncio.wait_for(asyncio.to_thread(receive_once, grpc_port, "GrpcSqlBad", "a >"), 30)
        assert isinstance(refused, str)
        # the client's text of a refused status: "code, message"; 50001 is INTERNAL_SERVER_ERROR
        assert refused == "50001, parse the consumer's subscription failed"
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
