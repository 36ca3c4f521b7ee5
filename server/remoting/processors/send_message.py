"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320), answered like the broker.

Registered only by ``serve --writable``. This processor decodes and answers; the broker decides
(``server.broker``): the checks in the broker's order (``send_check``: topic name, topics nobody may
send to, the topic's config or its creation, the queue id), the records and the store's own checks
(``put_message``), the append (``writable_store``). Each refusal is answered with its code and remark.
Every answer carries ``MSG_REGION`` and ``TRACE_ON``; SUCCESS adds the offset msg id(s), the queue
the client chose and the first queue offset. A oneway SEND is stored and gets no answer (the
connection drops answers to oneway requests). Where the compiled request path runs, a plain SEND is
decoded and answered there (``server/remoting/_request_path_send.h``) and only ``store_send`` runs
here, so the checks and the put have one home; there the SENDs of one read are appended one by one
and acknowledged by one ``settle`` (``server/remoting/send_group.py``). A plain SEND there
(``_request_path_plain.h``: no rule but the tables ``plain_state`` hands over) is stored by the C
side itself and appended with the read's others in one write (``append_encoded``); ``store_send``
stays the reference it is compared with (``tests/server/remoting/test_request_path_plain.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import MessageDecodeError
from protocol.message_id import MessageIdError, pack_host
from protocol.send_message import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_response_fields,
)
from server.broker.controller import RETRY_GROUP_TOPIC_PREFIX, BrokerController, dlq_topic
from server.broker.put_message import (
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    PutContext,
    PutRefused,
    StoreUnavailable,
    batch_records,
    is_half_message,
    java_utf8,
    single_record,
)
from server.broker.send_back import DLQ_QUEUE_NUMS, max_reconsume_times
from server.broker.send_check import NOT_ALLOWED_SEND_TOPICS, check_send, header_to_store
from server.broker.timer_messages import TIMER_TOPIC
from server.broker.transactions import reject_remark, system_topic
from server.broker.writable_store import DELAYED_TOPICS, WritableStore
from server.burst_log import BurstLog
from server.remoting.peer import CURRENT_PEER
from server.remoting.processors.consumer_send_back import group_not_exist_remark
from server.store_api import AppendResult, StoreRecord

log = logging.getLogger(__name__)
_TOPIC = operator.attrgetter("topic")

SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
#: Topics whose SENDs are never plain (``plain_state``): nobody may send to them, or a record sent to
#: them is not stored as sent (the timer topic's own rules), so they keep ``store_send``.
NEVER_PLAIN_TOPICS = NOT_ALLOWED_SEND_TOPICS | {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TIMER_TOPIC}


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
        broker: BrokerController | None = None,
        reject_transactions: bool = False,
        broker_ip: str = "127.0.0.1",
    ) -> None:
        self.store = store
        #: The consume side's groups: a SEND to a ``%RETRY%`` topic past its reconsume times becomes
        #: a dead letter (without it, such SENDs are stored as sent).
        self.broker = broker
        self.cluster = cluster
        self.max_message_size = max_message_size
        self.region = region
        self.trace_on = trace_on
        #: Called after a record went to the schedule topic (the server arms its delivery timer).
        self.on_scheduled = on_scheduled
        #: ``rejectTransactionMessage``: half messages are refused NO_PERMISSION naming ``broker_ip``.
        self.reject_transactions = reject_transactions
        self.broker_ip = broker_ip
        self._write_errors = BurstLog(log)

    def process(self, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The dispatcher's entry: the sender's address comes from the connection.

        A SEND that created a topic is answered once ``config/topics.json`` holds it, as the broker
        persists before answering; the file is written on the table's own thread, so meanwhile the
        loop serves everyone else.
        """
        before = self.store.topic_changes()
        answer = self.handle(request, CURRENT_PEER.get() or ("127.0.0.1", 0))
        after = self.store.topic_changes()
        if after == before:
            return answer
        return self.when_saved(after, answer)

    def when_saved(self, change: int, answer: RemotingCommand) -> Awaitable[RemotingCommand]:
        """``answer``, once the topic table holding ``change`` is saved."""
        return self._when_saved(self.store.topics_saved(change), answer)

    @staticmethod
    async def _when_saved(saved: Future[None], answer: RemotingCommand) -> RemotingCommand:
        await asyncio.wrap_future(saved)
        return answer

    def _answer(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return request.make_response(
            code, remark=remark, ext_fields=send_response_fields(self.region, self.trace_on)
        )

    def handle(self, request: RemotingCommand, born: tuple[str, int]) -> RemotingCommand:
        """Decode, check, store and answer one SEND; ``born`` is the sender's ``(host, port)``."""
        header = SendMessageRequestHeader.from_ext_fields(
            request.ext_fields, v2=request.code != RequestCode.SEND_MESSAGE
        )
        body = bytes(request.body) if request.body is not None else b""
        return self.answer_outcome(request, self.store_send(header, body, born, request.version))

    def answer_outcome(
        self, request: RemotingCommand, outcome: tuple[Sequence[AppendResult], int] | PutRefused
    ) -> RemotingCommand:
        """The answer to ``request`` for what ``store_send`` did."""
        if isinstance(outcome, PutRefused):
            return self._answer(request, outcome.code, outcome.remark)
        appended, queue_id = outcome
        return self._success(request, appended, queue_id)

    @staticmethod
    def takes_compiled(header: SendMessageRequestHeader) -> bool:
        """Whether the compiled request path may hand this SEND to ``store_send`` without its
        request: not one to a ``%RETRY%`` topic (a consumer's own retry reads the request's
        version); ``server/remoting/_request_path_send.h``."""
        return not header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)

    def store_send(
        self,
        header: SendMessageRequestHeader,
        body: bytes,
        born: tuple[str, int],
        version: int,
        *,
        settle: bool = True,
    ) -> tuple[Sequence[AppendResult], int] | PutRefused:
        """Check and store one SEND as the broker does: what was appended and the queue the client
        is answered with, or the refusal to answer (nothing stored). ``version`` is the request's
        (a consumer's retry reads it). With ``settle`` False the records are only appended
        (``WritableStore.append``), and the SEND is acknowledged once ``settle()`` says so."""
        try:
            config = check_send(self.store, header, born)
        except PutRefused as refused:
            return refused
        header = header_to_store(header, config)
        answered_queue = header.queue_id
        if self.broker is not None and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not header.batch:
            try:
                header = self._retry_or_dead_letter(header, version)
            except PutRefused as refused:
                return refused
        ctx = PutContext(
            self.cluster,
            self.max_message_size,
            born[0],
            born[1],
            self.store.max_delay_level,
            timer=self.store.timer_settings,
            now_ms=self.store.now_ms(),
        )
        try:
            if header.batch:
                try:
                    records = batch_records(header, body, ctx)
                except MessageDecodeError as exc:
                    return PutRefused(ResponseCode.SYSTEM_ERROR, f"bad batch body: {exc}")
            else:
                if self.reject_transactions and is_half_message(header):
                    return PutRefused(ResponseCode.NO_PERMISSION, reject_remark(self.broker_ip))
                records = [single_record(header, body, ctx)]
                if records[0].topic in (TRANS_HALF_TOPIC, TIMER_TOPIC):
                    system_topic(self.store, records[0].topic, int(time.time() * 1000))
        except PutRefused as refused:
            return refused
        appended = self._stored(self.store.put if settle else self.store.append, records)
        if isinstance(appended, PutRefused):
            return appended
        if settle:
            self._scheduled(records)
        return appended, answered_queue

    def plain_state(self, born: tuple[str, int]) -> tuple[Any, ...] | None:
        """What the compiled request path needs to store plain SENDs itself
        (``server/remoting/_request_path_plain.h``: the ``PB_*`` order), or None when the store
        takes no records now (each SEND then comes to ``store_send``, which refuses it). The plain
        ones are those whose checks, records and append ``store_send`` would make without any
        rule beyond the tables given here; ``born`` is the sender's (host, port)."""
        try:
            born_addr = pack_host(born[0])
        except MessageIdError:
            return None
        state = self.store.begin_encoded()
        if state is None:
            return None
        offsets, queues, position, file_size, now, store_addr, store_port, created = state
        return (
            offsets,
            queues,
            self.store.topics.topics,
            NEVER_PLAIN_TOPICS,
            position,
            file_size,
            now,
            self.max_message_size,
            java_utf8(self.cluster),
            store_addr,
            store_port,
            born_addr,
            born[1],
            created,
        )

    def append_encoded(
        self,
        data: bytes,
        position: int,
        now: int,
        count: int,
        last: tuple[int, int],
        keys: list[tuple[str, int]],
    ) -> PutRefused | None:
        """The plain SENDs the compiled path encoded from ``plain_state``, appended (one write,
        ``WritableStore.append_encoded``) and acknowledged by the next ``settle``: None, or the
        refusal each of them is answered with instead, as ``store_send`` answers an append that
        fails the same way."""
        appended = self._stored(self.store.append_encoded, data, position, now, count, last, keys)
        return appended if isinstance(appended, PutRefused) else None

    def settle(self) -> PutRefused | None:
        """Acknowledge the SENDs ``store_send(..., settle=False)`` appended since the last call
        (``WritableStore.settle``: one reput for all of them): None, or the refusal each of them is
        answered with instead, as ``store_send`` answers a put that fails the same way."""
        settled = self._stored(self.store.settle)
        if isinstance(settled, PutRefused):
            return settled
        if settled:  # plain SENDs settle no records (never to the schedule topic)
            self._scheduled(settled)
        return None

    def _stored(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` (the store's put, append or settle), or the refusal its failure is
        answered with: the store's own refusals (records no file can hold, a full disk), and
        CREATE_MAPEDFILE_FAILED's answer to an ``OSError`` (a full disk, a read-only store)."""
        try:
            return call(*args)
        except PutRefused as refused:
            if isinstance(refused, StoreUnavailable):
                self._write_errors.event("writing the CommitLog failed: %s", refused.__cause__ or refused)
            return refused
        except OSError as exc:
            self._write_errors.event("writing the CommitLog failed: %s", exc)
            return PutRefused(
                ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
            )

    def _scheduled(self, records: Sequence[StoreRecord]) -> None:
        """Arm the server's delivery timer if any of ``records`` went to the schedule topic."""
        # ``isdisjoint`` over ``map``: the records' topics looked at in C (a batch holds dozens).
        if self.on_scheduled is not None and not DELAYED_TOPICS.isdisjoint(map(_TOPIC, records)):
            self.on_scheduled()

    def _retry_or_dead_letter(
        self, header: SendMessageRequestHeader, version: int
    ) -> SendMessageRequestHeader:
        """``handleRetryAndDLQ``: a consumer's own retry (the Java client's fallback when
        CONSUMER_SEND_MSG_BACK failed) goes to the group's ``%DLQ%`` topic once it carries the max
        reconsume times. Only topic and queue change: the client's ``DELAY`` stays, so the dead
        letter goes through the schedule as on 4.9.7 (its ``setDelayTimeLevel(0)`` is overwritten
        by the request's properties)."""
        assert self.broker is not None
        group_name = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group = self.broker.find_group(group_name)
        if group is None:
            raise PutRefused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, group_not_exist_remark(group_name))
        max_times = max_reconsume_times(header.max_reconsume_times, version, group.retry_max_times)
        if (header.reconsume_times or 0) < max_times:
            return header
        dlq = dlq_topic(group_name)
        self.broker.create_topic_in_send_back(dlq, DLQ_QUEUE_NUMS)
        return dataclasses.replace(header, topic=dlq, queue_id=0)

    def _success(
        self, request: RemotingCommand, appended: Sequence[AppendResult], queue_id: int
    ) -> RemotingCommand:
        response = SendMessageResponseHeader(
            msg_id=",".join(a.offset_msg_id for a in appended),
            queue_id=queue_id,
            queue_offset=appended[0].queue_offset,
        )
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields=response.to_ext_fields(self.region, self.trace_on, request.serialize_type),
        )
