"""Resending a stored message under ``serve --writable``: a producer's SEND of it, through the SEND processor.

The copy is not written here: it is made into the SEND_MESSAGE_V2 request a producer holding the
message would make, and handed to the remoting port's own ``SendMessageProcessor`` (registered by
``server.remoting.write_path``), so it passes the same checks in the same order (topic name, topics
nobody may send to, the topic's config or its creation, retry topics into dead letters) and is
stored by the same property rules (``server.broker.put_message``: ``CLUSTER`` put, ``WAIT`` kept out
of the stored string, delay levels). A refusal is the broker's, with its code and remark.

What the copy carries, and why:

- the body as stored (compressed bodies stay compressed, with their sysFlag bits), the flag, the
  message keys, tags and the application's own properties: what the producer sent;
- a new ``UNIQ_KEY`` (a new message id), made like a Java client's: the copy is a message of its own
  that a lookup must tell from the original, and a consumer that de-duplicates by message id would
  drop a copy with the old one;
- none of what the broker or a consumer put on the way: ``CLUSTER`` (the broker puts its own),
  ``REAL_TOPIC``/``REAL_QID`` (scheduled and half messages), ``RETRY_TOPIC``/``ORIGIN_MESSAGE_ID``
  and ``MAX_RECONSUME_TIMES`` (retries), the transaction's ``TRAN_MSG``/``PGROUP``/
  ``__transactionId__``/``TRANSACTION_CHECK_TIMES``, ``CONSUME_START_TIME``; and not ``DELAY``: a
  resend is delivered now (a delivered scheduled message still carries its level);
- reconsume times 0, born now, from the HTTP caller's address, to a queue the broker picks.

By default the copy goes where the message was meant to go: a retry or dead-letter copy to the topic
it was consumed from (``RETRY_TOPIC``), a scheduled or half message to its ``REAL_TOPIC``; else its
own topic.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message import PROPERTY_UNIQ_KEY, MessageExt
from protocol.message_flags import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK
from protocol.message_id import UniqueIdGenerator
from protocol.message_properties import properties_to_string
from protocol.send_message import SendMessageRequestHeader, SendMessageResponseHeader
from server.http.errors import ApiError
from server.remoting.peer import CURRENT_PEER

#: Properties put by the broker, the schedule, transactions, retries or consumers, never by the
#: producer of the message: left out of the resent copy (see the module's docstring).
NOT_RESENT = frozenset(
    {
        "CLUSTER",
        "REAL_TOPIC",
        "REAL_QID",
        "RETRY_TOPIC",
        "ORIGIN_MESSAGE_ID",
        "MAX_RECONSUME_TIMES",
        "DELAY",
        "TRAN_MSG",
        "PGROUP",
        "__transactionId__",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "CONSUME_START_TIME",
        "MIN_OFFSET",
        "MAX_OFFSET",
    }
)
#: The producer group named in the request (a SEND must name one; no record stores it).
RESEND_PRODUCER_GROUP = "RMQ_QUERY_HTTP_RESEND"
#: The default topic a new topic is created from, as a Java producer sends it (``TBW102``, 4 queues).
DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
#: sysFlag bits of the body itself (compressed, and by what), kept with the stored body.
BODY_FLAGS = COMPRESSED_FLAG | COMPRESSION_TYPE_MASK

#: The broker's refusals as HTTP statuses: what the caller can act on.
_STATUS = {
    ResponseCode.TOPIC_NOT_EXIST: (404, "not_found"),
    ResponseCode.NO_PERMISSION: (403, "forbidden"),
    ResponseCode.MESSAGE_ILLEGAL: (400, "bad_request"),
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: (404, "not_found"),
    ResponseCode.SERVICE_NOT_AVAILABLE: (503, "unavailable"),
    ResponseCode.SYSTEM_BUSY: (503, "unavailable"),
    # the store could not be written ("create mapped file failed"): the topic and queue are checked first
    ResponseCode.SYSTEM_ERROR: (503, "unavailable"),
}

SendProcess = Callable[[RemotingCommand], RemotingCommand | Awaitable[RemotingCommand]]


def default_target(msg: MessageExt) -> str:
    """Where the message was meant to go (see the module's docstring)."""
    props = msg.properties
    if msg.topic.startswith(("%RETRY%", "%DLQ%")) and props.get("RETRY_TOPIC"):
        return props["RETRY_TOPIC"]
    if props.get("REAL_TOPIC") and msg.topic in (
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "rmq_sys_wheel_timer",
    ):
        return props["REAL_TOPIC"]
    return msg.topic


def resend_request(msg: MessageExt, topic: str, unique_key: str, born_timestamp: int) -> RemotingCommand:
    """The SEND_MESSAGE_V2 request a producer holding ``msg`` would make to send it to ``topic``."""
    props = {k: v for k, v in msg.properties.items() if k not in NOT_RESENT}
    props[PROPERTY_UNIQ_KEY] = unique_key
    body = msg.stored_body if msg.stored_body is not None else msg.body
    header = SendMessageRequestHeader(
        producer_group=RESEND_PRODUCER_GROUP,
        topic=topic,
        default_topic=DEFAULT_TOPIC,
        default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
        queue_id=-1,  # the broker picks a writable queue
        sys_flag=msg.sys_flag & BODY_FLAGS,
        born_timestamp=born_timestamp,
        flag=msg.flag,
        properties=properties_to_string(props),
        reconsume_times=0,
    )
    return RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2, ext_fields=header.to_ext_fields(v2=True), body=bytes(body)
    )


@dataclass(frozen=True, slots=True)
class Resent:
    """Where the copy went."""

    topic: str
    unique_key: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int

    def json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "uniqueKey": self.unique_key,
            "offsetMsgId": self.offset_msg_id,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
        }


class Resender:
    """Resends through the write path's SEND processor (``process``: its dispatcher entry)."""

    def __init__(self, process: SendProcess, ids: UniqueIdGenerator | None = None) -> None:
        self._process = process
        self._ids = ids or UniqueIdGenerator()

    async def resend(self, msg: MessageExt, topic: str, peer: tuple[str, int]) -> Resent:
        """Send a copy of ``msg`` to ``topic`` as the producer at ``peer`` would; ``ApiError`` when
        the broker refuses it (its code and remark in the answer)."""
        unique_key = self._ids.next_id()
        request = resend_request(msg, topic, unique_key, time.time_ns() // 1_000_000)
        token = CURRENT_PEER.set(peer)  # the processor takes the born host from the connection's peer
        try:
            answer = self._process(request)
        finally:
            CURRENT_PEER.reset(token)
        if inspect.isawaitable(answer):
            answer = await answer  # a SEND that created a topic is answered once topics.json holds it
        assert isinstance(answer, RemotingCommand)
        if answer.code != ResponseCode.SUCCESS:
            status, error = _STATUS.get(answer.code, (409, "refused"))
            raise ApiError(
                status, error, f"the broker refused the resend (code {answer.code}): {answer.remark or ''}"
            )
        header = SendMessageResponseHeader.from_ext_fields(answer.ext_fields)
        return Resent(topic, unique_key, header.msg_id, header.queue_id, header.queue_offset)
