"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320), answered like the broker.

Registered only by ``serve --writable``. The checks run in the broker's order
(``AbstractSendMessageProcessor.msgCheck``): topic name, topics nobody may send to, the topic's
config (an unknown topic is created from the request's default topic when auto-create is on, else
TOPIC_NOT_EXIST), the queue id; then the store's own checks and the append (``server.broker.put_message``).
Every answer carries ``MSG_REGION`` and ``TRACE_ON``; SUCCESS adds the offset msg id(s), the queue
the client chose and the first queue offset. A oneway SEND is stored and gets no answer (the
connection drops answers to oneway requests).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
from collections.abc import Callable

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import MessageDecodeError
from protocol.send_message import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_batch_body,
    send_response_fields,
)
from server.broker.put_message import SCHEDULE_TOPIC, PutContext, PutRefused, batch_records, single_record
from server.broker.writable_store import WritableStore
from server.burst_log import BurstLog
from server.peer import CURRENT_PEER
from store.config.topics import TopicConfig
from store.write.writer import Appended

log = logging.getLogger(__name__)

SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)

#: ``TopicValidator``: topic names are ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters.
_VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")
_TOPIC_MAX_LENGTH = 127
#: Topics a producer may not send to (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
_FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_MULTI_TAGS_FLAG = 0x2


class SendMessageProcessor:
    """The broker's send processor over a ``WritableStore``."""

    def __init__(
        self,
        store: WritableStore,
        *,
        cluster: str,
        max_message_size: int,
        region: str = "DefaultRegion",
        trace_on: bool = True,
        on_scheduled: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.max_message_size = max_message_size
        self.region = region
        self.trace_on = trace_on
        #: Called after a record went to the schedule topic (the server arms its delivery timer).
        self.on_scheduled = on_scheduled
        self._write_errors = BurstLog(log)

    def process(self, request: RemotingCommand) -> RemotingCommand:
        """The dispatcher's entry: the sender's address comes from the connection."""
        return self.handle(request, CURRENT_PEER.get() or ("127.0.0.1", 0))

    def _answer(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return request.make_response(
            code, remark=remark, ext_fields=send_response_fields(self.region, self.trace_on)
        )

    def handle(self, request: RemotingCommand, born: tuple[str, int]) -> RemotingCommand:
        """Decode, check, store and answer one SEND; ``born`` is the sender's ``(host, port)``."""
        header = SendMessageRequestHeader.from_ext_fields(
            request.ext_fields, v2=request.code != RequestCode.SEND_MESSAGE
        )
        checked = self._check(request, header, born)
        if isinstance(checked, RemotingCommand):
            return checked
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(99_999_999) % max(1, checked.write_queue_nums)
        sys_flag = header.sys_flag
        if checked.topic_filter_type == "MULTI_TAG":
            sys_flag |= _MULTI_TAGS_FLAG
        if queue_id != header.queue_id or sys_flag != header.sys_flag:
            header = dataclasses.replace(header, queue_id=queue_id, sys_flag=sys_flag)
        body = bytes(request.body) if request.body is not None else b""
        ctx = PutContext(self.cluster, self.max_message_size, born[0], born[1], self.store.max_delay_level)
        try:
            if header.batch:
                try:
                    items = decode_batch_body(body)
                except MessageDecodeError as exc:
                    return self._answer(request, ResponseCode.SYSTEM_ERROR, f"bad batch body: {exc}")
                records = batch_records(header, body, items, ctx)
            else:
                records = [single_record(header, body, ctx)]
        except PutRefused as refused:
            return self._answer(request, refused.code, refused.remark)
        try:
            appended = self.store.put(records)
        except OSError as exc:
            # CREATE_MAPEDFILE_FAILED's answer (a full disk, a read-only store): nothing was stored.
            self._write_errors.event("writing the CommitLog failed: %s", exc)
            return self._answer(
                request, ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
            )
        if self.on_scheduled is not None and any(r.topic == SCHEDULE_TOPIC for r in records):
            self.on_scheduled()
        return self._success(request, appended, queue_id)

    def _success(self, request: RemotingCommand, appended: list[Appended], queue_id: int) -> RemotingCommand:
        response = SendMessageResponseHeader(
            msg_id=",".join(a.offset_msg_id for a in appended),
            queue_id=queue_id,
            queue_offset=appended[0].queue_offset,
        )
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=response.to_ext_fields(self.region, self.trace_on)
        )

    def _check(
        self, request: RemotingCommand, header: SendMessageRequestHeader, born: tuple[str, int]
    ) -> TopicConfig | RemotingCommand:
        """``msgCheck``: the topic's config, or the refusal."""
        topic = header.topic
        if not topic.strip():
            return self._answer(request, ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        if not _VALID_TOPIC.fullmatch(topic):
            return self._answer(
                request,
                ResponseCode.SYSTEM_ERROR,
                "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        if len(topic) > _TOPIC_MAX_LENGTH:
            return self._answer(
                request, ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length."
            )
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return self._answer(
                request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.store.topic_config(topic)
        if config is None:
            config = self.store.create_topic_in_send(
                topic, header.default_topic, header.default_topic_queue_nums
            )
            if config is None:
                return self._answer(
                    request,
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{_FAQ_SUFFIX}",
                )
        if header.queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            return self._answer(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, {config.java_string()} "
                f"Producer: {born[0]}:{born[1]}",
            )
        return config
