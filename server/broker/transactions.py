"""The records of a transaction's second phase, as the 4.9.7 broker writes them (sans-IO).

A half message (``put_message``: ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, ``REAL_TOPIC``/``REAL_QID``)
becomes, by the rules here:

- on commit (``EndTransactionProcessor.endMessageTransaction``): the real message, in its real topic
  and queue. Java clears ``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG`` from the message's property
  map only *after* the stored property string was made from it, so the committed record keeps all
  three (the real broker's records do: see the golden captures); sysFlag's transaction bits say
  COMMIT, ``preparedTransactionOffset`` is the half message's CommitLog offset.
- on commit or rollback (``addRemoveTagInTransactionOp``): an op record in
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, same queue id as the half, tag ``d``, body = the half message's
  queue offset as decimal text, born and stored by the broker itself. Its property string is made
  before the record gets its ``UNIQ_KEY`` and while ``WAIT`` is still true, so it holds
  ``TAGS=d`` and ``WAIT=true`` only.
- on a check-back (``putBackHalfMsgQueue`` / ``renewHalfMessageInner``): a copy of the half message
  appended to the half queue with ``TRANSACTION_CHECK_TIMES`` set (flag and reconsume times are not
  copied, as in Java), and the CHECK_TRANSACTION_STATE body: the half message as Java's
  ``MessageDecoder.encode`` writes it, with the real topic and queue, the copy's offsets, and
  ``WAIT=false`` (Java's copy shares the original's property map and sets it there).
- when checked ``transactionCheckMax`` times (``DefaultTransactionalMessageCheckListener``): the half
  message moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0; it is never committed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from protocol.codes import ResponseCode
from protocol.custom_header_fields import java_parse_int
from protocol.custom_headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from protocol.java_hashmap import JavaHashMap
from protocol.message import MessageExt, encode_message
from protocol.message_flags import (
    COMPRESSED_FLAG,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.record_layout import MAGIC_CODE_V1
from server.broker.put_message import (
    PROPERTY_REAL_QID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT,
    TRANS_HALF_TOPIC,
    PutRefused,
    _serialized,
    number_format_refusal,
)
from server.broker.writable_store import WritableStore
from store.config.topics import PERM_READ, PERM_WRITE, TopicConfig
from store.write.writer import StoreRecord

TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: ``MixAll.CID_SYS_RMQ_TRANS``: the group whose consumer offsets are the check-back's progress in
#: the half and op queues (kept in ``consumerOffset.json`` like any group's).
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
#: ``TransactionalMessageUtil.REMOVETAG``: the tag of an op record (the half message is decided).
REMOVE_TAG = "d"

PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"

#: ``BrokerConfig`` defaults.
DEFAULT_CHECK_INTERVAL_MS = 60_000
DEFAULT_TRANSACTION_TIMEOUT_MS = 6_000
DEFAULT_CHECK_MAX = 15

FIND_FAILED = "Find prepared transaction message failed"
PRODUCER_GROUP_WRONG = "The producer group wrong"
STATE_TABLE_OFFSET_WRONG = "The transaction state table offset wrong"
COMMIT_LOG_OFFSET_WRONG = "The commit log offset wrong"


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """The broker's transaction options (``BrokerConfig``)."""

    #: ``transactionCheckInterval``: how often the half queue is walked for undecided messages.
    check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    #: ``transactionTimeOut``: a half message younger than this is not asked about yet.
    timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    #: ``transactionCheckMax``: check-backs before the half message is discarded.
    check_max: int = DEFAULT_CHECK_MAX
    #: ``rejectTransactionMessage``: refuse transactional SENDs (NO_PERMISSION).
    reject_transaction_message: bool = False


def system_topic(store: WritableStore, topic: str, now_ms: int) -> TopicConfig:
    """The config of a transaction system topic, created with one read-write queue when missing, as
    the broker creates the half topic at its first check (``createTopicInSendMessageBackMethod``) and
    ``TRANS_CHECK_MAX_TIME_TOPIC`` at the first discard. Created here before the first record goes
    to it, so the writer does not list it with its default four queues. The op topic is never
    created: the broker does not list it (``store.config.topics.UNLISTED_TOPICS``)."""
    config = store.topic_config(topic)
    if config is None:
        config = TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE)
        store.topics.put(config, now_ms)
        store.topics.save_soon()
    return config


def reject_remark(broker_ip: str) -> str:
    """NO_PERMISSION's remark for a transactional SEND when ``rejectTransactionMessage`` is set."""
    return f"the broker[{broker_ip}] sending transaction message is forbidden"


def check_prepared(half: MessageExt | None, header: EndTransactionRequestHeader) -> str | None:
    """``checkPrepareMessage``: None when the half message is the one the request names, else the
    SYSTEM_ERROR remark. A half message without ``PGROUP`` fails as Java's null dereference would."""
    if half is None:
        return FIND_FAILED
    group = half.properties.get(PROPERTY_PRODUCER_GROUP)
    if group is None or group != header.producer_group:
        return PRODUCER_GROUP_WRONG
    if half.queue_offset != header.tran_state_table_offset:
        return STATE_TABLE_OFFSET_WRONG
    if half.commit_log_offset != header.commit_log_offset:
        return COMMIT_LOG_OFFSET_WRONG
    return None


def _stored_body(msg: MessageExt) -> bytes:
    return msg.stored_body if msg.stored_body is not None else msg.body


