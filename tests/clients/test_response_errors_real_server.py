"""Each response code the server can produce comes back to the client as its own class, end to end.

A real ``QueryServer`` on 127.0.0.1 port 0 (over a copy of the Java-written store, or a fresh
writable store) answers; the client raises. The broker's TOPIC_NOT_EXIST is met on a pull (a send to
an unknown topic goes through TBW102's route, and this server answers no TBW102 route when it may
not create topics). The client's own methods are used where one makes the
request (queries, views, routes, sends, pulls); for the answers that ``QueryAdmin`` turns into a
status (a pull's NO_NEW_MSG, a key query's QUERY_NOT_FOUND), the request goes through
``RemotingClient.invoke`` and ``expect_success``, the check every client method makes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clients.acl import AclSigner
from clients.admin import LONG_MAX, QueryAdmin, query_ext_fields
from clients.client import RemotingClient
from clients.errors import MQBrokerError, MQClientError
from clients.message_queue import MessageQueue
from clients.producer import Producer
from clients.response_errors import (
    MessageIllegalError,
    MQSystemError,
    NoMessageError,
    NoPermissionError,
    PullNotFoundError,
    PullOffsetMovedError,
    PullRetryImmediatelyError,
    QueryNotFoundError,
    RequestCodeNotSupportedError,
    SubscriptionNotExistError,
    SubscriptionParseFailedError,
    SystemBusyError,
    TopicNotExistError,
    expect_success,
)
from clients.testkit.server import RmqServer, kit_store_config
from protocol.codes import RequestCode
from protocol.custom_headers import PULL_SUBSCRIPTION_FLAG, PullMessageRequestHeader
from protocol.message_id import create_offset_msg_id
from server.acl.config import acl_config_from
from server.app import QueryServer
from tests.support.java_store import open_java_store, server_settings

StartServer = Callable[..., Awaitable[QueryServer]]


@pytest.fixture
async def start_server(java_store_copy: Path) -> AsyncIterator[StartServer]:
    """Start a QueryServer over the Java store with some settings changed; all stopped afterwards."""
    store = open_java_store(java_store_copy)
    started: list[QueryServer] = []

    async def start(**overrides: Any) -> QueryServer:
        server = QueryServer(store, dataclasses.replace(server_settings(store), **overrides))
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()
    store.close()


def addr(server: QueryServer) -> str:
    return f"127.0.0.1:{server.port}"


def pull_fields(
    queue_offset: int, subscription: str = "*", *, sys_flag: int = PULL_SUBSCRIPTION_FLAG
) -> dict:
    header = PullMessageRequestHeader(
        consumer_group="TOOLS_CONSUMER",
        topic="TopicA",
        queue_id=1,
        queue_offset=queue_offset,
        max_msg_nums=32,
        sys_flag=sys_flag,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription=subscription,
        expression_type="TAG",
    )
    return header.to_ext_fields()


async def answer_of(client: RemotingClient, address: str, code: int, fields: dict[str, str]) -> None:
    """Send one request and apply the client's success check to the answer."""
    expect_success(await client.invoke(address, code, fields), address)


# -- through the client's own methods -------------------------------------------------------------


async def test_no_permission_under_acl(start_server: StartServer) -> None:
    account = {"accessKey": "rocketmq2", "secretKey": "12345678", "defaultTopicPerm": "DENY"}
    server = await start_server(acl=acl_config_from({"accounts": [account]}))
    unsigned = QueryAdmin(addr(server))
    signed_without_sub = QueryAdmin(addr(server), RemotingClient(rpc_hook=AclSigner("rocketmq2", "12345678")))
    for admin in (unsigned, signed_without_sub):
        async with admin:
            with pytest.raises(NoPermissionError) as info:
                await admin.query_by_key("TopicA", "k-3")
        assert isinstance(info.value, MQBrokerError)
        assert (info.value.code, info.value.addr) == (16, addr(server))


async def test_system_busy_past_the_connection_limit(start_server: StartServer) -> None:
    server = await start_server(max_connections=1)
    async with QueryAdmin(addr(server)) as holder:
        await holder.get_route("TopicA")  # holds the only connection
        async with QueryAdmin(addr(server)) as refused:
            with pytest.raises(SystemBusyError) as info:
                await refused.get_route("TopicA")
    assert isinstance(info.value, MQBrokerError) and info.value.code == 2


