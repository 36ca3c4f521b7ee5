"""Typed views of the custom headers the query server reads and writes, carried in ``extFields``.

Each header is a dataclass whose fields name their Java field and type; how Java reads and writes
such fields (null handling, Java int/long parsing with the field named in the error, booleans, the
``HashMap`` key order on the wire) is ``protocol.custom_header_fields``, the one place for those rules.
A string field is ``None`` when missing unless declared ``required`` (4.9.7 carries on with null).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.custom_header_fields import (
    QUOTED_CHARACTERS,
    boolean_field,
    custom_header,
    int_field,
    java_boolean,
    java_parse_boolean,
    java_string,
    long_field,
    quote_value,
    required_long,
    required_string,
    string_field,
)
from protocol.java_hashmap import as_java_hashmap

__all__ = [
    "PULL_CLASS_FILTER_FLAG",
    "PULL_COMMIT_OFFSET_FLAG",
    "PULL_RESPONSE_FAST_KEYS",
    "PULL_SUBSCRIPTION_FLAG",
    "PULL_SUSPEND_FLAG",
    "QUOTED_CHARACTERS",
    "UNIQUE_KEY_QUERY",
    "CheckTransactionStateRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetRouteInfoRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueueRequestHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
    "is_unique_key_query",
    "java_boolean",
    "java_parse_boolean",
    "java_string",
    "offset_response_fields",
    "quote_value",
    "read_offset",
    "read_timestamp",
    "required_string",
    "timestamp_response_fields",
    "with_unique_key_query",
]

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the extField that turns QUERY_MESSAGE into a unique-key query.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def is_unique_key_query(ext_fields: Mapping[str, str] | None) -> bool:
    """Whether a QUERY_MESSAGE asks for a unique key: the broker tests ``"true".equals(flag)``."""
    return ext_fields is not None and ext_fields.get(UNIQUE_KEY_QUERY) == "true"


def with_unique_key_query(ext_fields: Mapping[str, str], unique: bool) -> dict[str, str]:
    """``ext_fields`` plus ``_UNIQUE_KEY_QUERY`` as the Java client adds it
    (``Boolean.toString``), in Java ``HashMap`` order."""
    return as_java_hashmap({**ext_fields, UNIQUE_KEY_QUERY: java_boolean(unique)})


@custom_header
@dataclass(slots=True, frozen=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12) request: every field is ``@CFNotNull``, but a 4.9.7 broker decodes a missing
    (or, over ROCKETMQ, empty) ``topic``/``key`` as null and queries ``"null"`` in its place; a null
    number ends in a NullPointerException (SYSTEM_ERROR)."""

    topic: str | None = string_field("topic")
    key: str | None = string_field("key")
    max_num: int = int_field("maxNum")
    begin_timestamp: int = long_field("beginTimestamp")
    end_timestamp: int = long_field("endTimestamp")


