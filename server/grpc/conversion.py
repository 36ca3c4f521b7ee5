"""A v2 ``Message`` turned into the SEND a 5.x Proxy makes of it, and the answer back; sans-IO.

``SendMessageActivity.buildMessage``/``buildMessageProperty`` and ``ProducerProcessor``'s request
header, as rules over values (the caller passes the peer's address and the time):

- user properties first, each key and value free of control characters and no key the broker
  reserves (``MessageConst.STRING_HASH_SET``: ILLEGAL_MESSAGE_PROPERTY_KEY), at most 128 of them and,
  with the tag and keys, 16 KiB (MESSAGE_PROPERTIES_TOO_LARGE); the body not empty
  (MESSAGE_BODY_EMPTY) nor over the store's ``maxMessageSize`` (MESSAGE_BODY_TOO_LARGE);
- ``TAGS`` (when not empty), ``KEYS`` (joined by a space), ``UNIQ_KEY`` = the message id the client
  made (ILLEGAL_MESSAGE_ID when blank), ``RECONSUME_TIME`` = the delivery attempt, ``PGROUP`` = the
  topic (the Proxy's producer group), ``__SHARDINGKEY`` = the message group (FIFO),
  ``TRACE_CONTEXT``, ``__BORNHOST`` (the client's, else the peer's address) and ``BORN_TIMESTAMP``,
  which is also the record's born time;
- a delivery timestamp (at most a day ahead: ILLEGAL_DELIVERY_TIME) becomes ``TIMER_DELIVER_MS``
  (ms), which the broker's timer wheel delivers at that time to its precision
  (``server.broker.timer_messages``); only in the Proxy's ``useDelayLevel`` mode
  (``SendLimits.use_delay_level``, off by default as in the Proxy) is a delay level put as well
  (``computeDelayLevel``: the first level whose delay exceeds the wait, else the last), and then the
  broker drops ``TIMER_DELIVER_MS`` (``HookUtils.checkIfTimerMessage``) and delivers by level;
- ``Encoding.GZIP`` sets the compressed sysFlag bit, as the Proxy does;
- a TRANSACTION message is a half message: the prepared sysFlag bits, ``TRAN_MSG=true`` and its
  orphaned-transaction recovery duration (at most an hour: BAD_REQUEST) as
  ``CHECK_IMMUNITY_TIME_IN_SECONDS``; ``put_message`` then stores it as for a 4.x producer;
- the message's type must be one the topic accepts (``DefaultTopicMessageTypeValidator``: the
  topic's ``message.type`` attribute, NORMAL when absent, MIXED takes all):
  MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.

The queue: a message group picks ``consistentHash(group.hashCode(), write queues)`` (Guava's
algorithm, so a group lands on the queue a 5.x Proxy would pick), otherwise the next queue round
robin. The header is ``ProducerProcessor``'s (default topic ``TBW102``, 4 default queues, flag 0,
reconsume times 0); ``server.broker.put_message`` then makes the record as for any SEND.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from protocol.index_key import java_string_hash
from protocol.java_hashmap import as_java_hashmap
from protocol.message_flags import TRANSACTION_PREPARED_TYPE
from protocol.message_properties import properties_to_string
from protocol.send_message import SendMessageRequestHeader
from server.grpc.v2 import Code, Encoding, MessageType, definition
from server.grpc.validation import (
    GrpcStatusError,
    has_control_character,
    is_blank,
    validate_key,
    validate_message_group,
    validate_tag,
)

#: Property names a user property may not take (``MessageConst.STRING_HASH_SET``, 5.x).
SYSTEM_PROPERTY_NAMES = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
        "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY",
        "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
        "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
    }
)  # fmt: skip

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY = "DELAY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"

#: ``MessageSysFlag.COMPRESSED_FLAG``.
COMPRESSED_FLAG = 0x1
#: The default topic and queue count a Proxy's SEND names (``ProducerProcessor``).
DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4

#: ``TopicMessageType`` values (a topic's ``message.type`` attribute) and what each accepts.
TOPIC_MESSAGE_TYPES: dict[str, tuple[int, ...]] = {
    "NORMAL": (MessageType.NORMAL,),
    "FIFO": (MessageType.FIFO,),
    "DELAY": (MessageType.DELAY,),
    "TRANSACTION": (MessageType.TRANSACTION,),
    "MIXED": (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION),
}
MESSAGE_TYPE_ATTRIBUTE = "message.type"


@dataclass(frozen=True, slots=True)
class SendLimits:
    """The Proxy's bounds on a message (``ProxyConfig`` defaults; the body limit is the store's)."""

    max_body_size: int = 4 * 1024 * 1024
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    max_delay_ms: int = 24 * 3600 * 1000
    #: ``maxTransactionRecoverySecond``: the longest orphaned-transaction recovery duration.
    max_transaction_recovery_s: int = 3600
    body_empty_check: bool = True
    #: ``useDelayLevel``: a delivery time also as the delay level nearest above it (off: the timer
    #: wheel delivers it at its time).
    use_delay_level: bool = False


@dataclass(frozen=True, slots=True)
class BrokerMessage:
    """One v2 message as the Proxy hands it to the broker."""

    topic: str
    body: bytes
    sys_flag: int
    #: The properties in the order Java's ``HashMap`` iterates them (the string the Proxy sends).
    properties: dict[str, str]
    born_timestamp: int
    #: The topic message type it is (``TopicMessageType.parseFromMessageProperty``).
    message_type: str

    @property
    def message_id(self) -> str:
        return self.properties[PROPERTY_UNIQ_KEY]

    @property
    def message_group(self) -> str | None:
        return self.properties.get(PROPERTY_SHARDING_KEY)

    def send_header(self, queue_id: int) -> SendMessageRequestHeader:
        """``ProducerProcessor.buildSendMessageRequestHeader`` for the chosen queue."""
        return SendMessageRequestHeader(
            producer_group=self.topic,
            topic=self.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=queue_id,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            flag=0,
            properties=properties_to_string(self.properties),
            reconsume_times=0,
        )


def timestamp_ms(ts: Timestamp) -> int:
    """A protobuf ``Timestamp`` in ms (``Timestamps.toMillis``)."""
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def compute_delay_level(delivery_ms: int, now_ms: int, delays: Mapping[int, int]) -> int:
    """``ProxyConfig.computeDelayLevel``: the level with the shortest delay longer than the wait
    (``delivery_ms - now_ms``), else the level with the longest delay."""
    if not delays:
        raise GrpcStatusError(Code.INTERNAL_SERVER_ERROR, "the store has no delay levels")
    wait = delivery_ms - now_ms
    ordered = sorted(delays.items(), key=lambda item: (item[1], item[0]))
    for level, delay in ordered:
        if delay > wait:
            return level
    return ordered[-1][0]


def message_type_of(properties: Mapping[str, str]) -> str:
    """``TopicMessageType.parseFromMessageProperty``."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return "TRANSACTION"
    if any(
        k in properties for k in (PROPERTY_DELAY, "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
    ):
        return "DELAY"
    if PROPERTY_SHARDING_KEY in properties:
        return "FIFO"
    return "NORMAL"


def topic_message_type(attributes: Mapping[str, str]) -> str:
    """``TopicConfig.getTopicMessageType``: the ``message.type`` attribute, NORMAL when absent."""
    return attributes.get(MESSAGE_TYPE_ATTRIBUTE, "NORMAL")


def check_message_type(topic_type: str, message_type: str) -> None:
    """``DefaultTopicMessageTypeValidator.validate``."""
    if message_type == "UNSPECIFIED" or (message_type != topic_type and topic_type != "MIXED"):
        raise GrpcStatusError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {topic_type}, "
            f"but actual type is {message_type}",
        )


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def to_broker_message(
    message: definition.Message,
    *,
    peer_host: str,
    now_ms: int,
    delays: Mapping[int, int],
    limits: SendLimits = SendLimits(),
) -> BrokerMessage:
    """The broker message of one v2 ``Message``, or ``GrpcStatusError`` with the Proxy's status."""
    body = bytes(message.body)
    if limits.body_empty_check and not body:
        raise GrpcStatusError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if limits.max_body_size > 0 and len(body) > limits.max_body_size:
        raise GrpcStatusError(
            Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limits.max_body_size}"
        )
    system = message.system_properties
    user = dict(message.user_properties)
    if len(user) > limits.user_property_max_num:
        raise GrpcStatusError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties, max is {limits.user_property_max_num}",
        )
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control_character(key):
            raise GrpcStatusError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character"
            )
        if has_control_character(value):
            raise GrpcStatusError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character"
            )
        size += _utf8_len(key) + _utf8_len(value)
    props: dict[str, str] = dict(user)
    tag = system.tag
    validate_tag(tag)
    if tag:
        props[PROPERTY_TAGS] = tag
    size += _utf8_len(tag)
    keys = list(system.keys)
    for key in keys:
        validate_key(key)
        size += _utf8_len(key)
    if keys:
        props[PROPERTY_KEYS] = " ".join(keys)
    if size > limits.max_user_property_size:
        raise GrpcStatusError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {limits.max_user_property_size}",
        )
    message_id = system.message_id
    if is_blank(message_id):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[PROPERTY_UNIQ_KEY] = message_id
    sys_flag = 0
    if system.body_encoding == Encoding.GZIP:
        sys_flag |= COMPRESSED_FLAG
    if system.message_type == MessageType.TRANSACTION:
        # ``buildSysFlag`` and ``buildMessageProperty``: a half message, kept back until
        # EndTransaction (or the check-back) decides it; the recovery duration is the broker's
        # check immunity, at most ``maxTransactionRecoverySecond``.
        sys_flag |= TRANSACTION_PREPARED_TYPE
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = int(system.orphaned_transaction_recovery_duration.seconds)
            if limits.max_transaction_recovery_s > 0 and seconds > limits.max_transaction_recovery_s:
                raise GrpcStatusError(
                    Code.BAD_REQUEST,
                    "the max transaction recovery time of message is too large, "
                    f"max is {limits.max_transaction_recovery_s}",
                )
            props[PROPERTY_CHECK_IMMUNITY_TIME] = str(seconds)
    if system.HasField("delivery_timestamp"):
        delivery_ms = timestamp_ms(system.delivery_timestamp)
        if limits.max_delay_ms > 0 and delivery_ms - now_ms > limits.max_delay_ms:
            raise GrpcStatusError(
                Code.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {limits.max_delay_ms}",
            )
        if limits.use_delay_level:
            props[PROPERTY_DELAY] = str(compute_delay_level(delivery_ms, now_ms, delays))
        props[PROPERTY_TIMER_DELIVER_MS] = str(delivery_ms)
    props[PROPERTY_RECONSUME_TIME] = str(system.delivery_attempt)
    topic = message.topic.name
    props[PROPERTY_PRODUCER_GROUP] = topic
    group = system.message_group
    if group:
        validate_message_group(group, limits.max_message_group_size)
        props[PROPERTY_SHARDING_KEY] = group
    if system.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = system.trace_context
    born_host = system.born_host if not is_blank(system.born_host) else peer_host
    if not is_blank(born_host):
        props[PROPERTY_BORN_HOST] = born_host
    born = timestamp_ms(system.born_timestamp) if system.HasField("born_timestamp") else now_ms
    props[PROPERTY_BORN_TIMESTAMP] = str(born)
    return BrokerMessage(
        topic=topic,
        body=body,
        sys_flag=sys_flag,
        properties=as_java_hashmap(props),
        born_timestamp=born,
        message_type=message_type_of(props),
    )


# -- queue selection ---------------------------------------------------------------------------------

_LCG_MULTIPLIER = 2862933555777941757
_MASK64 = (1 << 64) - 1


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)``: a bucket in ``[0, buckets)`` that moves for
    only ``1/n`` of the inputs when a bucket is added. ``value`` is a Java long (signed)."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        # (int) (state >>> 33): the top 31 bits as a non-negative int, plus one, over 2^31
        next_double = ((state >> 33) + 1) / 2.0**31
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def group_queue(message_group: str, write_queue_nums: int) -> int:
    """The write queue of a message group (``SendMessageQueueSelector``: ``group.hashCode()``)."""
    return consistent_hash(java_string_hash(message_group), write_queue_nums)
