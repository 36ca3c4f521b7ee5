"""Plain ACL on the write path and on admin codes, replayed against the real 4.9.7 broker's answers.

``tests/server/golden/acl_send_broker_4.9.7.json`` holds what the real broker answered (with
``aclEnable=true`` and the ``plain_acl.yml`` kept in the file) to SEND_MESSAGE, SEND_MESSAGE_V2 (topic
in the abbreviated field ``b``, group in ``a``), retry topics, ``RMQ_SYS_TRACE_TOPIC``, an admin code
and an unknown code, per account. Until issue 18 item 5 the validator asked nothing of a SEND, so
accounts with only SUB, with ``defaultTopicPerm: DENY`` or denied on the topic got SEND_OK and
auto-created the topic; these tests pin that every verdict now matches the broker's. The code of a
denial is this server's NO_PERMISSION (16) with the AclException's message as the remark, as for
every other denial (``server.acl.validator``); the 4.9.7 broker answers SYSTEM_ERROR (1) with the
exception's class, message and first stack frame.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clients.acl import AclSigner
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.acl.config import AclConfig, load_acl_config
from server.acl.validator import AccessValidator
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient
from tests.support.paths import REPO_ROOT

GOLDEN = json.loads((REPO_ROOT / "tests/server/golden/acl_send_broker_4.9.7.json").read_text("utf-8"))
ACL_CASES: list[dict[str, Any]] = GOLDEN["acl"]
_ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "


def broker_denial(case: dict[str, Any]) -> str | None:
    """The AclException message the broker answered for ``case``, or None when it let it through."""
    remark = case["broker_remark"]
    if case["broker_code"] != ResponseCode.SYSTEM_ERROR or not remark.startswith(_ACL_EXCEPTION):
        return None
    message = remark[len(_ACL_EXCEPTION) :]
    return message[: message.rindex(", org.apache.rocketmq.acl.")]  # drop the stack frame


def request_of(case: dict[str, Any]) -> RemotingCommand:
    body = bytes.fromhex(case["body_hex"]) if case["body_hex"] is not None else None
    request = RawClient.request(case["code"], dict(case["fields"]), body)
    if case["access_key"]:
        AclSigner(case["access_key"], GOLDEN["secret"])(request)
    return request


@pytest.fixture
def acl_config(tmp_path: Path) -> AclConfig:
    path = tmp_path / "plain_acl.yml"
    path.write_text(GOLDEN["plain_acl_yml"], "utf-8")
    return load_acl_config(path)


def test_the_golden_cases_cover_the_six_send_refusals_of_the_issue() -> None:
    refused = {
        c["case"]
        for c in ACL_CASES
        if c["code"] in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
        and (broker_denial(c) or "").startswith("No default permission for topic:TopicA")
    }
    assert refused == {
        f"{ak} {code} TopicA"
        for ak in ("subonly1", "topicdeny", "denyontopic")
        for code in ("SEND_MESSAGE", "SEND_MESSAGE_V2")
    }


@pytest.mark.parametrize("case", ACL_CASES, ids=[c["case"] for c in ACL_CASES])
def test_the_validator_decides_as_the_broker(acl_config: AclConfig, case: dict[str, Any]) -> None:
    denial = AccessValidator(acl_config).denial(request_of(case), "10.0.0.9")
    expected = broker_denial(case)
    if case["code"] == RequestCode.HEART_BEAT and expected is not None:
        # fastjson's parse error is the broker's text; only the verdict is comparable.
        assert denial is not None
    else:
        assert denial == expected


@pytest.fixture
async def acl_writable(tmp_path: Path, acl_config: AclConfig) -> AsyncIterator[QueryServer]:
    """``serve --acl plain_acl.yml --writable`` in process over an empty store, on 127.0.0.1:0."""
    store = WritableStore(StoreConfig.for_store(tmp_path / "store", max_message_size=4096))
    srv = QueryServer(store.reader, ServerSettings(port=0, acl=acl_config), configure=write_path(store))
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()
        store.close()


async def _route_code(client: RawClient, topic: str) -> int:
    answer = await client.call(RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return answer.code


async def test_serve_acl_writable_answers_as_the_broker(acl_writable: QueryServer) -> None:
    wire = [c for c in ACL_CASES if c["code"] != RequestCode.HEART_BEAT]
    # The refusals first: a refused SEND must not create its topic either.
    wire.sort(key=lambda c: broker_denial(c) is None)
    client = await RawClient.connect("127.0.0.1", acl_writable.port)
    try:
        checked_topics = False
        for case in wire:
            expected = broker_denial(case)
            if expected is None and not checked_topics:
                assert await _route_code(client, "TopicA") == ResponseCode.TOPIC_NOT_EXIST
                assert await _route_code(client, "TopicB") == ResponseCode.TOPIC_NOT_EXIST
                checked_topics = True
            answer = await client.call(request_of(case))
            if expected is not None:
                assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, expected), case["case"]
            else:
                # An admin account's UPDATE_AND_CREATE_TOPIC too (issue 19: topics administered).
                assert (answer.code, answer.remark or None) == (
                    case["broker_code"],
                    case["broker_remark"] or None,
                ), case["case"]
        assert checked_topics
    finally:
        await client.close()
