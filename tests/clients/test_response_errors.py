"""One exception class per response code: the table is RocketMQ 4.9.7's, the classes keep the old
families (``MQBrokerError`` / ``MQClientError``) and the command line's exit codes and output.

The expected codes are transcribed from the Java sources (``RemotingSysResponseCode.java`` and
``ResponseCode.java`` at tag rocketmq-all-4.9.7). The transcription itself is checked against the
classes compiled from those sources (``rocketmq-all-4.9.7.jar`` of ``RMQ_ROCKETMQ_HOME``,
read without a JDK) and, when ``RMQ_JAVA_SOURCES`` names a checkout of apache/rocketmq, against the
``.java`` files at that tag.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import subprocess

import pytest

import clients.response_errors as response_errors
from clients.cli.common import exit_code_for, report_error
from clients.errors import MQBrokerError, MQClientError, ResponseCodeError
from clients.response_errors import (
    CLASS_BY_CODE,
    MQSystemError,
    NoMessageError,
    SystemBusyError,
    TopicNotExistError,
    broker_error,
    client_error,
    code_class,
)
from protocol.codes import ResponseCode
from tests.support.java_class import jar_int_constants
from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_JAR, ROCKETMQ_SKIP_REASON

#: Every constant of RemotingSysResponseCode and ResponseCode in rocketmq-all-4.9.7, as written there.
JAVA_RESPONSE_CODES = {
    "SUCCESS": 0, "SYSTEM_ERROR": 1, "SYSTEM_BUSY": 2, "REQUEST_CODE_NOT_SUPPORTED": 3,
    "TRANSACTION_FAILED": 4, "FLUSH_DISK_TIMEOUT": 10, "SLAVE_NOT_AVAILABLE": 11,
    "FLUSH_SLAVE_TIMEOUT": 12, "MESSAGE_ILLEGAL": 13, "SERVICE_NOT_AVAILABLE": 14,
    "VERSION_NOT_SUPPORTED": 15, "NO_PERMISSION": 16, "TOPIC_NOT_EXIST": 17,
    "TOPIC_EXIST_ALREADY": 18, "PULL_NOT_FOUND": 19, "PULL_RETRY_IMMEDIATELY": 20,
    "PULL_OFFSET_MOVED": 21, "QUERY_NOT_FOUND": 22, "SUBSCRIPTION_PARSE_FAILED": 23,
    "SUBSCRIPTION_NOT_EXIST": 24, "SUBSCRIPTION_NOT_LATEST": 25, "SUBSCRIPTION_GROUP_NOT_EXIST": 26,
    "FILTER_DATA_NOT_EXIST": 27, "FILTER_DATA_NOT_LATEST": 28, "TRANSACTION_SHOULD_COMMIT": 200,
    "TRANSACTION_SHOULD_ROLLBACK": 201, "TRANSACTION_STATE_UNKNOW": 202,
    "TRANSACTION_STATE_GROUP_WRONG": 203, "NO_BUYER_ID": 204, "NOT_IN_CURRENT_UNIT": 205,
    "CONSUMER_NOT_ONLINE": 206, "CONSUME_MSG_TIMEOUT": 207, "NO_MESSAGE": 208,
    "UPDATE_AND_CREATE_ACL_CONFIG_FAILED": 209, "DELETE_ACL_CONFIG_FAILED": 210,
    "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED": 211, "FLOW_CONTROL": 215,
}  # fmt: skip

#: The two class names that are not Java's constant in CamelCase + "Error".
NAME_EXCEPTIONS = {
    "SYSTEM_ERROR": "MQSystemError",  # "SystemError" would hide Python's builtin
    "TRANSACTION_STATE_UNKNOW": "TransactionStateUnknownError",  # Java's spelling mended
}

JAVA_CLASSES = (
    "org.apache.rocketmq.remoting.protocol.RemotingSysResponseCode",
    "org.apache.rocketmq.common.protocol.ResponseCode",
)
JAVA_FILES = (
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingSysResponseCode.java",
    "common/src/main/java/org/apache/rocketmq/common/protocol/ResponseCode.java",
)
JAVA_TAG = "rocketmq-all-4.9.7"
#: A checkout (or mirror) of apache/rocketmq holding tag rocketmq-all-4.9.7, if this machine has one.
JAVA_SOURCES = os.environ.get("RMQ_JAVA_SOURCES")

ERROR_CODES = sorted((name, value) for name, value in JAVA_RESPONSE_CODES.items() if name != "SUCCESS")


def expected_class_name(java_name: str) -> str:
    return NAME_EXCEPTIONS.get(java_name) or "".join(w.capitalize() for w in java_name.split("_")) + "Error"


@pytest.mark.skipif(not HAVE_ROCKETMQ, reason=ROCKETMQ_SKIP_REASON)
def test_the_transcription_is_the_java_sources() -> None:
    """Read from the classes javac compiled from those sources: each constant's ``ConstantValue``."""
    found: dict[str, int] = {}
    for class_name in JAVA_CLASSES:
        found.update(jar_int_constants(ROCKETMQ_JAR, class_name))
    assert found == JAVA_RESPONSE_CODES


