"""The sans-IO rules of the gRPC front door: v2 Message -> the Proxy's SEND, queues, routes, settings.

Expected values are written out from the Proxy's and Guava's sources (and Guava's own test vectors
for ``consistentHash``), never computed by the code under test.
"""

from __future__ import annotations

import pytest

from server.grpc.client_settings import consumer_settings, producer_settings
from server.grpc.conversion import (
    SendLimits,
    check_message_type,
    compute_delay_level,
    consistent_hash,
    to_broker_message,
)
from server.grpc.route import TopicRouteConfig, broker, message_queues
from server.grpc.v2 import ClientType, Code, Encoding, MessageType, Permission, definition
from server.grpc.validation import GrpcStatusError, validate_consumer_group, validate_topic

#: The default ``messageDelayLevel`` ("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h").
LEVELS = {
    1: 1_000, 2: 5_000, 3: 10_000, 4: 30_000, 5: 60_000, 6: 120_000, 7: 180_000, 8: 240_000, 9: 300_000,
    10: 360_000, 11: 420_000, 12: 480_000, 13: 540_000, 14: 600_000, 15: 1_200_000, 16: 1_800_000,
    17: 3_600_000, 18: 7_200_000,
}  # fmt: skip
NOW = 1_700_000_000_000


def v2_message(**system: object) -> definition.Message:
    msg = definition.Message(body=b"body")
    msg.topic.name = "T"
    msg.system_properties.message_id = "01ABCDEF"
    for name, value in system.items():
        if name == "keys":
            msg.system_properties.keys.extend(value)  # type: ignore[arg-type]
        else:
            setattr(msg.system_properties, name, value)
    return msg


def refused(msg: definition.Message, limits: SendLimits) -> int:
    with pytest.raises(GrpcStatusError) as caught:
        to_broker_message(msg, peer_host="10.0.0.9:5000", now_ms=NOW, delays=LEVELS, limits=limits)
    return caught.value.code


def test_guava_consistent_hash_vectors() -> None:
    """Guava's ``testConsistentHash_linearCongruentialGeneratorCompatibility``."""
    assert [consistent_hash(i, 100) for i in range(1, 6)] == [55, 62, 8, 45, 59]
    assert consistent_hash(12345, 1) == 0
    # a negative String.hashCode is a negative long: its bits, not its magnitude, seed the generator
    assert all(0 <= consistent_hash(-(2**31) + i, 7) < 7 for i in range(50))


@pytest.mark.parametrize(
    ("wait_ms", "level"), [(-5_000, 1), (0, 1), (999, 1), (1_000, 2), (2_000, 2), (10_000, 4), (10**9, 18)]
)
def test_delay_level_is_the_first_level_longer_than_the_wait(wait_ms: int, level: int) -> None:
    assert compute_delay_level(NOW + wait_ms, NOW, LEVELS) == level


def test_a_full_message_becomes_the_proxys_properties() -> None:
    msg = v2_message(
        tag="TagA", keys=["k1", "k2"], message_group="g", trace_context="00-trace", born_host="1.2.3.4"
    )
    msg.system_properties.born_timestamp.FromMilliseconds(NOW - 7)
    msg.system_properties.message_type = MessageType.FIFO
    msg.user_properties["color"] = "red"
    out = to_broker_message(msg, peer_host="10.0.0.9:5000", now_ms=NOW, delays=LEVELS)
    assert out.properties == {
        "color": "red",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "UNIQ_KEY": "01ABCDEF",
        "RECONSUME_TIME": "0",
        "PGROUP": "T",
        "__SHARDINGKEY": "g",
        "TRACE_CONTEXT": "00-trace",
        "__BORNHOST": "1.2.3.4",
        "BORN_TIMESTAMP": str(NOW - 7),
    }
    assert out.born_timestamp == NOW - 7 and out.sys_flag == 0 and out.message_type == "FIFO"
    header = out.send_header(3)
    assert (header.producer_group, header.topic, header.default_topic, header.queue_id) == (
        "T",
        "T",
        "TBW102",
        3,
    )
    assert header.default_topic_queue_nums == 4 and header.flag == 0 and header.reconsume_times == 0


