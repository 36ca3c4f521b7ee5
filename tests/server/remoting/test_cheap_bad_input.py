"""Bad input stays cheap: no traceback, no unbounded log, no Python internals in a remark.

A request that fails costs one short answer and, at most, one log line per burst of its kind
(``server.burst_log``), whatever the client repeats: 5000-digit numbers (which Python's ``int``
refuses past 4300 digits with a ValueError) are answered SYSTEM_ERROR naming the field; a processor
that fails unexpectedly (here the store raising an OSError that names a file) is answered with a
fixed remark, and its traceback is logged once per burst, not once per request.
"""

from __future__ import annotations

import errno
import logging

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from server.app import QueryServer
from server.remoting.dispatch import failure_remark
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import RawClient, StartServer, key_query_fields
from tests.support.java_store import settings_for

REQUESTS = 300

SECRET_PATH = "/srv/secret-store/commitlog/00000000000000000000"


@pytest.mark.parametrize("field", ["maxNum", "beginTimestamp", "endTimestamp", "offset"])
async def test_a_5000_digit_number_is_refused_naming_the_field_with_one_log_line(
    field: str, start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server: QueryServer = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    code = RequestCode.VIEW_MESSAGE_BY_ID if field == "offset" else RequestCode.QUERY_MESSAGE
    fields = {"offset": "0"} if field == "offset" else key_query_fields("TopicA", "k-1")
    fields[field] = "7" * 5000
    try:
        with caplog.at_level(logging.DEBUG):
            for i in range(REQUESTS):
                serialize_type = SerializeType.ROCKETMQ if i % 2 else SerializeType.JSON
                answer = await client.call(RawClient.request(code, fields, serialize_type=serialize_type))
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert answer.remark is not None and f"<{field}>" in answer.remark
                assert "out of range" in answer.remark and len(answer.remark) < 300
                assert "ValueError" not in answer.remark
            good = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
            assert good.code == ResponseCode.SUCCESS
    finally:
        await client.close()
    server_lines = [r for r in caplog.records if r.name.startswith("server")]
    assert not [r for r in server_lines if r.exc_info], "a traceback was logged"
    about_it = [r for r in server_lines if field in r.getMessage()]
    assert len(about_it) == 1, [r.getMessage()[:200] for r in about_it]
    assert len(about_it[0].getMessage()) < 400


class _FailingStore:
    """The Java store, except that reading a record fails the way a vanished file does."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", SECRET_PATH)

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        raise OSError(errno.EIO, "Input/output error", SECRET_PATH)

    def topics(self) -> set[str]:
        return self._store.topics()


async def test_a_failing_store_leaks_no_exception_text_and_logs_one_traceback_per_burst(
    java_store: MessageStore, java_store_config: StoreConfig, caplog: pytest.LogCaptureFixture
) -> None:
    server = QueryServer(_FailingStore(java_store), settings_for(java_store_config))  # type: ignore[arg-type]
    await server.start()
    client = await RawClient.connect("127.0.0.1", server.port)
    requests = [
        (RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}),
        (RequestCode.QUERY_MESSAGE, key_query_fields("TopicA", "k-1")),
    ]
    try:
        with caplog.at_level(logging.DEBUG):
            for i in range(REQUESTS):
                code, fields = requests[i % 2]
                answer = await client.call(RawClient.request(code, fields))
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert answer.remark == failure_remark(code)
                for leak in (SECRET_PATH, "secret", "Errno", "OSError", "PermissionError", "denied", "/"):
                    assert leak not in answer.remark
    finally:
        await client.close()
        await server.stop()
    failures = [r for r in caplog.records if r.name == "server.remoting.dispatch"]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert failures[0].levelno == logging.ERROR and failures[0].exc_info is not None
    assert f"{REQUESTS}" not in failures[0].getMessage()  # the first of the burst, logged at once


def test_the_failure_remark_names_no_python_internals() -> None:
    remark = failure_remark(12)
    assert remark.startswith("java.lang.RuntimeException: ") and "12" in remark
    assert "/" not in remark and "Error" not in remark
