"""What clients may make the broker create by themselves (issue 31, item 3): the attacks as tests.

One connection's heartbeat with thousands of groups, offset updates planting groups, SENDs creating
topics: each is cut at its documented limit with the broker's refusal, and what an operator creates
or what the tables already hold is never refused."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.heartbeat import ClientHeartbeat, decode_heartbeat
from server.broker.controller import JOIN_LINES_PER_HEARTBEAT, BrokerController, ConsumeSettings
from server.broker.creation_limits import CreationLimits
from server.broker.writable_store import WritableStore
from server.remoting.channel import CURRENT_CHANNEL
from server.remoting.processors.consumer_manage import ConsumerOffsetProcessor
from store.config.store_config import StoreConfig
from tests.support.channels import FakeChannel
from tests.support.consume_side import consumer, heartbeat


def open_broker(root: Path, limits: CreationLimits, *, auto_groups: bool = True) -> BrokerController:
    store = WritableStore(StoreConfig.for_store(root, mapped_file_size_commit_log=1024 * 1024))
    settings = ConsumeSettings(auto_create_subscription_group=auto_groups, creation=limits)
    return BrokerController(store, settings=settings)


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[BrokerController]]:
    opened: list[BrokerController] = []
    yield opened
    for broker in opened:
        broker.close()
        broker.store.close()


def beat(broker: BrokerController, channel: FakeChannel, groups: list[str]) -> None:
    cons = [
        consumer(
            g, {"T": "*"}, type_="CONSUME_PASSIVELY", model="CLUSTERING", where="CONSUME_FROM_LAST_OFFSET"
        )
        for g in groups
    ]
    broker.heartbeat(channel, decode_heartbeat(heartbeat("c", cons), ClientHeartbeat), "JAVA", 1)


def test_one_connections_heartbeats_create_at_most_its_share(
    tmp_path: Path, made: list[BrokerController]
) -> None:
    broker = open_broker(tmp_path / "s", CreationLimits(per_connection=10))
    made.append(broker)
    groups_before = len(broker.groups.groups)
    hostile, other = FakeChannel(), FakeChannel()
    beat(broker, hostile, [f"G{i:04d}" for i in range(500)])
    # a group and its %RETRY% topic each count: 5 groups with their topics
    assert len(broker.groups.groups) - groups_before == 5
    assert {f"G{i:04d}" for i in range(5)} <= set(broker.groups.groups)
    assert {f"%RETRY%G{i:04d}" for i in range(5)} <= set(broker.store.topics.topics)
    assert "%RETRY%G0005" not in broker.store.topics.topics
    # every member is still registered (the heartbeat is answered), only configs were not made
    assert broker.consumers.get("G0499") is not None
    beat(broker, other, ["Other"])  # another connection has its own share
    assert broker.groups.get("Other") is not None
    hostile.lose()  # its count goes with it
    beat(broker, FakeChannel(), ["Again"])
    assert broker.groups.get("Again") is not None
    assert broker.creation.refused >= 495


def test_the_broker_wide_group_and_topic_limits(tmp_path: Path, made: list[BrokerController]) -> None:
    probe = open_broker(tmp_path / "probe", CreationLimits())
    held_groups, held_topics = len(probe.groups.groups), len(probe.store.topics.topics)
    probe.close()
    probe.store.close()
    broker = open_broker(
        tmp_path / "s", CreationLimits(max_groups=held_groups + 3, max_topics=held_topics + 2)
    )
    made.append(broker)
    for i in range(10):
        beat(broker, FakeChannel(), [f"G{i}"])
    assert len(broker.groups.groups) == held_groups + 3
    assert len(broker.store.topics.topics) == held_topics + 2  # two retry topics, then no more
    # a SEND to an unknown topic past the limit: not created (the SEND answers TOPIC_NOT_EXIST)
    assert broker.store.create_topic_in_send("NewTopic", "TBW102", 4) is None
    # an operator's topic is not a client's creation
    broker.store.create_topic("ByOperator", 4)
    assert broker.store.topic_config("ByOperator") is not None


def update_offset(processor: ConsumerOffsetProcessor, channel: FakeChannel, group: str) -> RemotingCommand:
    request = RemotingCommand(
        code=RequestCode.UPDATE_CONSUMER_OFFSET,
        ext_fields={"consumerGroup": group, "topic": "T", "queueId": "0", "commitOffset": "5"},
    )
    token = CURRENT_CHANNEL.set(channel)  # type: ignore[arg-type]
    try:
        return processor.update_consumer_offset(request)
    finally:
        CURRENT_CHANNEL.reset(token)


def test_offset_updates_do_not_plant_groups(tmp_path: Path, made: list[BrokerController]) -> None:
    broker = open_broker(tmp_path / "s", CreationLimits(per_connection=3))
    made.append(broker)
    processor = ConsumerOffsetProcessor(broker, physical_memory=1 << 30)
    channel = FakeChannel()
    answers = [update_offset(processor, channel, f"Planted{i}").code for i in range(20)]
    assert answers == [ResponseCode.SUCCESS] * 3 + [ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST] * 17
    assert broker.offsets.group_count() == 3
    # a group that has offsets already is always committed
    assert update_offset(processor, channel, "Planted0").code == ResponseCode.SUCCESS


def test_without_auto_creation_an_unknown_groups_offset_is_refused(
    tmp_path: Path, made: list[BrokerController]
) -> None:
    broker = open_broker(tmp_path / "s", CreationLimits(), auto_groups=False)
    made.append(broker)
    processor = ConsumerOffsetProcessor(broker, physical_memory=1 << 30)
    answer = update_offset(processor, FakeChannel(), "Unknown")
    assert (answer.code, answer.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "Group Unknown not exist!",
    )
    assert broker.offsets.offsets == {}
    # a group the broker knows (its config, made by an operator) is committed
    from store.config.subscription_groups import SubscriptionGroupConfig

    broker.groups.put(SubscriptionGroupConfig("Known"))
    assert update_offset(processor, FakeChannel(), "Known").code == ResponseCode.SUCCESS
    assert broker.offsets.query("Known", "T", 0) == 5


def test_a_heartbeat_with_thousands_of_groups_writes_a_bounded_number_of_log_lines(
    tmp_path: Path, made: list[BrokerController], caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the soak with issue 31's attacks: one heartbeat naming 3,000 groups wrote 3,000 "joined
    group" lines (12 MB of serve.log in 2 minutes). The first groups are listed, the rest counted."""
    broker = open_broker(tmp_path / "s", CreationLimits())
    made.append(broker)
    with caplog.at_level(logging.INFO, logger="server.broker"):
        beat(broker, FakeChannel("10.0.0.9:4242"), [f"Flood{i}" for i in range(3000)])
    joins = [r.getMessage() for r in caplog.records if "joined" in r.getMessage()]
    assert len(joins) == JOIN_LINES_PER_HEARTBEAT + 1
    assert joins[0] == "consumer c joined group Flood0 from 10.0.0.9:4242"
    assert joins[-1] == (
        f"consumer c joined {3000 - JOIN_LINES_PER_HEARTBEAT} more groups from 10.0.0.9:4242 "
        "(one heartbeat; not listed one by one)"
    )
    assert broker.consumers.get("Flood2999") is not None  # every group joined all the same
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="server.broker"):  # a usual heartbeat: its line as before
        beat(broker, FakeChannel("10.0.0.9:4242"), ["Flood0"])
        beat(broker, FakeChannel("10.0.0.9:4243"), ["Flood1"])
    assert [r.getMessage() for r in caplog.records if "joined" in r.getMessage()] == [
        "consumer c joined group Flood0 from 10.0.0.9:4242",
        "consumer c joined group Flood1 from 10.0.0.9:4243",
    ]