async def test_request_code_not_supported_for_a_send_to_a_read_only_server(java_server: QueryServer) -> None:
    async with Producer(addr(java_server)) as producer:
        with pytest.raises(RequestCodeNotSupportedError) as info:
            await producer.send("TopicA", b"hello")
    assert isinstance(info.value, MQBrokerError) and info.value.code == 3


async def test_system_error_for_a_view_of_an_empty_offset(java_server: QueryServer) -> None:
    async with QueryAdmin(None) as admin:
        with pytest.raises(MQSystemError) as info:
            await admin.view_message(create_offset_msg_id("127.0.0.1", java_server.port, 1 << 40))
    assert isinstance(info.value, MQBrokerError) and info.value.code == 1
    assert (info.value.remark or "").startswith("can not find message by the offset")


async def test_system_error_for_a_queue_the_server_does_not_have(java_server: QueryServer) -> None:
    async with QueryAdmin(addr(java_server)) as admin:
        with pytest.raises(MQSystemError) as info:
            await admin.pull(MessageQueue("TopicA", "broker-a", 9), "*", 0, 32)
    assert isinstance(info.value, MQBrokerError) and info.value.code == 1


async def test_the_clients_own_verdicts_are_their_codes_classes(java_server: QueryServer) -> None:
    async with QueryAdmin(addr(java_server)) as admin:
        with pytest.raises(TopicNotExistError) as no_route:
            await admin.query_by_key("NoSuchTopic", "k")
        with pytest.raises(NoMessageError) as no_message:
            await admin.query_by_key("TopicA", "no-such-key-anywhere")
        with pytest.raises(MQSystemError) as no_broker:
            await admin.broker_addr("TopicA", "broker-z")
    for error, code in ((no_route, 17), (no_message, 208), (no_broker, 1)):
        assert isinstance(error.value, MQClientError) and not isinstance(error.value, MQBrokerError)
        assert error.value.code == code


async def test_message_illegal_for_a_body_over_the_size_limit(tmp_path: Path) -> None:
    server = RmqServer(kit_store_config(tmp_path / "store", max_message_size=1024))
    try:
        async with Producer(server.address) as producer:
            await producer.send("Small", b"fits")
            with pytest.raises(MessageIllegalError) as info:
                await producer.send("Small", b"x" * 4096)
        assert isinstance(info.value, MQBrokerError) and info.value.code == 13
    finally:
        server.close()


# -- answers the client's methods turn into statuses or never ask for ------------------------------


async def test_pull_answers(java_server: QueryServer, java_expected: dict) -> None:
    queue_max = max(
        m["queueOffset"] for m in java_expected["messages"] if (m["topic"], m["queueId"]) == ("TopicA", 1)
    )
    address = addr(java_server)
    async with RemotingClient() as client:
        pull = RequestCode.PULL_MESSAGE
        cases: list[tuple[type[MQBrokerError] | type, dict[str, str], int]] = [
            (PullNotFoundError, pull_fields(queue_max + 1), 19),
            (PullRetryImmediatelyError, pull_fields(0, "no-such-tag"), 20),
            (PullOffsetMovedError, pull_fields(queue_max + 100), 21),
            (SubscriptionNotExistError, pull_fields(0, sys_flag=0), 24),
            (SubscriptionParseFailedError, pull_fields(0, "||"), 23),
            (TopicNotExistError, pull_fields(0) | {"topic": "NoSuchTopic"}, 17),
            (MQSystemError, pull_fields(0) | {"queueOffset": "zero"}, 1),  # a bad header field
        ]
        for cls, fields, code in cases:
            with pytest.raises(cls) as info:
                await answer_of(client, address, pull, fields)
            assert isinstance(info.value, MQBrokerError) and info.value.code == code, cls


async def test_query_not_found_for_a_key_the_index_does_not_hold(java_server: QueryServer) -> None:
    fields = query_ext_fields("TopicA", "no-such-key-anywhere", 32, 0, LONG_MAX)
    async with RemotingClient() as client:
        with pytest.raises(QueryNotFoundError) as info:
            await answer_of(client, addr(java_server), RequestCode.QUERY_MESSAGE, fields)
    assert isinstance(info.value, MQBrokerError) and info.value.code == 22
