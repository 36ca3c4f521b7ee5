"""Resetting a group's offsets by time (``Broker2Client.resetOffset``, ``mqadmin resetOffsetByTime``).

The broker computes, for each write queue of the topic, the offset of the first message stored at
or after the timestamp (the queue's end for timestamp -1, 0 when the search finds nothing), and
takes it when forced or when it lies before the group's committed offset (else the committed offset
stays). It does not commit these offsets itself: it sends them to every online consumer of the
group (RESET_CONSUMER_CLIENT_OFFSET), which moves its own offsets and commits them. The refusals,
checked in this order: no topic config (SYSTEM_ERROR), a queue with no committed offset of the
group (SYSTEM_ERROR, "THe consumer group <G> not exist", the broker's spelling), no consumer
online (CONSUMER_NOT_ONLINE: mqadmin then falls back to committing the offsets itself through
GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP and UPDATE_CONSUMER_OFFSET).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.admin_bodies import QueueKey
from protocol.codes import ResponseCode
from server.broker.controller import BrokerController

#: ``MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()``: older clients cannot reset.
V3_0_7_SNAPSHOT = 28


def no_topic_remark(topic: str) -> str:
    return f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"


def group_not_exist_remark(group: str) -> str:
    return f"THe consumer group <{group}> not exist"


def not_online_remark(group: str, topic: str, timestamp: int) -> str:
    return (
        f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}"
    )


@dataclass(frozen=True, slots=True)
class ResetRefused:
    """The broker's refusal: its response code and remark."""

    code: int
    remark: str


def reset_offsets(
    broker: BrokerController, topic: str, group: str, timestamp: int, force: bool, broker_name: str
) -> list[tuple[QueueKey, int]] | ResetRefused:
    """The offset table sent to the group's consumers, or why there is none (before anyone is asked)."""
    config = broker.store.topic_config(topic)
    if config is None:
        return ResetRefused(ResponseCode.SYSTEM_ERROR, no_topic_remark(topic))
    reader = broker.store.reader
    table: list[tuple[QueueKey, int]] = []
    for queue_id in range(config.write_queue_nums):
        committed = broker.offsets.query(group, topic, queue_id)
        if committed == -1:
            return ResetRefused(ResponseCode.SYSTEM_ERROR, group_not_exist_remark(group))
        if timestamp == -1:
            target = reader.max_offset(topic, queue_id)
        else:
            target = reader.offset_by_time(topic, queue_id, timestamp)
        target = max(target, 0)
        table.append(
            (QueueKey(topic, broker_name, queue_id), target if force or target < committed else committed)
        )
    return table
