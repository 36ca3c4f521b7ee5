"""What the broker stores for a SEND: the records a request becomes, or the reason it is refused.

This is the part of ``SendMessageProcessor``, ``DefaultMessageStore.putMessage(s)`` and
``CommitLog.asyncPutMessage(s)`` between the decoded request and the append, with no sockets and no
files, so that it can be checked against the records the real 4.9.7 broker wrote:

- A single message: the client's properties are parsed into a ``java.util.HashMap``, ``CLUSTER`` is
  put, ``WAIT`` is taken out while the map is serialized (in HashMap order) and put back.
- ``DELAY`` (levels 1..18 by default, higher is capped) on a non-transactional or COMMIT message:
  ``REAL_TOPIC`` and ``REAL_QID`` are put, the map is serialized again (now with ``WAIT``), and the
  record goes to ``SCHEDULE_TOPIC_XXXX`` queue level - 1. ``delivery_record`` is the record the
  schedule service writes when the delay is over.
- A 5.x timer message (``TIMER_DELIVER_MS``/``TIMER_DELAY_MS``/``TIMER_DELAY_SEC``, no delay
  level) due later goes to ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` and
  ``REAL_TOPIC``/``REAL_QID`` (``timer_messages``); with a delay level those three are dropped.
- ``TRAN_MSG=true`` (a transaction's half message): ``REAL_TOPIC``/``REAL_QID`` are put, the sysFlag's
  transaction bits cleared, and the record goes to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0. The second
  phase (END_TRANSACTION, the check-back) is not implemented.
- A batch: each message's properties bytes are kept as sent, then ``\\x02`` (unless they already end
  with it) and the serialized ``HashMap(batch header properties + CLUSTER)``; BODYCRC is computed per
  message; one store timestamp, consecutive queue offsets.

Refusals raise ``PutRefused`` with the broker's response code and remark.
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass

from protocol.codes import ResponseCode
from protocol.custom_header_fields import java_parse_int
from protocol.java_hashmap import JavaHashMap
from protocol.message import MessageExt
from protocol.message_flags import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_properties import properties_to_string, string_to_properties
from protocol.record_layout import PROPERTIES_MAX_LENGTH, TOPIC_MAX_LENGTH_V1
from protocol.send_message import SendMessageRequestHeader, decode_batch_body
from server.broker.timer_messages import (
    DEFAULT_TIMER_SETTINGS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    TimerRefused,
    TimerSettings,
    drop_timer_request,
    is_timer_request,
    wheel_time,
)
from store.errors import StoreError
from store.write.writer import StoreRecord

PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_WAIT = "WAIT"
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"

#: Levels of the default ``messageDelayLevel`` ("1s 5s ... 2h"); ``PutContext.max_delay_level``.
MAX_DELAY_LEVEL = 18

#: Java reads the properties length as a short and the topic length as a byte (``checkMessage``
#: counts the topic's chars against ``Byte.MAX_VALUE``).
_MAX_PROPERTIES_BYTES = PROPERTIES_MAX_LENGTH
#: A ``BatchItem``'s properties.
_PROPERTIES = operator.itemgetter(2)
_MAX_TOPIC_LENGTH = TOPIC_MAX_LENGTH_V1


class PutRefused(StoreError):
    """The broker would not store this request: its response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class StoreUnavailable(PutRefused):
    """The store cannot take the records now (its disk is full): ``SERVICE_NOT_AVAILABLE``, nothing
    stored. A condition of the server, not of the request: the processor logs it."""


def disk_full(commitlog_ratio: float, consume_queue_ratio: float, index_ratio: float) -> StoreUnavailable:
    """``SERVICE_NOT_AVAILABLE`` (14) with ``handlePutMessageResult``'s remark and ``diskUtil``'s
    figures (each ``UtilAll.getDiskPartitionSpaceUsedPercent``, as ``%5.2f``)."""
    return StoreUnavailable(
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk "
        f"is full [CL: {commitlog_ratio:5.2f} CQ: {consume_queue_ratio:5.2f} INDEX: {index_ratio:5.2f}], "
        "messages are put to the slave, message store has been shut down, etc.",
    )


def message_illegal(max_message_size: int) -> PutRefused:
    """``MESSAGE_ILLEGAL`` (13) with ``handlePutMessageResult``'s remark."""
    return PutRefused(
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        f"msg body length limit {max_message_size}B, msg properties length limit 32KB.",
    )


@dataclass(frozen=True, slots=True)
class PutContext:
    """Who stores: the cluster name put into ``CLUSTER``, the size limit, and the sender's address."""

    cluster: str
    max_message_size: int
    born_host: str
    born_port: int
    #: Levels in the store's ``messageDelayLevel`` table: a higher DELAY is capped to it.
    max_delay_level: int = MAX_DELAY_LEVEL
    #: The 5.x timer settings (``timer_messages``) and the time a timer message's delay counts
    #: from (None: the clock when the record is made).
    timer: TimerSettings = DEFAULT_TIMER_SETTINGS
    now_ms: int | None = None


