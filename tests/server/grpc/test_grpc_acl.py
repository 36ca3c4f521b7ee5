"""Access control on the gRPC port (``serve --acl``): the 5.x signature and the plain ACL's permissions.

An in-process server with one account; the official Python client configured with its credentials
sends and is refused as the account allows, and raw calls show the statuses: no or a bad signature
UNAUTHORIZED, a resource the account may not touch FORBIDDEN.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from server.acl.config import DENY, PUB, SUB, Account, AclConfig
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.grpc.access import signature_of
from server.grpc.sending import GrpcWriter
from server.grpc.v2 import Code, definition, service, service_grpc
from server.remoting.write_path import DeliveryTimer, write_path
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import META, send_request

rocketmq = pytest.importorskip("rocketmq")

AK, SK = "RocketMQ", "12345678"
ACL = AclConfig(
    accounts={
        AK: Account(
            AK,
            SK,
            default_topic_perm=DENY,
            default_group_perm=SUB,
            resource_perms={"Plain": PUB | SUB, "Denied": DENY},
        )
    }
)
DATE = "20240101T000000Z"


def signed(secret: str = SK, access_key: str = AK) -> tuple[tuple[str, str], ...]:
    authorization = (
        f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
        f"Signature={signature_of(secret, DATE)}"
    )
    return (*META, ("x-mq-date-time", DATE), ("authorization", authorization))


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritableStore]]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic("Plain", 4)
    store.create_topic("Denied", 4)
    timer = DeliveryTimer(store)
    path = write_path(store, timer=timer)
    srv = QueryServer(
        store.reader,
        ServerSettings(port=0, broker_name="b1", grpc_port=0, acl=ACL),
        configure=path,
        grpc_writer=GrpcWriter(store, cluster="DefaultCluster", on_scheduled=timer.arm, broker=path.broker),
    )
    await srv.start()
    try:
        yield srv, store
    finally:
        await srv.stop()
        store.close()


def test_the_signature_is_the_clients() -> None:
    """The official client's own ``Signature.sign`` and ours agree."""
    from rocketmq.v5.util.signature import Signature

    assert Signature.sign(SK, DATE) == signature_of(SK, DATE)


async def test_raw_calls_are_authenticated_then_authorized(server) -> None:
    srv, _ = server
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        stub = service_grpc.MessagingServiceStub(channel)

        async def send(topic: str, metadata) -> definition.Status:
            return (await stub.SendMessage(send_request(topic=topic), metadata=metadata, timeout=5)).status

        assert (await send("Plain", META)).code == Code.UNAUTHORIZED  # no authorization at all
        assert (await send("Plain", signed(secret="wrong"))).code == Code.UNAUTHORIZED
        unknown = await send("Plain", signed(access_key="Nobody"))
        assert (unknown.code, unknown.message) == (Code.UNAUTHORIZED, "No acl config for Nobody")
        denied = await send("Denied", signed())
        assert (denied.code, denied.message) == (Code.FORBIDDEN, "No default permission for topic:Denied")
        assert (await send("Plain", signed())).code == Code.OK
        route = await stub.QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name="Denied")), metadata=signed(), timeout=5
        )
        assert route.status.code == Code.FORBIDDEN
        # a consumer group the account may subscribe with (default SUB), a topic it may not read
        receive = service.QueryAssignmentRequest(
            topic=definition.Resource(name="Denied"), group=definition.Resource(name="G")
        )
        answer = await stub.QueryAssignment(receive, metadata=signed(), timeout=5)
        assert answer.status.code == Code.FORBIDDEN
        telemetry = stub.Telemetry(iter(()), metadata=META, timeout=5)
        (refused,) = [command async for command in telemetry]
        assert refused.status.code == Code.UNAUTHORIZED


def produce(grpc_port: int, topic: str, credentials: object) -> str:
    config = rocketmq.ClientConfiguration(f"127.0.0.1:{grpc_port}", credentials)
    producer = rocketmq.Producer(config, (topic,))
    producer.startup()
    try:
        msg = rocketmq.Message()
        msg.topic = topic
        msg.body = b"signed"
        msg.keys = "k-signed"
        return producer.send(msg).message_id
    finally:
        producer.shutdown()


async def test_official_producer_with_credentials(server) -> None:
    srv, store = server
    sent = await asyncio.wait_for(
        asyncio.to_thread(produce, srv.grpc_port, "Plain", rocketmq.Credentials(AK, SK)), 60
    )
    assert sent
    found = [store.reader.get_message("Plain", q, 0, 32).buffers for q in range(4)]
    assert sum(len(buffers) for buffers in found) == 1
    for topic, credentials in (
        ("Plain", rocketmq.Credentials(AK, "wrong")),
        ("Denied", rocketmq.Credentials(AK, SK)),
    ):
        # refused at its first call (QueryRoute: UNAUTHORIZED, FORBIDDEN without ANY on the topic)
        with pytest.raises(Exception, match="failed to fetch topic"):
            await asyncio.wait_for(asyncio.to_thread(produce, srv.grpc_port, topic, credentials), 60)
    found = [store.reader.get_message("Plain", q, 0, 32).buffers for q in range(4)]
    assert sum(len(buffers) for buffers in found) == 1
