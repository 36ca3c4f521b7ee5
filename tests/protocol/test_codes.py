"""The numeric codes are RocketMQ's own: a wrong value would be a silently wrong answer on the wire."""

from __future__ import annotations

import pytest

from protocol.codes import (
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from tests.support.java_class import jar_int_constants
from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_JAR, ROCKETMQ_SKIP_REASON


@pytest.mark.parametrize(
    ("code", "value"),
    [
        (RequestCode.QUERY_MESSAGE, 12),
        (RequestCode.VIEW_MESSAGE_BY_ID, 33),
        (RequestCode.HEART_BEAT, 34),
        (RequestCode.UNREGISTER_CLIENT, 35),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, 105),
        (RequestCode.GET_BROKER_CLUSTER_INFO, 106),
        (RequestCode.GET_CONSUMER_CONNECTION_LIST, 203),
        (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, 300),
        (RequestCode.UPDATE_AND_CREATE_TOPIC, 17),
        (RequestCode.UPDATE_BROKER_CONFIG, 25),
        (RequestCode.CONSUMER_SEND_MSG_BACK, 36),
        (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 200),
        (RequestCode.DELETE_SUBSCRIPTIONGROUP, 207),
        (RequestCode.DELETE_TOPIC_IN_BROKER, 215),
    ],
)
def test_request_codes_are_javas(code: RequestCode, value: int) -> None:
    assert code == value
    assert RequestCode(value) is code


@pytest.mark.parametrize(
    ("code", "value"),
    [
        (ResponseCode.SUCCESS, 0),
        (ResponseCode.SYSTEM_ERROR, 1),
        (ResponseCode.SYSTEM_BUSY, 2),
        (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, 3),
        (ResponseCode.NO_PERMISSION, 16),
        (ResponseCode.TOPIC_NOT_EXIST, 17),
        (ResponseCode.QUERY_NOT_FOUND, 22),
        (ResponseCode.NO_MESSAGE, 208),
    ],
)
def test_response_codes_are_javas(code: ResponseCode, value: int) -> None:
    assert code == value
    assert ResponseCode(value) is code


def test_language_codes_are_javas() -> None:
    names = [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY",
        "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS",
    ]  # fmt: skip
    assert [(member.name, member.value) for member in LanguageCode] == [
        (name, value) for value, name in enumerate(names)
    ]


def test_serialize_types_and_flag_bits() -> None:
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)
    assert (RPC_TYPE_RESPONSE, RPC_ONEWAY) == (1, 2)


@pytest.mark.skipif(not HAVE_ROCKETMQ, reason=ROCKETMQ_SKIP_REASON)
def test_every_request_code_is_the_jars() -> None:
    """Each ``RequestCode`` member has the name and value of ``RequestCode`` in the 4.9.7 jar.

    Read from the class file javac wrote (``tests.support.java_class``), so a typo in a code we add
    for a new request fails here rather than as a silently unanswered request on the wire.
    """
    java = jar_int_constants(ROCKETMQ_JAR, "org.apache.rocketmq.common.protocol.RequestCode")
    assert {member.name: member.value for member in RequestCode} == {
        member.name: java[member.name] for member in RequestCode
    }
