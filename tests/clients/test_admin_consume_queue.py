"""QueryAdmin's consume-queue API (DefaultMQPullConsumer's calls) against the real server over the
Java store: every figure is ``java-4.9.7-a.cq-expected.json``'s or what mqadmin printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clients.admin import QueryAdmin
from clients.client import RemotingClient
from clients.errors import MQBrokerError, UsageError
from clients.message_queue import MessageQueue, PullStatus
from protocol.codes import ResponseCode, SerializeType
from server.app import QueryServer


@pytest.fixture(scope="module")
def cq_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / "java-4.9.7-a.cq-expected.json").read_text(encoding="utf-8"))


def _queue(cq_expected: dict[str, Any], topic: str, queue_id: int) -> dict[str, Any]:
    entry = next(t for t in cq_expected["topics"] if t["topic"] == topic)
    return next(q for q in entry["queues"] if q["queueId"] == queue_id)


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_offsets_search_and_pull(
    java_server: QueryServer, cq_expected: dict[str, Any], serialize: SerializeType
) -> None:
    async with QueryAdmin(f"127.0.0.1:{java_server.port}", RemotingClient(serialize_type=serialize)) as admin:
        # printMsg walked the queues in this order (the HashSet of MessageQueue), see its capture.
        queues = await admin.fetch_subscribe_message_queues("TopicA")
        assert [q.queue_id for q in queues] == [3, 1, 2, 0]
        mq = MessageQueue("TopicA", "broker-a", 1)
        expected = _queue(cq_expected, "TopicA", 1)
        assert await admin.min_offset(mq) == expected["minOffsetInQueue"]
        assert await admin.max_offset(mq) == expected["maxOffsetInQueue"]
        assert await admin.earliest_msg_store_time(mq) == expected["earliestMessageTime"]
        for timestamp, offset in expected["offsetByTime"][:50]:
            assert await admin.search_offset(mq, timestamp) == offset
        probe = next(p for p in expected["getMessage"] if p["label"] == "middle")
        result = await admin.pull(mq, "*", probe["offset"], probe["maxMsgNums"])
        assert result.status is PullStatus.FOUND
        assert result.next_begin_offset == probe["nextBeginOffset"]
        assert [m.commit_log_offset for m in result.messages] == [
            m["commitLogOffset"] for m in probe["messages"]
        ]
        # The client adds the answer's min/max offsets to every message, as processPullResult does.
        assert {(m.properties["MIN_OFFSET"], m.properties["MAX_OFFSET"]) for m in result.messages} == {
            ("0", str(expected["maxOffsetInQueue"]))
        }
        at_max = await admin.pull(mq, "*", expected["maxOffsetInQueue"], 32)
        assert (at_max.status, at_max.messages) == (PullStatus.NO_NEW_MSG, [])
        past = await admin.pull(mq, "*", expected["maxOffsetInQueue"] + 5, 32)
        assert (past.status, past.next_begin_offset) == (
            PullStatus.OFFSET_ILLEGAL,
            expected["maxOffsetInQueue"],
        )


async def test_pull_filters_tags_again_and_refuses_bad_arguments(
    java_server: QueryServer, java_expected: dict[str, Any]
) -> None:
    async with QueryAdmin(f"127.0.0.1:{java_server.port}") as admin:
        mq = MessageQueue("TopicA", "broker-a", 1)
        result = await admin.pull(mq, "tag3 || tag1", 0, 32)
        tags = {m["commitLogOffset"]: m["tags"] for m in java_expected["messages"]}
        assert result.messages and all(tags[m.commit_log_offset] == m.tags for m in result.messages)
        assert {m.tags for m in result.messages} <= {"tag1", "tag3"}
        with pytest.raises(UsageError):
            await admin.pull(mq, "*", -1, 32)
        with pytest.raises(MQBrokerError) as refused:
            await admin.pull(MessageQueue("TopicA", "broker-a", 9), "*", 0, 32)
        assert refused.value.code == ResponseCode.SYSTEM_ERROR


async def test_examine_topic_stats(java_server: QueryServer, cq_expected: dict[str, Any]) -> None:
    async with QueryAdmin(f"127.0.0.1:{java_server.port}") as admin:
        rows = await admin.examine_topic_stats("topic_c-1")
    got = sorted((r.queue_id, r.min_offset, r.max_offset, r.last_update_timestamp) for r in rows)
    assert got == [
        (r["queueId"], r["minOffset"], r["maxOffset"], r["lastUpdateTimestamp"])
        for r in cq_expected["topicStats"]["topic_c-1"]
    ]
