"""What CONSUMER_SEND_MSG_BACK stores: a failed message's retry record, or its dead letter.

A push consumer that could not consume a message hands it back by its CommitLog offset; the broker
(``SendMessageProcessor.consumerSendMsgBack``, 4.9.7) reads the original record and stores a copy:

- into the group's ``%RETRY%`` topic, on a random queue of the group's ``retryQueueNums``, with delay
  level ``3 + reconsumeTimes`` when the client asked for level 0 (so it goes through
  ``SCHEDULE_TOPIC_XXXX`` and the consumer, which subscribes its retry topic, gets it back later);
- into the group's ``%DLQ%`` topic (one queue, never scheduled) once the original was consumed
  ``maxReconsumeTimes`` times already, or when the client asked for a negative delay level.

The copy keeps the original's body as stored, flag, sysFlag, born and store hosts and born time,
counts one more reconsume, and carries the original's properties plus ``RETRY_TOPIC`` (the topic the
message was first sent to, set once), ``WAIT=false``, ``DELAY`` and ``ORIGIN_MESSAGE_ID`` (the first
record's offset id, kept across retries). This module holds those rules without files or sockets,
so the record can be checked from a given original; the processor reads and appends.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from protocol.java_hashmap import JavaHashMap
from protocol.message import MessageExt
from protocol.message_flags import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_TYPE_MASK
from protocol.message_properties import properties_to_string
from protocol.record_layout import PROPERTIES_MAX_LENGTH, TOPIC_MAX_LENGTH_V1
from server.broker.controller import dlq_topic, retry_topic
from server.broker.put_message import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT,
    SCHEDULE_TOPIC,
    java_utf8,
)
from store.config.topics import PERM_WRITE, TopicConfig
from store.write.writer import StoreRecord

#: ``MessageConst`` names the send-back sets.
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"

#: ``AbstractSendMessageProcessor.DLQ_NUMS_PER_GROUP``: a dead-letter topic has one queue.
DLQ_QUEUE_NUMS = 1
#: The level of a first retry when the client leaves it to the broker (10 s by default).
FIRST_RETRY_LEVEL = 3
#: ``MQVersion.Version.V3_4_9.ordinal()``: from this client version on, the header's
#: ``maxReconsumeTimes`` overrides the group's ``retryMaxTimes``.
VERSION_V3_4_9 = 121
#: The broker draws a queue as ``ThreadLocalRandom.nextInt(99999999) % queueNums``.
_DRAW_BOUND = 99_999_999


def _draw() -> int:
    return random.randrange(_DRAW_BOUND)


class SendBackRefused(Exception):
    """The store would not take the copy: the ``PutMessageStatus`` name the broker puts in its remark."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def max_reconsume_times(header_value: int | None, request_version: int, group_retry_max_times: int) -> int:
    """The group's ``retryMaxTimes``, unless a client of V3_4_9 or later sent its own (even 0 or -1:
    the broker takes any value the header carries)."""
    if request_version >= VERSION_V3_4_9 and header_value is not None:
        return header_value
    return group_retry_max_times


def is_writeable(topic: TopicConfig) -> bool:
    """``PermName.isWriteable``: a retry topic made read-only refuses send-backs (NO_PERMISSION)."""
    return bool(topic.perm & PERM_WRITE)


def is_dead_letter(reconsume_times: int, max_times: int, delay_level: int) -> bool:
    """Consumed ``max_times`` times already, or the client asked for no retry (a negative level)."""
    return reconsume_times >= max_times or delay_level < 0


def pick_queue(queue_nums: int, draw: Callable[[], int] = _draw) -> int:
    """A queue as the broker picks it: a random draw below 99999999, modulo the queue count."""
    return draw() % queue_nums


@dataclass(frozen=True, slots=True)
class Destination:
    """Where the copy goes: its topic and queue, and the ``DELAY`` it carries (0 for a dead letter)."""

    topic: str
    queue_id: int
    delay_level: int
    dead_letter: bool


def destination(
    group: str,
    *,
    reconsume_times: int,
    delay_level: int,
    max_times: int,
    retry_queue_nums: int,
    draw: Callable[[], int] = _draw,
) -> Destination:
    """The retry or dead-letter topic of ``group`` for an original consumed ``reconsume_times`` times."""
    if is_dead_letter(reconsume_times, max_times, delay_level):
        return Destination(dlq_topic(group), pick_queue(DLQ_QUEUE_NUMS, draw), 0, True)
    queue_id = pick_queue(retry_queue_nums, draw)
    level = delay_level if delay_level != 0 else FIRST_RETRY_LEVEL + reconsume_times
    return Destination(retry_topic(group), queue_id, level, False)


def is_blank(value: str | None) -> bool:
    """``UtilAll.isBlank``: null, empty, or only whitespace."""
    return value is None or not value.strip()


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def send_back_record(
    original: MessageExt, dest: Destination, *, max_delay_level: int, max_message_size: int
) -> StoreRecord:
    """The record the broker appends for ``original`` (decoded with its body as stored).

    ``SendBackRefused`` with ``DefaultMessageStore``'s status when the store would refuse it:
    ``MESSAGE_ILLEGAL`` for a topic over 127 chars, properties over 32767 chars or a body over the
    message size limit, ``PROPERTIES_SIZE_EXCEEDED`` for properties over 32767 bytes once the schedule
    topic's ``REAL_TOPIC``/``REAL_QID`` are added.
    """
    props = JavaHashMap(original.properties)
    if props.get(PROPERTY_RETRY_TOPIC) is None:
        props.put(PROPERTY_RETRY_TOPIC, original.topic)
    props.put(PROPERTY_WAIT, "false")
    props.put(PROPERTY_DELAY, str(dest.delay_level))
    origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
    if origin is None or is_blank(origin):
        origin = original.offset_msg_id
    props.put(PROPERTY_ORIGIN_MESSAGE_ID, origin)
    stored = properties_to_string(props.ordered())
    # DefaultMessageStore.checkMessage, on the record as the processor built it.
    if len(dest.topic) > TOPIC_MAX_LENGTH_V1 or _java_length(stored) > PROPERTIES_MAX_LENGTH:
        raise SendBackRefused("MESSAGE_ILLEGAL")
    topic, queue_id = dest.topic, dest.queue_id
    level = dest.delay_level
    transaction = original.sys_flag & TRANSACTION_TYPE_MASK
    if level > 0 and transaction in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        # CommitLog.asyncPutMessage: a level past the table is capped (and DELAY says so), the real
        # topic and queue are kept in the properties, and the record waits in the schedule topic.
        if level > max_delay_level:
            level = max_delay_level
            props.put(PROPERTY_DELAY, str(level))
        props.put(PROPERTY_REAL_TOPIC, topic)
        props.put(PROPERTY_REAL_QID, str(queue_id))
        stored = properties_to_string(props.ordered())
        topic, queue_id = SCHEDULE_TOPIC, level - 1
    encoded = java_utf8(stored)
    if len(encoded) > PROPERTIES_MAX_LENGTH:
        raise SendBackRefused("PROPERTIES_SIZE_EXCEEDED")
    body = original.stored_body if original.stored_body is not None else original.body
    if len(body) > max_message_size:
        raise SendBackRefused("MESSAGE_ILLEGAL")
    return StoreRecord(
        topic,
        bytes(body),
        encoded,
        queue_id=queue_id,
        flag=original.flag,
        sys_flag=original.sys_flag,
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        born_port=original.born_port,
        reconsume_times=original.reconsume_times + 1,
        store_host=original.store_host,
        store_port=original.store_port,
    )
