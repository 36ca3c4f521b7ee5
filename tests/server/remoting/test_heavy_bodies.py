"""Request bodies an unauthenticated client can make the server parse cost a bounded amount (issue 18
item 9).

HEART_BEAT is the only request body this server parses (the access check reads its groups and
topics; the processor only checks it is a JSON object). Before the fix a 15 MiB ``[{},{},...]``-style
body was decoded into generic objects (about 1 s of the event loop and 433 MB), and bytes that are not
UTF-8 inside a JSON string raised ``UnicodeDecodeError``: out of the access check it dropped the
connection with an unthrottled traceback, out of the processor it was logged as a failure with its
traceback. Now the size and value count are checked before parsing, a malformed body is answered with
a RocketMQ code as the broker does (SYSTEM_ERROR for a heartbeat it cannot decode; with ACL on, the
denial), non-UTF-8 bytes are read as Java reads them (U+FFFD), and no log line carries a traceback.
The bodies the 4.9.7 broker answered without ACL (``tests/server/golden/acl_send_broker_4.9.7.json``,
"bodies") are replayed for the codes this server serves.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
from typing import Any

import pytest

from clients.acl import AclSigner
from protocol.codes import RequestCode, ResponseCode
from protocol.heartbeat import MAX_HEARTBEAT_BODY, MAX_HEARTBEAT_VALUES
from server.acl.config import acl_config_from
from server.remoting.processors.client_manage import heart_beat
from tests.support.harness import RawClient, StartServer
from tests.support.paths import REPO_ROOT

GOLDEN = json.loads((REPO_ROOT / "tests/server/golden/acl_send_broker_4.9.7.json").read_text("utf-8"))

#: 110,001 empty consumer entries in 330 KB: under the size bound, over the value bound (each counts
#: its ``{`` and its ``,``; a real client's heartbeat holds a few hundred values).
MANY_VALUES = b'{"consumerDataSet":[' + b"{}," * 110_000 + b"{}]}"
#: 2 MiB in one string: few values, over the size bound.
LONG_BODY = b'{"clientID":"' + b"c" * (2 * 1024 * 1024) + b'"}'
#: A heartbeat whose group name holds a byte that is not UTF-8 (Java reads it as U+FFFD).
NOT_UTF8 = b'{"clientID":"c\xff","consumerDataSet":[{"groupName":"G\xff","subscriptionDataSet":[]}]}'


def test_the_bounds_are_above_a_real_clients_heartbeat() -> None:
    one_subscription = (
        b'{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        b'"subVersion":1700000000000,"tagsSet":[],"topic":"TopicName-000"}'
    )
    # 100 consumer groups of 10 subscriptions each, as a Java client writes its HeartbeatData.
    group = (
        b'{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":[%s],"unitMode":false}'
        % b",".join([one_subscription] * 10)
    )
    body = b'{"clientID":"c","consumerDataSet":[%s],"producerDataSet":[{"groupName":"P"}]}' % b",".join(
        [group] * 100
    )
    assert len(body) < MAX_HEARTBEAT_BODY // 4
    assert body.count(b"{") + body.count(b",") < MAX_HEARTBEAT_VALUES // 4
    answer = heart_beat(RawClient.request(RequestCode.HEART_BEAT, {}, body))
    assert answer.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("body", "remark"),
    [
        (MANY_VALUES, "HeartbeatData: the request body holds 220002 JSON values, more than the 100000"),
        (LONG_BODY, "HeartbeatData: the request body is 2097167 bytes, more than the 1048576"),
    ],
    ids=["many-values", "long-body"],
)
def test_an_oversized_heartbeat_is_refused_before_it_is_parsed(body: bytes, remark: str) -> None:
    request = RawClient.request(RequestCode.HEART_BEAT, {}, body)
    tracemalloc.start()
    try:
        answer = heart_beat(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert (answer.remark or "").startswith(remark)
    assert peak < 64 * 1024  # nothing the size of the body or its values was built


def _signed(body: bytes, access_key: str = "rocketmq2") -> Any:
    request = RawClient.request(RequestCode.HEART_BEAT, {}, body)
    AclSigner(access_key, "12345678")(request)
    return request


def _acl() -> Any:
    return acl_config_from(
        {
            "accounts": [
                {
                    "accessKey": "rocketmq2",
                    "secretKey": "12345678",
                    "defaultTopicPerm": "SUB",
                    "defaultGroupPerm": "SUB",
                }
            ]
        }
    )


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info]


async def test_non_utf8_heartbeats_with_acl_keep_the_connection_and_log_no_traceback(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(acl=_acl())
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        caplog.set_level(logging.INFO)
        answers = await client.ask_all([_signed(NOT_UTF8) for _ in range(500)])
        # Java reads the group as "G\ufffd" and checks SUB on it: the default grants it.
        assert {a.code for a in answers} == {ResponseCode.SUCCESS}
        garbage = await client.call(_signed(b"\xff\xfe{"))
        assert (garbage.code, garbage.remark) == (
            ResponseCode.NO_PERMISSION,
            "HeartbeatData cannot be decoded, so its permissions cannot be checked",
        )
        heavy = await client.call(_signed(MANY_VALUES))
        assert heavy.code == ResponseCode.NO_PERMISSION
        still_open = await client.call(_signed(b"{}"))  # the same connection still answers
        assert still_open.code == ResponseCode.SUCCESS
    finally:
        await client.close()
    assert _tracebacks(caplog) == []


async def test_non_utf8_heartbeats_without_acl_are_read_as_java_reads_them(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        caplog.set_level(logging.INFO)
        answers = await client.ask_all(
            [RawClient.request(RequestCode.HEART_BEAT, {}, NOT_UTF8) for _ in range(500)]
        )
        assert {a.code for a in answers} == {ResponseCode.SUCCESS}
    finally:
        await client.close()
    assert _tracebacks(caplog) == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


BODY_CASES = [
    c for c in GOLDEN["bodies"] if c["code"] in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT)
]


@pytest.mark.parametrize("case", BODY_CASES, ids=[c["case"] for c in BODY_CASES])
async def test_malformed_bodies_get_the_brokers_code(start_server: StartServer, case: dict[str, Any]) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        body = bytes.fromhex(case["body_hex"]) if case["body_hex"] is not None else None
        answer = await client.call(RawClient.request(case["code"], dict(case["fields"]), body))
    finally:
        await client.close()
    # The remark is the broker's fastjson message there, this server's own words here.
    assert answer.code == case["broker_code"]