def real_queue(half: MessageExt) -> tuple[str, int]:
    """``REAL_TOPIC`` and ``REAL_QID`` of a half message; ``PutRefused`` as Java fails without them."""
    topic = half.properties.get(PROPERTY_REAL_TOPIC)
    qid = half.properties.get(PROPERTY_REAL_QID)
    if topic is None or qid is None:
        raise PutRefused(
            ResponseCode.SYSTEM_ERROR, f"the half message at {half.commit_log_offset} has no real topic"
        )
    queue_id = java_parse_int(qid)
    if queue_id is None:
        raise number_format_refusal(qid)
    return topic, queue_id


def committed_record(half: MessageExt) -> StoreRecord:
    """The real message a commit writes (``endMessageTransaction`` + ``sendFinalMessage``)."""
    topic, queue_id = real_queue(half)
    return StoreRecord(
        topic,
        _stored_body(half),
        _serialized(JavaHashMap(half.properties)),
        queue_id=queue_id,
        flag=half.flag,
        sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        born_port=half.born_port,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.commit_log_offset,
        store_host=half.store_host,
        store_port=half.store_port,
    )


def op_record(half: MessageExt, broker_host: str, broker_port: int, now_ms: int) -> StoreRecord:
    """The op record that marks ``half`` decided (commit or rollback alike)."""
    props = JavaHashMap()
    props.put(PROPERTY_TAGS, REMOVE_TAG)
    props.put(PROPERTY_WAIT, "true")
    return StoreRecord(
        TRANS_OP_HALF_TOPIC,
        str(half.queue_offset).encode(),
        _serialized(props),
        queue_id=half.queue_id,
        born_timestamp=now_ms,
        born_host=broker_host,
        born_port=broker_port,
        store_host=broker_host,
        store_port=broker_port,
    )


def op_half_offset(op: MessageExt) -> int | None:
    """The half queue offset an op record decides (``getLong`` of its body), None when it is not
    a ``d`` record or its body is no number (the broker logs those and passes over them)."""
    if op.tags != REMOVE_TAG:
        return None
    try:
        text = op.body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or not (text.isascii() and (text.isdigit() or (text[0] == "-" and text[1:].isdigit()))):
        return None
    return int(text)


def renewed_half_record(half: MessageExt, *, immunity: bool = False) -> StoreRecord:
    """The copy of ``half`` put back into the half queue (``renewHalfMessageInner``); with
    ``immunity``, ``TRAN_PREPARED_QUEUE_OFFSET`` names the first copy's queue offset
    (``renewImmunityHalfMessageInner``). ``half.properties`` already carries the new check count."""
    props = JavaHashMap(half.properties)
    if immunity:
        props.put(
            PROPERTY_PREPARED_QUEUE_OFFSET,
            half.properties.get(PROPERTY_PREPARED_QUEUE_OFFSET, str(half.queue_offset)),
        )
    return StoreRecord(
        half.topic,
        _stored_body(half),
        _serialized(props),
        queue_id=half.queue_id,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        born_port=half.born_port,
        store_host=half.store_host,
        store_port=half.store_port,
    )


def discard_record(half: MessageExt) -> StoreRecord:
    """Where a half message checked too often goes (``toMessageExtBrokerInner``)."""
    return StoreRecord(
        TRANS_CHECK_MAX_TIME_TOPIC,
        _stored_body(half),
        _serialized(JavaHashMap(half.properties)),
        queue_id=0,
        flag=half.flag,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        born_port=half.born_port,
        reconsume_times=half.reconsume_times,
        store_host=half.store_host,
        store_port=half.store_port,
    )


@dataclass(frozen=True, slots=True)
class CheckBack:
    """One CHECK_TRANSACTION_STATE to send: to a producer of ``group``, these ext fields and body."""

    group: str
    ext_fields: dict[str, str]
    body: bytes


def check_back(half: MessageExt, copy_offset: int, copy_queue_offset: int, copy_msg_id: str) -> CheckBack:
    """``sendCheckMessage`` for ``half`` (with its new check count) whose copy was put at
    ``copy_offset`` / ``copy_queue_offset``: the header names the copy, the body is the message as
    the producer's listener sees it (real topic and queue)."""
    unique = half.properties.get(PROPERTY_UNIQ_KEY)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=copy_queue_offset,
        commit_log_offset=copy_offset,
        msg_id=unique,
        transaction_id=unique,
        offset_msg_id=copy_msg_id,
    )
    topic, queue_id = real_queue(half)
    props = JavaHashMap(half.properties)
    props.put(PROPERTY_WAIT, "false")
    shown = replace(
        half,
        topic=topic,
        queue_id=queue_id,
        queue_offset=copy_queue_offset,
        commit_log_offset=copy_offset,
        magic=MAGIC_CODE_V1,
        body=_stored_body(half),
        stored_body=None,
        sys_flag=half.sys_flag,
    )
    # MessageDecoder.encode(msg, needCompress=false): the stored (possibly compressed) body as is.
    body = encode_message(_uncompressed_view(shown), properties_string=_serialized(props))
    return CheckBack(half.properties.get(PROPERTY_PRODUCER_GROUP) or "", header.to_ext_fields(), body)


def _uncompressed_view(msg: MessageExt) -> MessageExt:
    """``encode_message`` compresses ``body`` when the sysFlag says compressed and no stored body is
    given: hand it the stored bytes as the stored body, so they go out exactly as stored."""
    if msg.sys_flag & COMPRESSED_FLAG:
        return replace(msg, stored_body=msg.body)
    return msg


__all__ = [
    "CHECK_GROUP",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "CheckBack",
    "TransactionSettings",
    "check_back",
    "check_prepared",
    "committed_record",
    "discard_record",
    "op_half_offset",
    "op_record",
    "renewed_half_record",
]