@custom_header
@dataclass(slots=True, frozen=True)
class QueryMessageResponseHeader:
    """QUERY_MESSAGE (12) response: both fields ``@CFNotNull``; a Java client drops a broker's
    results when either is missing."""

    index_last_update_timestamp: int = long_field("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = long_field("indexLastUpdatePhyoffset")


@custom_header
@dataclass(slots=True, frozen=True)
class ViewMessageRequestHeader:
    """VIEW_MESSAGE_BY_ID (33) request: ``offset`` is ``@CFNotNull``; 5.x clients add ``topic``,
    which the broker ignores."""

    offset: int = long_field("offset")
    topic: str | None = string_field("topic", default=None)

    @staticmethod
    def offset_from(ext_fields: Mapping[str, str] | None) -> int:
        """Only ``offset``, by the same rules: all the broker reads (no header object per request)."""
        return required_long(ext_fields, "offset")


@custom_header
@dataclass(slots=True, frozen=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105) request: ``topic`` is ``@CFNotNull``, yet a 4.9.7 name server
    decodes a missing (or ROCKETMQ-empty) one as null and answers TOPIC_NOT_EXIST for the topic
    ``null``; newer clients add the nullable ``acceptStandardJsonOnly`` (quoted map keys in the route
    JSON)."""

    topic: str | None = string_field("topic")
    accept_standard_json_only: bool | None = boolean_field("acceptStandardJsonOnly", default=None)


@custom_header
@dataclass(slots=True, frozen=True)
class QueueRequestHeader:
    """GET_MIN_OFFSET (31), GET_MAX_OFFSET (30) and GET_EARLIEST_MSG_STORETIME (32) requests: the
    three Java classes have the same two ``@CFNotNull`` fields, ``topic`` and ``queueId``."""

    topic: str = string_field("topic", required=True)
    queue_id: int = int_field("queueId")


@custom_header
@dataclass(slots=True, frozen=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29) request: ``topic``, ``queueId``, ``timestamp``, all ``@CFNotNull``."""

    topic: str = string_field("topic", required=True)
    queue_id: int = int_field("queueId")
    timestamp: int = long_field("timestamp")


def offset_response_fields(offset: int) -> dict[str, str]:
    """The one-field answer of GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and
    QUERY_CONSUMER_OFFSET (``offset``, a Java ``Long``)."""
    return {"offset": str(offset)}


def timestamp_response_fields(timestamp: int) -> dict[str, str]:
    """GET_EARLIEST_MSG_STORETIME's answer (``GetEarliestMsgStoretimeResponseHeader.timestamp``)."""
    return {"timestamp": str(timestamp)}


def read_offset(ext_fields: Mapping[str, str] | None) -> int:
    """``offset`` of an offset answer (client side)."""
    return required_long(ext_fields, "offset")


def read_timestamp(ext_fields: Mapping[str, str] | None) -> int:
    """``timestamp`` of GET_EARLIEST_MSG_STORETIME's answer (client side)."""
    return required_long(ext_fields, "timestamp")


#: ``PullSysFlag`` bits.
PULL_COMMIT_OFFSET_FLAG = 0x1
PULL_SUSPEND_FLAG = 0x2
PULL_SUBSCRIPTION_FLAG = 0x4
PULL_CLASS_FILTER_FLAG = 0x8


@custom_header
@dataclass(slots=True, frozen=True)
class PullMessageRequestHeader:
    """PULL_MESSAGE (11) request: every field ``@CFNotNull`` but ``subscription`` and ``expressionType``."""

    consumer_group: str = string_field("consumerGroup", required=True)
    topic: str = string_field("topic", required=True)
    queue_id: int = int_field("queueId")
    queue_offset: int = long_field("queueOffset")
    max_msg_nums: int = int_field("maxMsgNums")
    sys_flag: int = int_field("sysFlag")
    commit_offset: int = long_field("commitOffset")
    suspend_timeout_millis: int = long_field("suspendTimeoutMillis")
    sub_version: int = long_field("subVersion")
    subscription: str | None = string_field("subscription", default=None)
    expression_type: str | None = string_field("expressionType", default=None)

    @property
    def has_suspend_flag(self) -> bool:
        return bool(self.sys_flag & PULL_SUSPEND_FLAG)

    @property
    def has_subscription_flag(self) -> bool:
        return bool(self.sys_flag & PULL_SUBSCRIPTION_FLAG)


@custom_header
@dataclass(slots=True, frozen=True)
class PullMessageResponseHeader:
    """PULL_MESSAGE (11) response: four ``@CFNotNull`` Longs (absent on the broker's early errors)."""

    suggest_which_broker_id: int = long_field("suggestWhichBrokerId")
    next_begin_offset: int = long_field("nextBeginOffset")
    min_offset: int = long_field("minOffset")
    max_offset: int = long_field("maxOffset")


#: ``PullMessageResponseHeader.encode``'s order (a ``FastCodesHeader`` in 4.9.7: over ROCKETMQ its
#: fields are written in this order, ``protocol.custom_header_fields.fast_codes_order``).
PULL_RESPONSE_FAST_KEYS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")


@custom_header
@dataclass(slots=True, frozen=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14) request: ``consumerGroup``, ``topic``, ``queueId``, all ``@CFNotNull``."""

    consumer_group: str = string_field("consumerGroup", required=True)
    topic: str = string_field("topic", required=True)
    queue_id: int = int_field("queueId")


@custom_header
@dataclass(slots=True, frozen=True)
class UpdateConsumerOffsetRequestHeader:
    """UPDATE_CONSUMER_OFFSET (15) request: group, topic, queue and the offset, all ``@CFNotNull``."""

    consumer_group: str = string_field("consumerGroup", required=True)
    topic: str = string_field("topic", required=True)
    queue_id: int = int_field("queueId")
    commit_offset: int = long_field("commitOffset")


@custom_header
@dataclass(slots=True, frozen=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT (35) request: the client and the one producer or consumer group it leaves."""

    client_id: str | None = string_field("clientID", default=None)
    producer_group: str | None = string_field("producerGroup", default=None)
    consumer_group: str | None = string_field("consumerGroup", default=None)


@custom_header
@dataclass(slots=True, frozen=True)
class ConsumerSendMsgBackRequestHeader:
    """CONSUMER_SEND_MSG_BACK (36) request: a consumer hands back a message it failed to consume.

    ``offset`` (the record's CommitLog offset), ``group`` and ``delayLevel`` are ``@CFNotNull``;
    ``originMsgId`` and ``originTopic`` only feed the broker's consume hooks; ``maxReconsumeTimes``
    is honoured from clients of V3_4_9 on (``send_back.max_reconsume_times``).
    """

    offset: int = long_field("offset")
    group: str = string_field("group", required=True)
    delay_level: int = int_field("delayLevel")
    origin_msg_id: str | None = string_field("originMsgId", default=None)
    origin_topic: str | None = string_field("originTopic", default=None)
    unit_mode: bool = boolean_field("unitMode", default=False)
    max_reconsume_times: int | None = int_field("maxReconsumeTimes", required=False, default=None)


# -- admin requests (``AdminBrokerProcessor``) ------------------------------------------------------
# The broker's decoder logs a missing ``@CFNotNull`` String and carries on with null, so the String
# fields below are optional and the processors answer a null as the broker's code then does (a blank
# topic, a group "null"); a missing or malformed number is SYSTEM_ERROR naming the field, as the
# broker's unboxing of a null Integer fails.


@custom_header
@dataclass(slots=True, frozen=True)
class CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC (17) request: the topic's config as ``mqadmin updateTopic`` sends it."""

    topic: str | None = string_field("topic")
    default_topic: str | None = string_field("defaultTopic")
    read_queue_nums: int = int_field("readQueueNums")
    write_queue_nums: int = int_field("writeQueueNums")
    perm: int = int_field("perm")
    topic_filter_type: str | None = string_field("topicFilterType")
    topic_sys_flag: int | None = int_field("topicSysFlag", required=False, default=None)
    order: bool = boolean_field("order", default=False)


@custom_header
@dataclass(slots=True, frozen=True)
class DeleteTopicRequestHeader:
    """DELETE_TOPIC_IN_BROKER (215) and DELETE_TOPIC_IN_NAMESRV (216) request."""

    topic: str | None = string_field("topic")


@custom_header
@dataclass(slots=True, frozen=True)
class DeleteSubscriptionGroupRequestHeader:
    """DELETE_SUBSCRIPTIONGROUP (207) request: the group, and whether its offsets go too."""

    group_name: str | None = string_field("groupName")
    remove_offset: bool = boolean_field("removeOffset", default=False)


@custom_header
@dataclass(slots=True, frozen=True)
class GetConsumerConnectionListRequestHeader:
    """GET_CONSUMER_CONNECTION_LIST (203) request."""

    consumer_group: str | None = string_field("consumerGroup")


@custom_header
@dataclass(slots=True, frozen=True)
class GetProducerConnectionListRequestHeader:
    """GET_PRODUCER_CONNECTION_LIST (204) request."""

    producer_group: str | None = string_field("producerGroup")


@custom_header
@dataclass(slots=True, frozen=True)
class EndTransactionRequestHeader:
    """END_TRANSACTION (37) request: a producer's decision on one half message, found by its CommitLog
    offset and checked against its queue offset (``tranStateTableOffset``) and producer group.
    ``commitOrRollback`` is a ``MessageSysFlag`` transaction type (0 unknown, 8 commit, 12 rollback);
    its own check (``checkFields``) is the processor's, since Java runs it after the decode."""

    producer_group: str | None = string_field("producerGroup")
    tran_state_table_offset: int = long_field("tranStateTableOffset")
    commit_log_offset: int = long_field("commitLogOffset")
    commit_or_rollback: int | None = int_field("commitOrRollback", required=False, default=None)
    from_transaction_check: bool = boolean_field("fromTransactionCheck", default=False)
    msg_id: str | None = string_field("msgId", default=None)
    transaction_id: str | None = string_field("transactionId", default=None)


@custom_header
@dataclass(slots=True, frozen=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS (208) request: a blank ``topic`` means every topic the group has offsets in."""

    consumer_group: str | None = string_field("consumerGroup")
    topic: str | None = string_field("topic")


@custom_header
@dataclass(slots=True, frozen=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) request, and the RESET_CONSUMER_CLIENT_OFFSET (220) the
    broker sends each consumer (``timestamp`` -1 means "the end of each queue")."""

    topic: str | None = string_field("topic")
    group: str | None = string_field("group")
    timestamp: int = long_field("timestamp")
    is_force: bool = boolean_field("isForce", default=False)


@custom_header
@dataclass(slots=True, frozen=True)
class ConsumeMessageDirectlyResultRequestHeader:
    """CONSUME_MESSAGE_DIRECTLY (309) request: which client of which group consumes which message."""

    consumer_group: str | None = string_field("consumerGroup")
    client_id: str | None = string_field("clientId")
    msg_id: str | None = string_field("msgId")
    broker_name: str | None = string_field("brokerName")


@custom_header
@dataclass(slots=True, frozen=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307) request."""

    consumer_group: str | None = string_field("consumerGroup")
    client_id: str | None = string_field("clientId")
    jstack_enable: bool = boolean_field("jstackEnable", default=False)


@custom_header
@dataclass(slots=True, frozen=True)
class CheckTransactionStateRequestHeader:
    """CHECK_TRANSACTION_STATE (39), the broker's oneway question to a producer about a half message it
    left undecided: where the half message now is (its re-put copy) and its ids."""

    tran_state_table_offset: int = long_field("tranStateTableOffset")
    commit_log_offset: int = long_field("commitLogOffset")
    msg_id: str | None = string_field("msgId", default=None)
    transaction_id: str | None = string_field("transactionId", default=None)
    offset_msg_id: str | None = string_field("offsetMsgId", default=None)
