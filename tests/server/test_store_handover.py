"""One store handed between ``serve --writable`` and the real 4.9.7 broker, both ways (issue 19).

A store is only portable if what one side committed the other resumes from: topics with their queue
counts and perms (``config/topics.json``), consumer groups and their settings
(``config/subscriptionGroup.json``) and committed offsets (``config/consumerOffset.json``, written by
both at stop). Each test writes through one side over raw requests, stops it with SIGTERM, starts
the other on the same store and asks it the same questions; the answers expected are the values the
test committed, and where nothing was committed, what the first side answered.

The real broker runs as ``tests/support/real_broker.py`` starts it (about 10 s to boot); ours runs as
the user runs it, ``serve --writable`` in a child process. The config files the real broker wrote
are also read back and written again by ``store/config``: the text must come out byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from store.config.config_file import relaxed_json
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.subscription_groups import SubscriptionGroupTable
from store.config.topics import TopicTable
from tests.support.handover import (
    COMMITTED,
    QUEUES,
    TOPIC,
    all_groups,
    all_topics,
    commit,
    heartbeat_body,
    max_offsets,
    offsets,
    ok,
    queue_config,
    send,
)
from tests.support.harness import RawClient
from tests.support.real_broker import copy_rmq, needs_java, real_broker
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_rmq(tmp_path_factory.mktemp("rmq"))


@asynccontextmanager
async def ours(store: Path) -> AsyncIterator[RawClient]:
    """``serve --writable`` on ``store`` and a client to it; SIGTERM after the block must exit 0."""
    proc, port = await start_writable(store, log=store.parent / "serve.log")
    client = await RawClient.connect("127.0.0.1", port)
    try:
        yield client
        await client.close()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        await kill_if_running(proc)


@asynccontextmanager
async def theirs(rmq: Path, store: Path) -> AsyncIterator[RawClient]:
    """The real broker on ``store`` and a client to it; stopped by SIGTERM after the block."""
    with real_broker(rmq, store) as broker:
        client = await RawClient.connect("127.0.0.1", broker.port)
        try:
            yield client
        finally:
            await client.close()


def expected_offsets(group: str, uncommitted: list[tuple[int, str | None]]) -> list[tuple[int, str | None]]:
    """The committed offsets, and for other queues what the first side answered."""
    return [
        (ResponseCode.SUCCESS, str(COMMITTED[group][q])) if q in COMMITTED[group] else uncommitted[q]
        for q in range(QUEUES)
    ]


@needs_java
async def test_the_real_broker_resumes_what_serve_writable_committed(rmq: Path, tmp_path: Path) -> None:
    """Ours on an empty store: a topic of 8 queues by SEND, offsets of two groups, a heartbeat; the
    real broker started on the store afterwards answers the same offsets and knows the topic (8 and
    8 queues, perm RW), the heartbeat's group, and the group's ``%RETRY%`` topic."""
    store = tmp_path / "store"
    async with ours(store) as client:
        for queue_id in range(QUEUES):
            for n in range(3):
                await send(client, TOPIC, queue_id, f"m{queue_id}-{n}".encode())
        for group, queues in COMMITTED.items():
            for queue_id, offset in queues.items():
                await commit(client, group, TOPIC, queue_id, offset)
        await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c1", "GroupA", TOPIC))
        before = {group: await offsets(client, group, TOPIC) for group in COMMITTED}
        assert await max_offsets(client, TOPIC) == ["3"] * QUEUES
    assert {group: expected_offsets(group, before[group]) for group in COMMITTED} == before
    ours_wrote = (store / "config" / "consumerOffset.json").read_text()

    async with theirs(rmq, store) as client:
        assert {group: await offsets(client, group, TOPIC) for group in COMMITTED} == before
        assert await max_offsets(client, TOPIC) == ["3"] * QUEUES
        topics = await all_topics(client)
        assert queue_config(topics[TOPIC]) == (8, 8, 6)
        assert queue_config(topics["%RETRY%GroupA"]) == (1, 1, 6)
        groups = await all_groups(client)
        assert "GroupA" in groups
        assert groups["GroupA"]["retryMaxTimes"] == 16 and groups["GroupA"]["consumeEnable"] is True
    # The broker wrote the offsets again at its stop: the same table, in the same bytes.
    assert (store / "config" / "consumerOffset.json").read_text() == ours_wrote


@needs_java
async def test_serve_writable_resumes_what_the_real_broker_committed(rmq: Path, tmp_path: Path) -> None:
    """The real broker on an empty store: a topic created by UPDATE_AND_CREATE_TOPIC (8 queues) and
    a read-only one, a group created with settings of its own, offsets of two groups; ours started on
    the store afterwards answers the same offsets and max offsets, routes the topics with their
    queue counts and perms, and refuses the group's broadcast pull as the broker did."""
    store = tmp_path / "store"
    create = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
              "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
              "order": "false"}  # fmt: skip
    read_only = {**create, "topic": "ReadOnlyTopic", "readQueueNums": "2", "writeQueueNums": "2", "perm": "4"}
    group_j = {"groupName": "GroupB", "consumeEnable": True, "consumeFromMinEnable": True,
               "consumeBroadcastEnable": False, "retryQueueNums": 1, "retryMaxTimes": 5, "brokerId": 0,
               "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}  # fmt: skip
    pull = {"consumerGroup": "GroupB", "topic": TOPIC, "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "1000",
            "subVersion": "1"}  # fmt: skip
    async with theirs(rmq, store) as client:
        await ok(client, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        await ok(client, RequestCode.UPDATE_AND_CREATE_TOPIC, read_only)
        await ok(client, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(group_j).encode())
        for queue_id in range(QUEUES):
            for n in range(3):
                await send(client, TOPIC, queue_id, f"m{queue_id}-{n}".encode())
        for group, queues in COMMITTED.items():
            for queue_id, offset in queues.items():
                await commit(client, group, TOPIC, queue_id, offset)
        await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c1", "GroupA", TOPIC))
        await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c2", "GroupB", TOPIC, "BROADCASTING"))
        refused = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, pull))
        before = {group: await offsets(client, group, TOPIC) for group in COMMITTED}
        assert await max_offsets(client, TOPIC) == ["3"] * QUEUES
    assert refused.code == ResponseCode.NO_PERMISSION
    assert {group: expected_offsets(group, before[group]) for group in COMMITTED} == before
    check_broker_files_round_trip(store / "config")

    async with ours(store) as client:
        assert {group: await offsets(client, group, TOPIC) for group in COMMITTED} == before
        assert await max_offsets(client, TOPIC) == ["3"] * QUEUES
        for topic, expected in ((TOPIC, (8, 8, 6)), ("ReadOnlyTopic", (2, 2, 4))):
            route = await ok(client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            (queue_data,) = relaxed_json(bytes(route.body or b"").decode())["queueDatas"]  # type: ignore[index]
            assert (queue_data["readQueueNums"], queue_data["writeQueueNums"], queue_data["perm"]) == expected
        await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c2", "GroupB", TOPIC, "BROADCASTING"))
        again = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, pull))
        assert (again.code, again.remark) == (refused.code, refused.remark)


