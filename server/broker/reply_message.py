"""The broker's rules for a request's reply (``ReplyMessageProcessor``), sans-IO.

A reply (SEND_REPLY_MESSAGE / _V2) passes the SEND's checks (``send_check.check_send``: topic name,
forbidden topics, the topic's config or its creation, the queue id), then the broker does two things
in this order, and the answer says how the first went:

1. It pushes the reply to the requester: the client named by the reply's ``REPLY_TO_CLIENT``, over
   the connection its producer registration came on (``ProducerGroups.find_channel``), as
   PUSH_REPLY_MESSAGE_TO_CLIENT with ``PUSH_REPLY_TIME`` added to the properties, waiting up to
   ``PUSH_TIMEOUT_S`` for the client's answer. No ``REPLY_TO_CLIENT``, no connection for that client,
   or anything but SUCCESS back (or no answer in time) is SYSTEM_ERROR with the broker's remark.
2. With ``storeReplyMessageEnable`` (the default) it stores the reply in its topic as sent: the
   properties string as it came (no ``CLUSTER`` added), sysFlag 0 (the processor never sets it),
   the queue the request named or a random writable one. A failed store is only logged: the answer
   stays what the push made it, with the stored message's id and offsets when the store took it.

A pushed reply not stored is answered SUCCESS with msgId ``0`` and queue offset 0 (so the client
can decode the header).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.codes import ResponseCode
from protocol.java_hashmap import JavaHashMap
from protocol.message_flags import TRANSACTION_NOT_TYPE
from protocol.message_properties import properties_to_string, string_to_properties
from protocol.reply_message import (
    PROPERTY_PUSH_REPLY_TIME,
    PROPERTY_REPLY_TO_CLIENT,
    ReplyMessageRequestHeader,
)
from protocol.send_message import SendMessageRequestHeader, SendMessageResponseHeader
from server.broker.put_message import (
    PROPERTY_REAL_QID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    PutContext,
    PutRefused,
    checked_record,
    delay_level,
    java_utf8,
)
from store.config.topics import TopicConfig
from store.write.writer import StoreRecord

#: ``Broker2Client.callClient``'s wait for the requester's answer to the push (s).
PUSH_TIMEOUT_S = 10.0


def reply_to_missing_remark() -> str:
    return f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null"


def channel_not_found_remark(client_id: str) -> str:
    return f"push reply message fail, channel of <{client_id}> not found."


def push_failed_remark(client_id: str) -> str:
    """The broker's remark when the requester answered anything but SUCCESS, or not in time (its
    text has no space before ``fail``)."""
    return f"push reply message to {client_id}fail."


def reply_queue(header: SendMessageRequestHeader, config: TopicConfig) -> int:
    """The queue the reply goes to: the request's, or a random writable one when it is negative."""
    if header.queue_id >= 0:
        return header.queue_id
    return random.randrange(99_999_999) % max(1, config.write_queue_nums)


def reply_target(properties: Mapping[str, str]) -> str | None:
    """The client id the reply is pushed to (``REPLY_TO_CLIENT``), None when the reply names none."""
    return properties.get(PROPERTY_REPLY_TO_CLIENT)


def push_properties(properties: str | None, now_ms: int) -> str:
    """The properties the push carries: the reply's, parsed into a ``HashMap``, ``PUSH_REPLY_TIME``
    put, serialized again in the map's order (``messageProperties2String``)."""
    props = JavaHashMap(string_to_properties(properties or ""))
    props.put(PROPERTY_PUSH_REPLY_TIME, str(now_ms))
    return properties_to_string(props.ordered())


def host_port(host: str, port: int) -> str:
    """An address as the push names it: ``getAddress().getHostAddress() + ":" + getPort()``."""
    return f"{host}:{port}"


def push_header(
    header: SendMessageRequestHeader,
    *,
    born: tuple[str, int],
    store_host: tuple[str, int],
    now_ms: int,
    properties: str,
) -> ReplyMessageRequestHeader:
    """The PUSH_REPLY_MESSAGE_TO_CLIENT header: the reply's SEND header as it came (its queue id
    too, not the one chosen), where it came from, the broker's store host and the push time."""
    return ReplyMessageRequestHeader(
        producer_group=header.producer_group,
        topic=header.topic,
        default_topic=header.default_topic,
        default_topic_queue_nums=header.default_topic_queue_nums,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        flag=header.flag,
        properties=properties,
        reconsume_times=header.reconsume_times,
        unit_mode=header.unit_mode,
        born_host=host_port(*born),
        store_host=host_port(*store_host),
        store_timestamp=now_ms,
    )


class StoreThrew(PutRefused):
    """The store threw on the reply (``Integer.parseInt`` of its ``DELAY``): the broker's remoting
    layer answers its bare SYSTEM_ERROR with the exception (no SEND fields), after the push."""


@dataclass(frozen=True, slots=True)
class PushOutcome:
    """How the push went: ``remark`` says why it failed (None: pushed)."""

    remark: str | None = None

    @property
    def ok(self) -> bool:
        return self.remark is None


@dataclass(frozen=True, slots=True)
class ReplyAnswer:
    """The reply's answer: code, remark and the SEND response header (None: no header fields)."""

    code: int
    remark: str | None
    header: SendMessageResponseHeader | None


def reply_answer(push: PushOutcome, stored: tuple[str, int] | None, queue_id: int) -> ReplyAnswer:
    """``handlePushReplyResult`` then ``handlePutMessageResult``: the push decides code and remark;
    the header is the stored message's (``stored``: its offset msg id and queue offset), else
    ``0``/0 after a good push, else absent."""
    if stored is not None:
        header: SendMessageResponseHeader | None = SendMessageResponseHeader(
            msg_id=stored[0], queue_id=queue_id, queue_offset=stored[1]
        )
    elif push.ok:
        header = SendMessageResponseHeader(msg_id="0", queue_id=queue_id, queue_offset=0)
    else:
        header = None
    if push.ok:
        return ReplyAnswer(ResponseCode.SUCCESS, None, header)
    return ReplyAnswer(ResponseCode.SYSTEM_ERROR, push.remark, header)


def reply_record(
    header: SendMessageRequestHeader,
    body: bytes,
    queue_id: int,
    ctx: PutContext,
    *,
    properties: Mapping[str, str] | None = None,
) -> StoreRecord:
    """The record the reply is stored as: ``PutRefused`` when the store would refuse it (the broker
    logs that and answers as the push went), ``StoreThrew`` when it would throw.

    ``properties``: the reply's properties as the broker holds them at the store (with
    ``PUSH_REPLY_TIME`` once pushed); only a ``DELAY`` re-serializes them, as ``CommitLog`` does on
    its way to the schedule topic; otherwise the string stored is the one sent.
    """
    topic = header.topic
    stored: bytes = java_utf8(header.properties or "")
    props = JavaHashMap(
        dict(properties) if properties is not None else string_to_properties(header.properties or "")
    )
    try:
        level = delay_level(props)  # sysFlag 0: a non-transactional message
    except PutRefused as refused:
        raise StoreThrew(refused.code, refused.remark) from None
    if level > 0:
        level = min(level, ctx.max_delay_level)
        props.put(PROPERTY_REAL_TOPIC, topic)
        props.put(PROPERTY_REAL_QID, str(queue_id))
        stored = java_utf8(properties_to_string(props.ordered()))
        topic, queue_id = SCHEDULE_TOPIC, level - 1
    return checked_record(header, body, stored, topic, queue_id, TRANSACTION_NOT_TYPE, ctx)
