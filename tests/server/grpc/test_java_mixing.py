"""Mixing the 5.x and 4.x clients on one ``serve --writable``: the official Python client 5.1.2 on the
gRPC port, the official Java client 4.9.7 (``RMQ_ROCKETMQ_HOME``) on the remoting port.

- A message the 5.x producer sent (normal; FIFO with a message group; several keys and a tag) is
  consumed by the 4.x push consumer with its body, keys, tag and user properties, its message group
  as ``__SHARDINGKEY`` and its ``UNIQ_KEY`` (the 4.x ``msgId``) equal to the 5.x message id: the
  Proxy stores a 5.x message as ordinary 4.x properties (``GrpcConverter``/``SendMessageActivity``).
- A message the 4.x producer sent is received by the 5.x SimpleConsumer with the same id (its
  ``UNIQ_KEY``), tag, keys and properties.
- The real ``mqadmin queryMsgByKey`` finds a 5.x message by its key, under the 5.x message id.

The 5.x clients never create topics (a send to a missing one is TOPIC_NOT_FOUND), so the topics are
in the store's ``topics.json`` from the start, as an operator would create them with mqadmin.
The Java side runs ``tests/support/java/Scenarios.java``'s ``consume5`` and ``produce4`` (compiled
once per session by the ``kit`` fixture); each JVM is killed past ``JVM_TIMEOUT``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.support.java_scenarios import JavaKit, WritableServer, java_available
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")
pytestmark = pytest.mark.skipif(java_available() is not None, reason=str(java_available()))

#: Seconds a scenario JVM may run (start, consume, shut down) before it is killed.
JVM_TIMEOUT = 40
#: A MIXED topic takes normal and FIFO messages alike, so one 4.x consumer reads both kinds.
MIXED_TOPIC = "MixFrom5"
NORMAL_TOPIC = "MixFrom4"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WritableServer]:
    root = tmp_path_factory.mktemp("mix")
    write_topics(root / "store", {MIXED_TOPIC: "MIXED", NORMAL_TOPIC: None})
    served = WritableServer(root / "store", log=root / "serve.log").start()
    try:
        assert served.grpc_port > 0
        yield served
    finally:
        assert served.stop() == 0


def config(server: WritableServer) -> object:
    return rocketmq.ClientConfiguration(
        f"127.0.0.1:{server.grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )


def send_v5(server: WritableServer, topic: str, messages: list[dict]) -> list[str]:
    """Each of ``messages`` (body, tag, keys, group, properties) sent by the 5.x producer; the ids."""
    producer = rocketmq.Producer(config(server), (topic,))
    producer.startup()
    try:
        ids = []
        for spec in messages:
            msg = rocketmq.Message()
            msg.topic = topic
            msg.body = spec["body"].encode()
            if "tag" in spec:
                msg.tag = spec["tag"]
            for key in spec.get("keys", ()):
                msg.keys = key  # the setter adds one key to the message's set
            if "group" in spec:
                msg.message_group = spec["group"]
            for name, value in spec.get("properties", {}).items():
                msg.add_property(name, value)
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


def run_id() -> str:
    return f"m{uuid.uuid4().hex[:10]}"


def test_5x_sends_are_consumed_by_the_4x_push_consumer_with_ids_and_properties(
    kit: JavaKit, server: WritableServer
) -> None:
    started = time.monotonic()
    sent = [
        {"body": "v5 normal", "tag": "TagA", "keys": ["k-normal"], "properties": {"n": "1"}},
        {"body": "v5 fifo", "tag": "TagF", "keys": ["k-fifo"], "group": "order-7"},
        {
            "body": "v5 keyed",
            "tag": "TagK",
            "keys": ["ka", "kb"],
            "properties": {"color": "green", "city": "Z\u00fcrich \u5317\u4eac"},
        },
    ]
    ids = send_v5(server, MIXED_TOPIC, sent)
    obs = kit.run(server.address, "consume5", run_id(), MIXED_TOPIC, "3", timeout=JVM_TIMEOUT)
    assert obs.get("error") is None and obs["allWithinWait"], obs
    got = obs["messages"]
    assert sorted(got) == ["v5 fifo", "v5 keyed", "v5 normal"]
    for spec, message_id in zip(sent, ids, strict=True):
        seen = got[spec["body"]]
        assert seen["msgId"] == seen["uniqKey"] == message_id
        assert seen["tags"] == spec["tag"]
        assert sorted(seen["keys"].split(" ")) == spec["keys"]
        assert seen["shardingKey"] == spec.get("group")
        for name, value in spec.get("properties", {}).items():
            assert seen["properties"][name] == value
        assert seen["reconsumeTimes"] == 0
        assert abs(seen["bornTimestamp"] - time.time() * 1000) < 120_000
    assert time.monotonic() - started < JVM_TIMEOUT


def test_mqadmin_query_by_key_finds_the_5x_message_under_its_id(kit: JavaKit, server: WritableServer) -> None:
    started = time.monotonic()
    key = f"k-query-{run_id()}"
    (message_id,) = send_v5(server, NORMAL_TOPIC, [{"body": "find me", "tag": "TagQ", "keys": [key]}])
    out = kit.mqadmin(
        "queryMsgByKey", "-n", server.address, "-t", NORMAL_TOPIC, "-k", key, timeout=JVM_TIMEOUT
    )
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert [row[0] for row in rows] == [message_id], out
    assert time.monotonic() - started < JVM_TIMEOUT


def test_4x_java_sends_are_received_by_the_5x_simple_consumer_with_their_ids(
    kit: JavaKit, server: WritableServer
) -> None:
    """Two messages of the 4.x producer: one with keys and user properties (one not ASCII), one whose
    6000-byte body the 4.x client compressed (zlib) and the 5.x client must get inflated."""
    started = time.monotonic()
    rid = run_id()
    sent = kit.run(server.address, "produce4", rid, NORMAL_TOPIC, timeout=JVM_TIMEOUT)
    assert (
        sent.get("error") is None and sent["fro"]["sendStatus"] == sent["big"]["sendStatus"] == "SEND_OK"
    ), sent
    consumer = rocketmq.SimpleConsumer(
        config(server), f"MixGroup{rid}", {NORMAL_TOPIC: rocketmq.FilterExpression("TagJ")}, await_duration=5
    )
    consumer.startup()
    try:
        got: dict[bytes, object] = {}
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            for message in consumer.receive(16, 15) or []:
                consumer.ack(message)
                got[message.body[:3]] = message
    finally:
        consumer.shutdown()
    assert sorted(got) == [b"big", b"fro"]
    small, large = got[b"fro"], got[b"big"]
    assert small.body == b"from java 4" and small.message_id == sent["fro"]["msgId"] == sent["fro"]["uniqKey"]
    assert small.tag == "TagJ" and set(small.keys) == {"kj1", "kj2"}
    assert small.properties["color"] == "blue" and small.properties["city"] == "Z\u00fcrich \u5317\u4eac"
    assert small.delivery_attempt == 1 and small.topic == NORMAL_TOPIC and small.message_group is None
    assert abs(small.born_timestamp - time.time() * 1000) < 120_000
    expected = b"big " + bytes(ord("a") + n % 26 for n in range(4, 6000))  # as produce4 builds it
    assert large.body == expected and sent["big"]["bodyLength"] == 6000
    assert large.message_id == sent["big"]["msgId"] and not large.corrupted
    assert time.monotonic() - started < JVM_TIMEOUT
