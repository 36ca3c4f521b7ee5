"""Access control over real sockets and in the validator: RocketMQ plain-ACL semantics.

Signed requests exactly as mqadmin 4.9.7 sent them (the golden ``wire/mqadmin_*`` frames, AccessKey
``rocketmq2``, secret ``12345678`` from the capture's setup) are served; a wrong secret, a missing or
unknown key, a tampered field or a topic without SUB is answered NO_PERMISSION with Java's message;
name-server codes stay unchecked; and ``rmq-query query-key --access-key/--secret-key`` works end to
end against ``serve --acl``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clients.acl import AclSigner
from protocol.acl_signature import UNIQUE_KEY_QUERY, acl_signature
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import decode_frame
from server.acl.config import GET, PUB, SUB, AclConfig, acl_config_from
from server.acl.validator import AccessValidator, required_resources
from server.app import QueryServer
from tests.support.harness import RawClient, StartServer
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import start_serve

ACCESS_KEY = "rocketmq2"
SECRET_KEY = "12345678"


#: What the account behind the captured mqadmin runs may do: look messages up in the topics they
#: read, and (the consume-queue tools pull as TOOLS_CONSUMER, then unregister it) use that group.
MQADMIN_TOPIC_PERMS = ["TopicA=SUB", "topic_c-1=SUB"]
MQADMIN_GROUP_PERMS = ["TOOLS_CONSUMER=SUB"]


def config(**account: Any) -> AclConfig:
    entry = {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY, "defaultTopicPerm": "DENY"} | account
    white = entry.pop("globalWhite", None)
    data: dict[str, Any] = {"accounts": [entry]}
    if white:
        data["globalWhiteRemoteAddresses"] = white
    return acl_config_from(data)


def signed(
    code: int, fields: dict[str, str], body: bytes | None = None, secret: str = SECRET_KEY
) -> RemotingCommand:
    request = RawClient.request(code, dict(fields), body)
    AclSigner(ACCESS_KEY, secret)(request)
    return request


def query_fields(topic: str = "TopicA", key: str = "k-3", unique: bool = False) -> dict[str, str]:
    return {
        "topic": topic,
        "key": key,
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": str(2**63 - 1),
        UNIQUE_KEY_QUERY: "true" if unique else "false",
    }


def mqadmin_requests(vectors_dir: Path) -> list[RemotingCommand]:
    requests = []
    for path in sorted((vectors_dir / "wire").glob("mqadmin_*/*_req_*.bin")):
        request = decode_frame(path.read_bytes())
        if request.ext_fields and "Signature" in request.ext_fields:
            requests.append(request)
    return requests


# The validator ------------------------------------------------------------------------------------


def test_the_go_client_vector_through_the_shared_signature() -> None:
    assert (
        acl_signature({}, b"Hello RocketMQ Client ACL Feature", "adiaushdiaushd")
        == "tAb/54Rwwcq+pbH8Loi7FWX4QSQ="
    )


def test_every_signature_mqadmin_sent_verifies(vectors_dir: Path) -> None:
    validator = AccessValidator(config(topicPerms=MQADMIN_TOPIC_PERMS, groupPerms=MQADMIN_GROUP_PERMS))
    requests = mqadmin_requests(vectors_dir)
    assert {r.code for r in requests} >= {12, 33, 35, 105, 300}
    assert any(UNIQUE_KEY_QUERY in (r.ext_fields or {}) for r in requests)
    for request in requests:
        assert validator.denial(request, "10.0.0.9") is None, request.code
    wrong = AccessValidator(config(secretKey="not-the-secret"))
    for request in requests:
        assert wrong.denial(request, "10.0.0.9") == "Check signature failed for accessKey=rocketmq2"


@pytest.mark.parametrize("unique", [False, True])
def test_unique_key_query_may_be_signed_or_left_out(unique: bool) -> None:
    """Clients >= 4.9.4 sign ``_UNIQUE_KEY_QUERY``; a 4.9.x broker verifies without it: take both."""
    validator = AccessValidator(config(topicPerms=["TopicA=SUB"]))
    fields = query_fields(unique=unique) | {"AccessKey": ACCESS_KEY}
    with_flag = acl_signature(fields, None, SECRET_KEY)
    without_flag = acl_signature(fields, None, SECRET_KEY, exclude=(UNIQUE_KEY_QUERY,))
    assert with_flag != without_flag
    for sig in (with_flag, without_flag):
        request = RawClient.request(RequestCode.QUERY_MESSAGE, fields | {"Signature": sig})
        assert validator.denial(request, "10.0.0.9") is None
    tampered = RawClient.request(
        RequestCode.QUERY_MESSAGE, fields | {"Signature": with_flag, "key": "other-key"}
    )
    assert validator.denial(tampered, "10.0.0.9") == "Check signature failed for accessKey=rocketmq2"


def test_the_body_is_signed_too() -> None:
    validator = AccessValidator(config())
    request = signed(RequestCode.HEART_BEAT, {}, b'{"clientID":"c"}')
    assert validator.denial(request, None) is None
    request.body = b'{"clientID":"d"}'
    assert validator.denial(request, None) == "Check signature failed for accessKey=rocketmq2"


@pytest.mark.parametrize(
    ("account", "request_", "remark"),
    [
        ({}, RawClient.request(RequestCode.QUERY_MESSAGE, query_fields()), "No accessKey is configured"),
        ({}, RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, None), "No accessKey is configured"),
        (
            {"accessKey": "someone-else"},
            signed(RequestCode.QUERY_MESSAGE, query_fields()),
            "No acl config for rocketmq2",
        ),
        (
            {},
            signed(RequestCode.QUERY_MESSAGE, query_fields(), secret="wrong-secret"),
            "Check signature failed for accessKey=rocketmq2",
        ),
        ({}, signed(RequestCode.QUERY_MESSAGE, query_fields()), "No default permission for topic:TopicA"),
        (
            {"topicPerms": ["TopicA=PUB"]},
            signed(RequestCode.QUERY_MESSAGE, query_fields()),
            "No default permission for topic:TopicA",
        ),
        # The topic's own entry decides alone (Java's checkPerm): a default that would grant it
        # does not override an explicit DENY or PUB.
        (
            {"topicPerms": ["TopicA=DENY"], "defaultTopicPerm": "SUB"},
            signed(RequestCode.QUERY_MESSAGE, query_fields()),
            "No default permission for topic:TopicA",
        ),
        (
            {"topicPerms": ["TopicA=PUB"], "defaultTopicPerm": "SUB"},
            signed(RequestCode.QUERY_MESSAGE, query_fields()),
            "No default permission for topic:TopicA",
        ),
        (
            {"topicPerms": ["TopicA=DENY"], "defaultTopicPerm": "SUB"},
            signed(RequestCode.QUERY_MESSAGE, query_fields("TopicB")),
            None,
        ),
        (
            {"groupPerms": ["g=DENY"], "defaultGroupPerm": "SUB"},
            signed(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g"}),
            "No default permission for group:g",
        ),
        (
            {"topicPerms": ["TopicA=SUB"]},
            signed(RequestCode.QUERY_MESSAGE, query_fields("TopicB")),
            "No default permission for topic:TopicB",
        ),
        ({"topicPerms": ["TopicA=SUB"]}, signed(RequestCode.QUERY_MESSAGE, query_fields()), None),
        ({"topicPerms": ["TopicA=PUB|SUB"]}, signed(RequestCode.QUERY_MESSAGE, query_fields()), None),
        # ACL 2.0's Get: message lookups without the right to consume.
        ({"topicPerms": ["TopicA=GET"]}, signed(RequestCode.QUERY_MESSAGE, query_fields()), None),
        (
            {"topicPerms": ["TopicA=GET"]},
            signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0", "topic": "TopicA"}),
            None,
        ),
        ({"defaultTopicPerm": "GET"}, signed(RequestCode.QUERY_MESSAGE, query_fields("AnyTopic")), None),
        (
            {"topicPerms": ["TopicA=GET"], "defaultGroupPerm": "SUB"},
            signed(
                RequestCode.HEART_BEAT,
                {},
                b'{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"TopicA"}]}]}',
            ),
            "No default permission for topic:TopicA",
        ),
        ({"defaultTopicPerm": "SUB"}, signed(RequestCode.QUERY_MESSAGE, query_fields("AnyTopic")), None),
        ({"admin": True}, signed(RequestCode.QUERY_MESSAGE, query_fields()), None),
        (
            {"admin": True, "topicPerms": ["TopicB=SUB"]},
            signed(RequestCode.QUERY_MESSAGE, query_fields()),
            "No default permission for topic:TopicA",
        ),
        ({}, signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}), None),
        (
            {},
            signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0", "topic": "TopicA"}),
            "No default permission for topic:TopicA",
        ),
        ({}, signed(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "TopicA"}), None),
        ({}, signed(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "p"}), None),
        (
            {},
            signed(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g"}),
            "No default permission for group:g",
        ),
        (
            {"groupPerms": ["g=SUB"]},
            signed(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g"}),
            None,
        ),
        (
            {"defaultGroupPerm": "SUB"},
            signed(
                RequestCode.HEART_BEAT,
                {},
                b'{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"TopicA"}]}]}',
            ),
            "No default permission for topic:TopicA",
        ),
        (
            {"defaultGroupPerm": "SUB", "topicPerms": ["TopicA=SUB"]},
            signed(
                RequestCode.HEART_BEAT,
                {},
                b'{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"TopicA"}]}]}',
            ),
            None,
        ),
        (
            {},
            signed(
                RequestCode.HEART_BEAT,
                {},
                b'{"clientID":"c","producerDataSet":[{"groupName":"p"}],"consumerDataSet":[]}',
            ),
            None,
        ),
        (
            {},
            signed(RequestCode.HEART_BEAT, {}, b"[" * 5000),
            "HeartbeatData cannot be decoded, so its permissions cannot be checked",
        ),
        (
            {"whiteRemoteAddress": "10.0.0.*"},
            RawClient.request(RequestCode.QUERY_MESSAGE, query_fields() | {"AccessKey": ACCESS_KEY}),
            None,
        ),
        (
            {"whiteRemoteAddress": "10.0.1.*"},
            RawClient.request(RequestCode.QUERY_MESSAGE, query_fields() | {"AccessKey": ACCESS_KEY}),
            "Check signature failed for accessKey=rocketmq2",
        ),
        (
            {"globalWhite": ["10.0.0.1-10"]},
            RawClient.request(RequestCode.QUERY_MESSAGE, query_fields()),
            None,
        ),
        (
            {"globalWhite": ["10.0.0.10-20"]},
            RawClient.request(RequestCode.QUERY_MESSAGE, query_fields()),
            "No accessKey is configured",
        ),
    ],
)
def test_java_validation_order_and_messages(
    account: dict[str, Any], request_: RemotingCommand, remark: str | None
) -> None:
    assert AccessValidator(config(**account)).denial(request_, "10.0.0.9") == remark


def test_required_resources_by_code() -> None:
    assert required_resources(RawClient.request(RequestCode.QUERY_MESSAGE, {"topic": "T"})) == {
        "T": SUB | GET
    }
    assert required_resources(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "1"})) == {}
    assert required_resources(RawClient.request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})) == {}
    pull = {"topic": "T", "consumerGroup": "G", "queueId": "0"}
    assert required_resources(RawClient.request(RequestCode.PULL_MESSAGE, pull)) == {
        "T": SUB,
        "%RETRY%G": SUB,
    }
    by_group = RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
    assert required_resources(by_group) == {"%RETRY%G": SUB}
    offsets = {"topic": "T", "queueId": "0"}
    assert required_resources(RawClient.request(RequestCode.GET_MAX_OFFSET, offsets)) == {}
    assert (
        PUB not in required_resources(RawClient.request(RequestCode.QUERY_MESSAGE, {"topic": "T"})).values()
    )


# Over sockets -------------------------------------------------------------------------------------


@pytest.fixture
async def acl_server(start_server: StartServer) -> QueryServer:
    return await start_server(acl=config(topicPerms=MQADMIN_TOPIC_PERMS, groupPerms=MQADMIN_GROUP_PERMS))


@pytest.fixture
async def acl_client(acl_server: QueryServer) -> AsyncIterator[RawClient]:
    client = await RawClient.connect("127.0.0.1", acl_server.port)
    yield client
    await client.close()


async def test_mqadmin_frames_are_served_and_unsigned_ones_refused(
    acl_client: RawClient, vectors_dir: Path
) -> None:
    for request in mqadmin_requests(vectors_dir):
        answer = await acl_client.call(request)
        assert answer.code != ResponseCode.NO_PERMISSION, (request.code, answer.remark)
    unsigned = RawClient.request(RequestCode.QUERY_MESSAGE, query_fields())
    answer = await acl_client.call(unsigned)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "No accessKey is configured")


async def test_a_signed_query_finds_its_messages_and_a_forbidden_topic_is_refused(
    acl_client: RawClient, java_expected: dict[str, Any]
) -> None:
    answer = await acl_client.call(signed(RequestCode.QUERY_MESSAGE, query_fields()))
    assert answer.code == ResponseCode.SUCCESS and answer.body
    denied = await acl_client.call(signed(RequestCode.QUERY_MESSAGE, query_fields("TopicB")))
    assert (denied.code, denied.remark) == (
        ResponseCode.NO_PERMISSION,
        "No default permission for topic:TopicB",
    )
    assert denied.body is None
    assert not denied.ext_fields  # nothing about the store leaks with a refusal


async def test_name_server_codes_are_not_checked_and_unknown_codes_are(acl_client: RawClient) -> None:
    route = await acl_client.call(RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}))
    assert route.code == ResponseCode.SUCCESS
    cluster = await acl_client.call(RawClient.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert cluster.code == ResponseCode.SUCCESS
    topics = await acl_client.call(RawClient.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert topics.code == ResponseCode.SUCCESS
    # As the 4.9.7 broker (tests/server/golden/acl_send_broker_4.9.7.json): its ACL hook runs before
    # the default processor that answers unknown codes, so only a signed one learns it is unknown.
    unknown = await acl_client.call(RawClient.request(9999, {"topic": "TopicA"}))
    assert (unknown.code, unknown.remark) == (ResponseCode.NO_PERMISSION, "No accessKey is configured")
    unknown = await acl_client.call(signed(9999, {"topic": "TopicA"}))
    assert (unknown.code, unknown.remark) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        " request type 9999 not supported",
    )


async def test_a_global_whitelist_lets_loopback_in_unsigned(start_server: StartServer) -> None:
    server = await start_server(acl=config(globalWhite=["127.0.0.*"]))
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, query_fields()))
        assert answer.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def test_acl_is_off_by_default(connect: Callable[..., Awaitable[RawClient]]) -> None:
    client = await connect()
    answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, query_fields()))
    assert answer.code == ResponseCode.SUCCESS


# End to end -------------------------------------------------------------------------------------


ACL_FILE = f"""\
accounts:
  - accessKey: {ACCESS_KEY}
    secretKey: {SECRET_KEY}
    defaultTopicPerm: DENY
    topicPerms:
      - TopicA=SUB
