"""The numeric codes of the RocketMQ remoting protocol (request codes, response codes, languages).

Values are RocketMQ's own (``RequestCode``, ``ResponseCode``, ``LanguageCode`` and
``SerializeType`` in rocketmq-remoting). Request codes: only those this server meets are named;
response codes: all of 4.9.7's. Unknown values still travel as plain ints, since a request with an
unknown code must be answered, not rejected.
"""

from __future__ import annotations

from enum import IntEnum


class SerializeType(IntEnum):
    """How a frame's header is serialized (the top byte of the header-length word)."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    """The ``language`` a peer declares; JSON headers carry the name, ROCKETMQ headers the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class RequestCode(IntEnum):
    """Request codes this server answers or meets on the way (everything else is 'not supported')."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    #: Admin codes (``Permission.ADMIN_CODE``): not served here, but plain ACL refuses them to
    #: non-admin accounts before answering 'not supported', as the broker does.
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    #: Sent by the broker to a producer (oneway): is this half message committed?
    CHECK_TRANSACTION_STATE = 39
    #: Sent by the broker to a group's consumers (oneway) when the group's members change.
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    #: mqadmin's ``queryMsgById`` track step asks it for each consuming group (none here: answered as
    #: not supported, since QUERY_TOPIC_CONSUME_BY_WHO reports no groups).
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    #: A name server's: forget a topic's routes (``mqadmin deleteTopic``'s second step).
    DELETE_TOPIC_IN_NAMESRV = 216
    #: Sent by the broker to a consumer: move your offsets (after INVOKE_BROKER_TO_RESET_OFFSET).
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    #: Relayed by the broker to a consumer on an operator's behalf.
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    #: A consumer's reply to a request message (``MessageUtil.createReplyMessage``): stored in the
    #: reply topic and pushed to the requesting client as PUSH_REPLY_MESSAGE_TO_CLIENT.
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    #: Sent by the broker to the client named by the reply's ``REPLY_TO_CLIENT`` (answered).
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326


class ResponseCode(IntEnum):
    """Every response code of RocketMQ 4.9.7 (``RemotingSysResponseCode`` and ``ResponseCode``).

    All are named, not just the ones this server sends, so a client can tell any answer a 4.9.7
    broker or name server gives (``clients.response_errors`` has a class for each). NO_MESSAGE is
    a client-side verdict only; no server sends it.
    """

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    #: Java spells it ``TRANSACTION_STATE_UNKNOW``; the name here is Java's, for grep.
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215


#: ``RemotingCommand`` flag bits.
RPC_TYPE_RESPONSE = 0x1
RPC_ONEWAY = 0x2