@pytest.mark.skipif(
    not JAVA_SOURCES, reason="RMQ_JAVA_SOURCES does not name a checkout of apache/rocketmq (optional)"
)
def test_the_transcription_is_a_java_checkouts_sources() -> None:
    """The ``.java`` files at tag rocketmq-all-4.9.7 of the checkout ``RMQ_JAVA_SOURCES`` names."""
    assert JAVA_SOURCES is not None
    found: dict[str, int] = {}
    for path in JAVA_FILES:
        text = subprocess.run(
            ["git", "-C", JAVA_SOURCES, "show", f"{JAVA_TAG}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for name, value in re.findall(r"public static final int (\w+) = (\d+);", text):
            found[name] = int(value)
    assert found == JAVA_RESPONSE_CODES


def test_response_code_names_every_java_code() -> None:
    assert {member.name: member.value for member in ResponseCode} == JAVA_RESPONSE_CODES


@pytest.mark.parametrize(("java_name", "code"), ERROR_CODES)
def test_every_code_has_its_own_class(java_name: str, code: int) -> None:
    cls = CLASS_BY_CODE[code]
    assert cls.code == code
    assert cls.__name__ == expected_class_name(java_name)
    assert getattr(response_errors, cls.__name__) is cls, "importable by its name"
    assert issubclass(cls, ResponseCodeError)
    assert cls.__doc__ and cls.__doc__.startswith(f"{code}"), "the docstring says the code first"

    from_broker = broker_error(code, "the remark", "10.0.0.1:10911")
    assert isinstance(from_broker, cls) and isinstance(from_broker, MQBrokerError)
    assert not isinstance(from_broker, MQClientError)
    assert (from_broker.code, from_broker.remark, from_broker.addr) == (code, "the remark", "10.0.0.1:10911")
    assert str(from_broker) == f"CODE: {code}  DESC: the remark BROKER: 10.0.0.1:10911"
    assert type(from_broker).__name__ == cls.__name__

    from_client = client_error(code, "the verdict")
    assert isinstance(from_client, cls) and isinstance(from_client, MQClientError)
    assert not isinstance(from_client, MQBrokerError)
    assert (from_client.code, from_client.error_message) == (code, "the verdict")
    assert str(from_client) == f"CODE: {code}  DESC: the verdict"


def test_class_names_and_codes_are_unique_and_success_has_none() -> None:
    classes = list(CLASS_BY_CODE.values())
    assert len({cls.__name__ for cls in classes}) == len(classes) == len(ERROR_CODES)
    assert ResponseCode.SUCCESS not in CLASS_BY_CODE
    with pytest.raises(ValueError, match="two classes"):
        code_class(ResponseCode.SYSTEM_BUSY)(type("Again", (ResponseCodeError,), {}))


def test_an_unknown_code_gets_the_base_class() -> None:
    assert type(broker_error(9999, "new in 6.x", "a:1")) is MQBrokerError
    assert type(client_error(9999, "?")) is MQClientError
    assert type(broker_error(ResponseCode.SUCCESS, "undecodable body", "a:1")) is MQBrokerError


def test_one_class_catches_a_code_from_either_side() -> None:
    with pytest.raises(TopicNotExistError):
        raise client_error(17, "The topic[T] not matched route info")
    with pytest.raises(TopicNotExistError):
        raise broker_error(17, "topic[T] not exist", "a:1")
    with pytest.raises(SystemBusyError):
        raise broker_error(2, "busy", "a:1")
    with pytest.raises(MQSystemError):
        raise client_error(1, "The broker[b] not exist")
    assert not isinstance(broker_error(2, "busy", "a:1"), TopicNotExistError)


@pytest.mark.parametrize("code", [c for _, c in ERROR_CODES])
@pytest.mark.parametrize("as_json", [False, True])
def test_the_command_line_reports_a_class_like_its_family(code: int, as_json: bool) -> None:
    """Exit code, stderr and the JSON error line are what the plain family gave before the classes."""
    remark = "can not find message by the offset, 42" if code == 1 else "the remark"
    pairs = [
        (broker_error(code, remark, "127.0.0.1:1"), MQBrokerError(code, remark, "127.0.0.1:1")),
        (client_error(code, "the verdict"), MQClientError(code, "the verdict")),
    ]
    for precise, plain in pairs:
        assert type(precise) is not type(plain)
        assert exit_code_for(precise) == exit_code_for(plain)
        outputs = []
        for exc in (precise, plain):
            out, err = io.StringIO(), io.StringIO()
            outputs.append(
                (
                    report_error("query-key", exc, as_json=as_json, out=out, err=err),
                    out.getvalue(),
                    err.getvalue(),
                )
            )
        assert outputs[0] == outputs[1]


def test_the_query_verdicts_are_their_codes_classes() -> None:
    assert isinstance(response_errors.no_message_error("key"), NoMessageError)
    assert isinstance(response_errors.no_route_error("T"), TopicNotExistError)


@pytest.mark.parametrize("code", [2, 17, 9999])
def test_the_errors_cross_a_process_boundary(code: int) -> None:
    """Pickled (a process pool's result, a multiprocessing queue) and back: same class, same fields."""
    for error in (broker_error(code, "the remark", "a:1"), client_error(code, "the verdict")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (str(copy), vars(copy)) == (str(error), vars(error))