"""


async def _rmq_query(*argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        *argv,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_rmq_query_signs_against_serve_acl(java_store_dir: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_FILE, encoding="utf-8")
    conf = java_store_dir.parent / f"{java_store_dir.name}.broker.conf"
    proc, lines, port, _ = await start_serve("--config", str(conf), "--port", "0", "--acl", str(acl_file))
    try:
        assert any("access control on" in line and "1 account(s)" in line for line in lines)
        base = ["query-key", "-n", f"127.0.0.1:{port}", "-t", "TopicA", "-k", "k-3"]
        code, out, err = await _rmq_query(*base, "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY)
        assert code == 0, err
        assert out.startswith("#Message ID")
        code, out, err = await _rmq_query(*base, "--access-key", ACCESS_KEY, "--secret-key", "wrong-secret")
        assert code != 0 and "Check signature failed for accessKey=rocketmq2" in err, (code, out, err)
        code, out, err = await _rmq_query(*base)
        assert code != 0 and "No accessKey is configured" in err, (code, out, err)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)


async def test_serve_refuses_a_bad_acl_file(java_store_dir: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text("accounts:\n  - accessKey: short\n    secretKey: 1\n", encoding="utf-8")
    conf = java_store_dir.parent / f"{java_store_dir.name}.broker.conf"
    code, _, err = await _rmq_query("serve", "--config", str(conf), "--port", "0", "--acl", str(acl_file))
    assert code == 2
    assert "bad --acl file" in err and "longer than 6" in err
