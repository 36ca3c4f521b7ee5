"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it could not consume.

Answered in ``SendMessageProcessor.consumerSendMsgBack``'s order (4.9.7): the subscription group
(found or auto-created; SUBSCRIPTION_GROUP_NOT_EXIST when neither), a group without retry queues
(SUCCESS, nothing stored: the broker's answer), the ``%RETRY%`` topic created with the group's
``retryQueueNums`` (NO_PERMISSION when it exists and is not writable), the original record read by
its CommitLog offset (SYSTEM_ERROR ``look message by offset failed, <offset>`` when there is none),
then (under ``--acl``, tighter than 4.9.7: ``server.acl.record_access``) SUB on the record's topic
and its ``REAL_TOPIC``, NO_PERMISSION otherwise, so no account copies a topic it may not consume
into its own retry or dead-letter queue; then the ``%DLQ%`` topic when the message is past its
reconsume times. What is stored is
``server.broker.send_back``'s; a store that refuses it is SYSTEM_ERROR with the put status's name.
Success is SUCCESS with no header. Topics created here are on disk before the answer, as the broker
persists them before it answers; a retry goes through the schedule topic, so the delivery timer is
armed after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import ConsumerSendMsgBackRequestHeader
from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from server.acl.config import SUB
from server.acl.record_access import PROPERTY_REAL_TOPIC, RECORD_ACCESS
from server.broker.controller import BrokerController
from server.broker.put_message import SCHEDULE_TOPIC, PutRefused, StoreUnavailable
from server.broker.send_back import (
    DLQ_QUEUE_NUMS,
    Destination,
    SendBackRefused,
    destination,
    is_writeable,
    max_reconsume_times,
    send_back_record,
)
from server.burst_log import BurstLog
from server.remoting.faq import suggest_todo

log = logging.getLogger(__name__)

#: ``TopicSysFlag.buildSysFlag(false, true)``: the retry topic of a unit-mode consumer.
UNIT_SUB_SYS_FLAG = 2


def group_not_exist_remark(group: str) -> str:
    return f"subscription group not exist, {group} {suggest_todo()}"


def topic_forbidden_remark(topic: str) -> str:
    return f"the topic[{topic}] sending message is forbidden"


def look_failed_remark(offset: int) -> str:
    return f"look message by offset failed, {offset}"


class ConsumerSendBackProcessor:
    """CONSUMER_SEND_MSG_BACK over the broker's groups and its writable store."""

    def __init__(
        self,
        broker: BrokerController,
        *,
        on_scheduled: Callable[[], None] | None = None,
        draw: Callable[[], int] | None = None,
    ) -> None:
        self._broker = broker
        #: Called after a retry went to the schedule topic (the server arms its delivery timer).
        self._on_scheduled = on_scheduled
        #: The random draw that picks a queue (tests fix it).
        self._draw_kw = {} if draw is None else {"draw": draw}
        self._write_errors = BurstLog(log)

    def consumer_send_msg_back(
        self, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        store = self._broker.store
        before = store.topic_changes()
        answer = self._handle(request)
        after = store.topic_changes()
        if after == before:
            return answer
        return _when_saved(store.topics_saved(after), answer)

    def _original(self, offset: int) -> MessageExt | None:
        """``lookMessageByOffset``: the record at ``offset``, its body as stored, or None."""
        buf = self._broker.store.reader.view_message(offset)
        if buf is None:
            return None
        try:
            return decode_message(bytes(buf), decompress=False)
        except ProtocolError:
            return None  # an offset inside a record, or not a message: the broker's decode gives null

    def _handle(self, request: RemotingCommand) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        broker = self._broker
        group = broker.find_group(header.group)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark=group_not_exist_remark(header.group)
            )
        if group.retry_queue_nums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        sys_flag = UNIT_SUB_SYS_FLAG if header.unit_mode else 0
        retry = broker.create_retry_topic(header.group, group.retry_queue_nums, sys_flag)
        if not is_writeable(retry):
            return request.make_response(
                ResponseCode.NO_PERMISSION, remark=topic_forbidden_remark(retry.topic_name)
            )
        original = self._original(header.offset)
        if original is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark=look_failed_remark(header.offset))
        access = RECORD_ACCESS.get()
        if access is not None:  # under ``--acl``: only a record of a topic the account may consume
            topics = (original.topic, original.properties.get(PROPERTY_REAL_TOPIC))
            remark = access.denial(topics, SUB)
            if remark is not None:
                return request.make_response(ResponseCode.NO_PERMISSION, remark=remark)
        max_times = max_reconsume_times(header.max_reconsume_times, request.version, group.retry_max_times)
        dest = destination(
            header.group,
            reconsume_times=original.reconsume_times,
            delay_level=header.delay_level,
            max_times=max_times,
            retry_queue_nums=group.retry_queue_nums,
            **self._draw_kw,
        )
        if dest.dead_letter:
            broker.create_topic_in_send_back(dest.topic, DLQ_QUEUE_NUMS)
        return self._store(request, original, dest)

    def _store(self, request: RemotingCommand, original: MessageExt, dest: Destination) -> RemotingCommand:
        store = self._broker.store
        if store.not_writable is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark="SERVICE_NOT_AVAILABLE")
        try:
            record = send_back_record(
                original,
                dest,
                max_delay_level=store.max_delay_level,
                max_message_size=store.config.max_message_size,
            )
            store.put([record])
        except SendBackRefused as refused:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark=refused.status)
        except PutRefused as refused:
            if isinstance(refused, StoreUnavailable):
                self._write_errors.event("writing the CommitLog failed: %s", refused.__cause__ or refused)
                return request.make_response(ResponseCode.SYSTEM_ERROR, remark="SERVICE_NOT_AVAILABLE")
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark="MESSAGE_ILLEGAL")
        except OSError as exc:
            self._write_errors.event("writing the CommitLog failed: %s", exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark="CREATE_MAPEDFILE_FAILED")
        if record.topic == SCHEDULE_TOPIC and self._on_scheduled is not None:
            self._on_scheduled()
        return request.make_response(ResponseCode.SUCCESS)


async def _when_saved(saved: Future[None], answer: RemotingCommand) -> RemotingCommand:
    await asyncio.wrap_future(saved)
    return answer
