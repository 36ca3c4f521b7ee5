"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a consumer's reply to a request message.

Registered by ``serve --writable``. The rules are ``server.broker.reply_message``'s; here the reply
is decoded (the SEND header, long or one-letter form), pushed to the requester's connection as
PUSH_REPLY_MESSAGE_TO_CLIENT (326), stored, and answered. The push is awaited as a coroutine, so
while the requester takes its time (up to ``PUSH_TIMEOUT_S``, as the broker's ``callClient``) the
event loop serves everyone else; a requester whose connection takes no more writes (it stopped
reading and its answers fill the connection's write budget) is a failed push at once, never a queue
that grows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message_properties import string_to_properties
from protocol.reply_message import PROPERTY_PUSH_REPLY_TIME, v2_number_java_refuses
from protocol.send_message import SendMessageRequestHeader, send_response_fields
from server.broker.controller import BrokerController
from server.broker.put_message import SCHEDULE_TOPIC, PutContext, PutRefused, number_format_refusal
from server.broker.reply_message import (
    PUSH_TIMEOUT_S,
    PushOutcome,
    ReplyAnswer,
    StoreThrew,
    channel_not_found_remark,
    push_failed_remark,
    push_header,
    push_properties,
    reply_answer,
    reply_queue,
    reply_record,
    reply_target,
    reply_to_missing_remark,
)
from server.broker.send_check import BLANK_TOPIC_REMARK, check_send
from server.broker.writable_store import WritableStore
from server.burst_log import BurstLog
from server.remoting.channel import RemotingChannel
from server.remoting.peer import CURRENT_PEER
from server.remoting.reply import exception_answer
from server.store_api import AppendResult

log = logging.getLogger(__name__)

REPLY_CODES = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)


class ReplyMessageProcessor:
    """``ReplyMessageProcessor`` over a ``WritableStore`` and the broker's producer registrations."""

    def __init__(
        self,
        store: WritableStore,
        broker: BrokerController,
        *,
        cluster: str,
        store_host: tuple[str, int],
        region: str = "DefaultRegion",
        trace_on: bool = True,
        store_replies: bool = True,
        push_timeout: float = PUSH_TIMEOUT_S,
        on_scheduled: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.broker = broker
        self.cluster = cluster
        self.store_host = store_host
        self.region = region
        self.trace_on = trace_on
        #: ``storeReplyMessageEnable``.
        self.store_replies = store_replies
        self.push_timeout = push_timeout
        #: Called after a reply went to the schedule topic (a ``DELAY`` on a reply).
        self.on_scheduled = on_scheduled
        self._logs = BurstLog(log)

    def _answer(self, request: RemotingCommand, answer: ReplyAnswer) -> RemotingCommand:
        if answer.header is None:
            fields = send_response_fields(self.region, self.trace_on)
        else:
            fields = answer.header.to_ext_fields(self.region, self.trace_on, request.serialize_type)
        return request.make_response(answer.code, remark=answer.remark, ext_fields=fields)

    def process(self, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The dispatcher's entry: decoded and checked now (the sender's address is the
        connection's), pushed and stored in a coroutine."""
        born = CURRENT_PEER.get() or ("127.0.0.1", 0)
        v2 = request.code == RequestCode.SEND_REPLY_MESSAGE_V2
        fields = request.ext_fields
        if v2 and fields is not None and (bad := v2_number_java_refuses(fields)) is not None:
            return exception_answer(request, number_format_refusal(bad).remark)
        if fields is None or fields.get("b" if v2 else "topic") is None:
            # Java's decode leaves a missing field null (no extFields at all: nothing is read), and
            # ``msgCheck`` looks at the topic first (golden: "reply: no header fields").
            return self._answer(request, ReplyAnswer(ResponseCode.SYSTEM_ERROR, BLANK_TOPIC_REMARK, None))
        header = SendMessageRequestHeader.from_ext_fields(fields, v2=v2)
        body = bytes(request.body) if request.body is not None else b""
        before = self.store.topic_changes()
        try:
            config = check_send(self.store, header, born)
        except PutRefused as refused:
            answer = self._answer(request, ReplyAnswer(refused.code, refused.remark, None))
            if self.store.topic_changes() == before:
                return answer
            return self._when_saved(asyncio.sleep(0, answer), before)
        return self._when_saved(self._reply(request, header, reply_queue(header, config), body, born), before)

    async def _when_saved(self, pending: Awaitable[RemotingCommand], before: int) -> RemotingCommand:
        """``pending``'s answer, once ``config/topics.json`` holds a topic the reply created (the
        broker persists before answering); written on the table's thread, the loop serving others."""
        answer = await pending
        after = self.store.topic_changes()
        if after != before:
            saved: Future[None] = self.store.topics_saved(after)
            await asyncio.wrap_future(saved)
        return answer

    async def _reply(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
        body: bytes,
        born: tuple[str, int],
    ) -> RemotingCommand:
        props = string_to_properties(header.properties or "")
        push = await self._push(header, body, props, born)
        stored: tuple[str, int] | None = None
        if self.store_replies:
            try:
                stored = self._store(header, body, queue_id, props, born)
            except StoreThrew as threw:
                return exception_answer(request, threw.remark)
        return self._answer(request, reply_answer(push, stored, queue_id))

    async def _push(
        self, header: SendMessageRequestHeader, body: bytes, props: dict[str, str], born: tuple[str, int]
    ) -> PushOutcome:
        """``pushReplyMessage``: the reply to the requester's connection; ``props`` gains
        ``PUSH_REPLY_TIME`` when a connection was found (the store then sees it too)."""
        client_id = reply_target(props)
        if client_id is None:
            self._logs.event("a reply without REPLY_TO_CLIENT from %s:%d cannot be pushed", *born)
            return PushOutcome(reply_to_missing_remark())
        channel = self.broker.producers.find_channel(client_id)
        if channel is None or not channel.active:
            remark = channel_not_found_remark(client_id)
            self._logs.event("%s", remark)
            return PushOutcome(remark)
        now_ms = int(time.time() * 1000)
        properties = push_properties(header.properties, now_ms)
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
        fields = push_header(
            header, born=born, store_host=self.store_host, now_ms=now_ms, properties=properties
        ).to_ext_fields()
        push = RemotingChannel.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body or None)
        try:
            answer = await channel.invoke(push, self.push_timeout)
        except (TimeoutError, ConnectionError, OSError) as exc:
            self._logs.event("pushing a reply to %s failed: %r", client_id, exc)
            return PushOutcome(push_failed_remark(client_id))
        if answer.code != ResponseCode.SUCCESS:
            self._logs.event("%s answered the pushed reply %d: %s", client_id, answer.code, answer.remark)
            return PushOutcome(push_failed_remark(client_id))
        return PushOutcome()

    def _store(
        self,
        header: SendMessageRequestHeader,
        body: bytes,
        queue_id: int,
        props: dict[str, str],
        born: tuple[str, int],
    ) -> tuple[str, int] | None:
        """Store the reply: its offset msg id and queue offset, or None (logged) when the store
        refuses it; ``StoreThrew`` for a record Java's store would throw on."""
        ctx = PutContext(self.cluster, self.store.config.max_message_size, born[0], born[1],
                         self.store.max_delay_level)  # fmt: skip
        try:
            record = reply_record(header, body, queue_id, ctx, properties=props)
        except StoreThrew:
            raise
        except PutRefused as refused:
            self._logs.event("a reply to %s was not stored: %s", header.topic, refused.remark)
            return None
        try:
            appended: Sequence[AppendResult] = self.store.put([record])
        except PutRefused as refused:
            self._logs.event("a reply to %s was not stored: %s", header.topic, refused.remark)
            return None
        except OSError as exc:
            self._logs.event("writing the CommitLog failed: %s", exc)
            return None
        if record.topic == SCHEDULE_TOPIC and self.on_scheduled is not None:
            self.on_scheduled()
        return appended[0].offset_msg_id, appended[0].queue_offset