def java_utf8(text: str) -> bytes:
    """``String.getBytes(UTF_8)``: a lone UTF-16 surrogate (JSON allows ``\\ud800``) becomes ``?``."""
    return text.encode("utf-8", "replace")


def _serialized(props: JavaHashMap) -> bytes:
    """The map as the broker stores it: ``messageProperties2String`` in HashMap order, UTF-8 bytes."""
    return java_utf8(properties_to_string(props.ordered()))


#: The top stack frame ``RemotingHelper.exceptionSimpleDesc`` appends to a ``NumberFormatException``
#: from ``Integer.parseInt`` (JDK 17, the runtime the 4.9.7 broker here runs on).
_NUMBER_FORMAT_FRAME = (
    "java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)"
)


def number_format_refusal(value: str) -> PutRefused:
    """What the broker answers when ``Integer.parseInt`` of a property throws while it stores a SEND.

    ``CommitLog.asyncPutMessage`` calls ``msg.getDelayTimeLevel()`` (``Integer.parseInt`` of
    ``DELAY``) synchronously inside the send processor; nothing there catches the exception, so
    ``NettyRemotingAbstract.processRequestCommand`` answers ``SYSTEM_ERROR`` with
    ``RemotingHelper.exceptionSimpleDesc(e)``: the exception and its top frame. Nothing is stored.
    """
    return PutRefused(
        ResponseCode.SYSTEM_ERROR,
        f'java.lang.NumberFormatException: For input string: "{value}", {_NUMBER_FORMAT_FRAME}',
    )


def delay_level(props: JavaHashMap) -> int:
    """``Message.getDelayTimeLevel``: ``Integer.parseInt(DELAY)``, 0 when absent.

    Java's rules, not Python's ``int``: a value ``int`` takes but Java refuses (``" 3"``, ``"1_0"``,
    ``"2147483648"``) used to be stored in ``SCHEDULE_TOPIC_XXXX`` and answered SEND_OK, while the
    reput (Java's, and ours) cannot parse it and gives the record no queue entry, so it was never
    delivered and the schedule queue's offsets no longer matched its records.
    """
    value = props.get(PROPERTY_DELAY)
    if value is None:
        return 0
    level = java_parse_int(value)
    if level is None:
        raise number_format_refusal(value)
    return level


def check_record(rec: StoreRecord, ctx: PutContext) -> None:
    """``checkMessage`` and ``MessageExtEncoder.encode``: topic, properties and body size limits."""
    props_len = (
        len(rec.properties.encode("utf-8")) if isinstance(rec.properties, str) else len(rec.properties)
    )
    if len(rec.topic) > _MAX_TOPIC_LENGTH or props_len > _MAX_PROPERTIES_BYTES:
        raise message_illegal(ctx.max_message_size)
    # The encoder's second limit (whole record > body limit + 64 KiB) cannot be reached once these hold.
    if len(rec.body) > ctx.max_message_size:
        raise message_illegal(ctx.max_message_size)


def is_half_message(header: SendMessageRequestHeader) -> bool:
    """Whether a SEND is a transaction's half message: ``Boolean.parseBoolean(TRAN_MSG)``."""
    props = string_to_properties(header.properties or "")
    return (props.get(PROPERTY_TRANSACTION_PREPARED) or "").lower() == "true"