def check_broker_files_round_trip(config_dir: Path) -> None:
    """Each config file the broker wrote, read by ours and written again with its entries put in the
    other order (the order of the broker's maps is their hash buckets, not insertion), is the same
    text, byte for byte."""
    offsets_file = config_dir / "consumerOffset.json"
    offsets = ConsumerOffsetTable.load(offsets_file)
    assert len(offsets.offsets) == 2
    offsets.offsets = dict(reversed(offsets.offsets.items()))
    assert offsets.text() == offsets_file.read_text()
    groups_file = config_dir / "subscriptionGroup.json"
    groups = SubscriptionGroupTable.load(groups_file)
    assert {"GroupA", "GroupB"} <= set(groups.groups)
    groups.groups = dict(reversed(groups.groups.items()))
    # 4.9.7's decode keeps no data version (the loaded table's is new): the file's, for the comparison
    version = relaxed_json(groups_file.read_text())["dataVersion"]  # type: ignore[index]
    groups.counter, groups.timestamp = version["counter"], version["timestamp"]
    assert groups.text() == groups_file.read_text()
    topics_file = config_dir / "topics.json"
    topics = TopicTable.load(topics_file)
    assert {TOPIC, "ReadOnlyTopic", "%RETRY%GroupA", "%RETRY%GroupB"} <= set(topics.topics)
    topics.topics = dict(reversed(topics.topics.items()))
    topics.path = config_dir.parent / "topics.copy.json"
    topics.save()
    assert topics.path.read_text() == topics_file.read_text()


async def test_a_restart_of_serve_writable_keeps_offsets_groups_and_topics(tmp_path: Path) -> None:
    """Ours stopped by SIGTERM and started again on the same store answers the committed offsets and
    still routes the topic; the heartbeat's group is in the file it reads at start."""
    store = tmp_path / "store"
    async with ours(store) as client:
        for queue_id in range(QUEUES):
            await send(client, TOPIC, queue_id, b"x")
        for group, queues in COMMITTED.items():
            for queue_id, offset in queues.items():
                await commit(client, group, TOPIC, queue_id, offset)
        await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c1", "GroupA", TOPIC))
        before = {group: await offsets(client, group, TOPIC) for group in COMMITTED}
    assert {group: expected_offsets(group, before[group]) for group in COMMITTED} == before
    for _ in range(2):
        async with ours(store) as client:
            assert {group: await offsets(client, group, TOPIC) for group in COMMITTED} == before
            assert await max_offsets(client, TOPIC) == ["1"] * QUEUES
            route = await ok(client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%GroupA"})
            assert route.code == ResponseCode.SUCCESS
    groups = relaxed_json((store / "config" / "subscriptionGroup.json").read_text())
    assert "GroupA" in groups["subscriptionGroupTable"]  # type: ignore[index]
