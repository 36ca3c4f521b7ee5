"""The OFFSET_MOVED_EVENT record a master broker appends when it answers a pull PULL_OFFSET_MOVED.

``PullMessageProcessor.generateOffsetMovedEvent`` (4.9.7): for every PULL_OFFSET_MOVED answer (an
offset past the queue's end or below its start, an empty queue asked at an offset other than 0) the
master puts one message into ``OFFSET_MOVED_EVENT`` queue 0, before the answer is sent. No client
reads that topic, but the record takes CommitLog space, so leaving it out shifts the offset of every
later record (and so every offset message id) away from what the broker would have written: the
golden replay of issue #19 (``tests/server/test_consume_side_golden.py``) caught it as a 293-byte gap.

The record: tags and keys the consumer group, ``DELAY`` ``0`` (``setDelayTimeLevel(0)`` puts it), the
properties string built by ``messageProperties2String`` (no trailing separator, unlike what clients
send), the body the event as fastjson writes it (fields sorted, nulls left out), born and stored by
the broker's own address, born now.
"""

from __future__ import annotations

import json

from protocol.java_hashmap import JavaHashMap
from protocol.message_properties import properties_to_string
from store.write.writer import StoreRecord

#: ``TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT``.
OFFSET_MOVED_EVENT_TOPIC = "OFFSET_MOVED_EVENT"


def offset_moved_event_body(
    group: str | None,
    topic: str | None,
    queue_id: int,
    broker_name: str,
    offset_request: int,
    offset_new: int,
) -> bytes:
    """``OffsetMovedEvent.encode()``: fastjson's ``toJSONString``, keys sorted, null fields left out,
    compact, non-ASCII as is."""
    queue = {"brokerName": broker_name, "queueId": queue_id, "topic": topic}
    event = {
        "consumerGroup": group,
        "messageQueue": {k: v for k, v in queue.items() if v is not None},
        "offsetNew": offset_new,
        "offsetRequest": offset_request,
    }
    compact = {k: v for k, v in event.items() if v is not None}
    return json.dumps(compact, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def offset_moved_record(
    group: str | None,
    topic: str | None,
    queue_id: int,
    broker_name: str,
    offset_request: int,
    offset_new: int,
    *,
    broker_host: str,
    broker_port: int,
    now: int,
) -> StoreRecord:
    """The record ``generateOffsetMovedEvent`` puts for one PULL_OFFSET_MOVED answer."""
    props = JavaHashMap()
    if group is not None:  # a null value is left out of the properties string
        props.put("TAGS", group)
    props.put("DELAY", "0")
    if group is not None:
        props.put("KEYS", group)
    return StoreRecord(
        OFFSET_MOVED_EVENT_TOPIC,
        offset_moved_event_body(group, topic, queue_id, broker_name, offset_request, offset_new),
        properties_to_string(props.ordered()),
        queue_id=0,
        born_timestamp=now,
        born_host=broker_host,
        born_port=broker_port,
        store_host=broker_host,
        store_port=broker_port,
    )