def test_delay_gzip_and_peer_address() -> None:
    msg = v2_message(body_encoding=Encoding.GZIP)
    msg.system_properties.delivery_timestamp.FromMilliseconds(NOW + 12_000)
    out = to_broker_message(msg, peer_host="10.0.0.9:5000", now_ms=NOW, delays=LEVELS)
    # the Proxy's default (useDelayLevel=false): the time itself, for the broker's timer wheel
    assert out.properties["TIMER_DELIVER_MS"] == "1700000012000" and "DELAY" not in out.properties
    assert out.properties["__BORNHOST"] == "10.0.0.9:5000" and out.sys_flag == 1
    assert out.born_timestamp == NOW and out.message_type == "DELAY"
    # useDelayLevel=true: a level as well (the 5.x broker then drops TIMER_DELIVER_MS and uses it)
    out = to_broker_message(
        msg, peer_host="10.0.0.9:5000", now_ms=NOW, delays=LEVELS, limits=SendLimits(use_delay_level=True)
    )
    assert out.properties["DELAY"] == "4"  # 30 s: the first level over 12 s
    assert out.properties["TIMER_DELIVER_MS"] == "1700000012000"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda m: setattr(m.system_properties, "message_id", " "), Code.ILLEGAL_MESSAGE_ID),
        (lambda m: setattr(m.system_properties, "tag", "a|b"), Code.ILLEGAL_MESSAGE_TAG),
        (lambda m: setattr(m.system_properties, "tag", "  "), Code.ILLEGAL_MESSAGE_TAG),
        (lambda m: setattr(m.system_properties, "tag", "a\x01"), Code.ILLEGAL_MESSAGE_TAG),
        (lambda m: m.system_properties.keys.append("k\n"), Code.ILLEGAL_MESSAGE_KEY),
        (lambda m: setattr(m.system_properties, "message_group", "g\x7f"), Code.ILLEGAL_MESSAGE_GROUP),
        (lambda m: setattr(m.system_properties, "message_group", "g" * 64), Code.ILLEGAL_MESSAGE_GROUP),
        (lambda m: m.user_properties.update({"UNIQ_KEY": "x"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (lambda m: m.user_properties.update({"a": "\x00"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (
            lambda m: m.user_properties.update({f"p{i}": "v" for i in range(129)}),
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
        ),
        (lambda m: m.user_properties.update({"big": "v" * 16_384}), Code.MESSAGE_PROPERTIES_TOO_LARGE),
        (lambda m: setattr(m, "body", b""), Code.MESSAGE_BODY_EMPTY),
        (lambda m: setattr(m, "body", b"x" * 101), Code.MESSAGE_BODY_TOO_LARGE),
        (
            lambda m: m.system_properties.delivery_timestamp.FromMilliseconds(NOW + 86_400_001),
            Code.ILLEGAL_DELIVERY_TIME,
        ),
        (
            lambda m: (
                setattr(m.system_properties, "message_type", MessageType.TRANSACTION),
                m.system_properties.orphaned_transaction_recovery_duration.FromSeconds(3601),
            ),
            Code.BAD_REQUEST,
        ),
    ],
)
def test_bad_messages_get_the_proxys_codes(change, code: int) -> None:
    msg = v2_message()
    change(msg)
    assert refused(msg, SendLimits(max_body_size=100)) == code


def test_message_type_must_match_the_topic() -> None:
    check_message_type("NORMAL", "NORMAL")
    check_message_type("MIXED", "DELAY")
    with pytest.raises(GrpcStatusError) as caught:
        check_message_type("NORMAL", "FIFO")
    assert caught.value.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


@pytest.mark.parametrize(
    "topic", ["", " ", "a b", "x" * 128, "TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"]
)
def test_illegal_topics(topic: str) -> None:
    with pytest.raises(GrpcStatusError) as caught:
        validate_topic(topic)
    assert caught.value.code == Code.ILLEGAL_TOPIC


def test_consumer_groups() -> None:
    validate_consumer_group("GID_orders")
    for bad in ("", "a/b", "CID_RMQ_SYS_TRANS", "g" * 256):
        with pytest.raises(GrpcStatusError) as caught:
            validate_consumer_group(bad)
        assert caught.value.code == Code.ILLEGAL_CONSUMER_GROUP


def _queues(config: TopicRouteConfig) -> list[tuple[int, int]]:
    topic = definition.Resource(name="T")
    return [(q.id, q.permission) for q in message_queues(topic, config, broker("b", "127.0.0.1", 8081))]


def test_route_queues_split_by_perm_as_the_proxy_does() -> None:
    rw, r, w, n = Permission.READ_WRITE, Permission.READ, Permission.WRITE, Permission.NONE
    assert _queues(TopicRouteConfig(4, 2, 6)) == [(0, r), (1, r), (2, rw), (3, rw)]
    assert _queues(TopicRouteConfig(1, 3, 6)) == [(0, w), (1, w), (2, rw)]
    assert _queues(TopicRouteConfig(2, 2, 4)) == [(0, r), (1, r)]
    assert _queues(TopicRouteConfig(2, 3, 2)) == [(0, w), (1, w), (2, w)]
    assert _queues(TopicRouteConfig(2, 3, 0)) == [(0, n), (1, n), (2, n)]
    (queue,) = message_queues(
        definition.Resource(name="T"), TopicRouteConfig(1, 1, 6, "MIXED"), broker("b", "h.example", 9)
    )
    assert list(queue.accept_message_types) == [1, 2, 3, 4]
    assert queue.broker.endpoints.addresses[0].port == 9 and queue.broker.endpoints.scheme == 3  # DOMAIN_NAME


def test_settings_answers() -> None:
    client = definition.Settings(client_type=ClientType.PRODUCER)
    client.publishing.topics.add(name="T")
    answer = producer_settings(client, 4096)
    assert answer.backoff_policy.max_attempts == 3
    assert answer.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert answer.backoff_policy.exponential_backoff.max.ToMilliseconds() == 1000
    assert answer.publishing.max_body_size == 4096 and answer.publishing.validate_message_type
    assert [t.name for t in answer.publishing.topics] == ["T"] and not answer.metric.on
    consumer = definition.Settings(client_type=ClientType.SIMPLE_CONSUMER)
    consumer.subscription.group.name = "G"
    answer = consumer_settings(consumer, None)
    assert answer.subscription.receive_batch_size == 32
    assert answer.subscription.long_polling_timeout.ToMilliseconds() == 20_000
    assert answer.backoff_policy.max_attempts == 17
    assert answer.backoff_policy.customized_backoff.next[0].ToMilliseconds() == 1_000
    assert len(answer.backoff_policy.customized_backoff.next) == 18


def test_a_transactional_message_is_a_half_message() -> None:
    """``buildSysFlag`` (prepared: 4) and ``buildMessageProperty``: TRAN_MSG and the recovery
    duration as the check immunity in seconds."""
    msg = v2_message(message_type=MessageType.TRANSACTION)
    msg.system_properties.orphaned_transaction_recovery_duration.FromSeconds(30)
    out = to_broker_message(msg, peer_host="10.0.0.9:5000", now_ms=NOW, delays=LEVELS)
    assert out.sys_flag == 4 and out.message_type == "TRANSACTION"
    assert out.properties["TRAN_MSG"] == "true"
    assert out.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    plain = to_broker_message(
        v2_message(message_type=MessageType.TRANSACTION), peer_host="h:1", now_ms=NOW, delays=LEVELS
    )
    assert "CHECK_IMMUNITY_TIME_IN_SECONDS" not in plain.properties