def single_record(header: SendMessageRequestHeader, body: bytes, ctx: PutContext) -> StoreRecord:
    """The record SEND_MESSAGE / SEND_MESSAGE_V2 (not a batch) stores."""
    props = JavaHashMap(string_to_properties(header.properties or ""))
    props.put(PROPERTY_CLUSTER, ctx.cluster)
    wait = props.remove(PROPERTY_WAIT)
    stored = _serialized(props)
    if wait is not None:
        props.put(PROPERTY_WAIT, wait)
    topic, queue_id, sys_flag = header.topic, header.queue_id, header.sys_flag
    if (props.get(PROPERTY_TRANSACTION_PREPARED) or "").lower() == "true":
        # TransactionalMessageBridge.parseHalfMessageInner; the half message then goes through
        # CommitLog.asyncPutMessage as a non-transactional one, which parses DELAY: a value Java
        # cannot parse refuses it there too. (A valid positive DELAY on a half message is scheduled
        # by the broker; here it stays in the half topic.)
        delay_level(props)
        props.put(PROPERTY_REAL_TOPIC, topic)
        props.put(PROPERTY_REAL_QID, str(queue_id))
        sys_flag = (sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_NOT_TYPE
        topic, queue_id = TRANS_HALF_TOPIC, 0
        stored = _serialized(props)
    elif sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        level = delay_level(props)
        if level > 0:
            level = min(level, ctx.max_delay_level)
            drop_timer_request(props)
            props.put(PROPERTY_REAL_TOPIC, topic)
            props.put(PROPERTY_REAL_QID, str(queue_id))
            stored = _serialized(props)
            topic, queue_id = SCHEDULE_TOPIC, level - 1
        elif is_timer_request(topic, props):
            now = ctx.now_ms if ctx.now_ms is not None else time.time_ns() // 1_000_000
            try:
                out = wheel_time(props, now, ctx.timer)
            except TimerRefused as refused:
                raise PutRefused(refused.code, refused.remark) from None
            if out is not None:
                props.put(PROPERTY_TIMER_OUT_MS, str(out))
                props.put(PROPERTY_REAL_TOPIC, topic)
                props.put(PROPERTY_REAL_QID, str(queue_id))
                stored = _serialized(props)
                topic, queue_id = TIMER_TOPIC, 0
    return checked_record(header, body, stored, topic, queue_id, sys_flag, ctx)


def checked_record(
    header: SendMessageRequestHeader,
    body: bytes,
    stored: str,
    topic: str,
    queue_id: int,
    sys_flag: int,
    ctx: PutContext,
) -> StoreRecord:
    """The record one sent message becomes (the header's flag, born time and reconsume count, the
    sender's host), after the CommitLog's checks (``check_record``): a SEND's or a reply's."""
    rec = StoreRecord(
        topic,
        bytes(body),
        stored,
        queue_id=queue_id,
        flag=header.flag,
        sys_flag=sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=ctx.born_host,
        born_port=ctx.born_port,
        reconsume_times=header.reconsume_times or 0,
    )
    check_record(rec, ctx)
    return rec


def batch_records(header: SendMessageRequestHeader, body: bytes, ctx: PutContext) -> list[StoreRecord]:
    """The records SEND_BATCH_MESSAGE stores; ``MessageDecodeError`` when ``body`` does not parse
    (before any refusal, as the processor always decoded it first).

    Each message keeps its own properties with the batch header's (and ``CLUSTER``) appended, which
    ``decode_batch_body`` does while it splits the body (in C with the accelerators built)."""
    props = JavaHashMap(string_to_properties(header.properties or ""))
    props.put(PROPERTY_CLUSTER, ctx.cluster)
    items = decode_batch_body(body, _serialized(props))
    if len(header.topic) > _MAX_TOPIC_LENGTH:
        raise PutRefused(ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(header.topic)}")
    if len(body) > ctx.max_message_size:
        raise message_illegal(ctx.max_message_size)
    # asyncPutMessages refuses transactions and delays in a batch (the batch header's own properties).
    if header.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE or delay_level(props) > 0:
        raise message_illegal(ctx.max_message_size)
    if not items or max(map(len, map(_PROPERTIES, items))) > _MAX_PROPERTIES_BYTES:
        raise message_illegal(ctx.max_message_size)
    # Every record shares these (the writer appends such a batch in one compiled call); StoreRecord's
    # fields by position: topic, body, properties, queue_id, flag, sys_flag, born_timestamp,
    # born_host, born_port, reconsume_times.
    topic, queue_id, sys_flag, born_ts = header.topic, header.queue_id, header.sys_flag, header.born_timestamp
    host, port, times = ctx.born_host, ctx.born_port, header.reconsume_times or 0
    return [
        StoreRecord(topic, item_body, joined, queue_id, flag, sys_flag, born_ts, host, port, times)
        for flag, item_body, joined in items
    ]


def delivery_record(scheduled: MessageExt) -> StoreRecord:
    """``ScheduleMessageService.messageTimeup``: the record put back into the real topic when due.

    The properties are the stored ones re-serialized from a fresh ``HashMap`` (``DELAY`` and ``WAIT``
    are changed only after the string is made, so they stay); topic and queue come from
    ``REAL_TOPIC``/``REAL_QID``; body, flag, sysFlag, born time and host, store host and reconsume
    times are the scheduled record's.
    """
    props = JavaHashMap(scheduled.properties)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    real_qid = props.get(PROPERTY_REAL_QID)
    if real_topic is None or real_qid is None:
        raise StoreError(f"scheduled record at {scheduled.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    queue_id = java_parse_int(real_qid)  # messageTimeup: Integer.parseInt(REAL_QID)
    if queue_id is None:
        raise StoreError(f"scheduled record at {scheduled.commit_log_offset} has REAL_QID={real_qid!r}")
    return StoreRecord(
        real_topic,
        scheduled.stored_body if scheduled.stored_body is not None else scheduled.body,
        _serialized(props),
        queue_id=queue_id,
        flag=scheduled.flag,
        sys_flag=scheduled.sys_flag,
        born_timestamp=scheduled.born_timestamp,
        born_host=scheduled.born_host,
        born_port=scheduled.born_port,
        reconsume_times=scheduled.reconsume_times,
        store_host=scheduled.store_host,
        store_port=scheduled.store_port,
    )
