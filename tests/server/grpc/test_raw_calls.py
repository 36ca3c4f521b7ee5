"""The gRPC port spoken to directly: statuses for unserved calls and bad input, and its bounds.

An in-process server (``QueryServer`` with ``grpc_port=0``) over a writable store, as
``serve --writable`` builds it, and a plain grpcio channel with the generated stub: what any 5.x
client would send, including what the official clients never do (no client id, a system topic, a
message over the size limit). Every answer is a response with the Proxy's status code, never a
dropped call; only grpc's own bounds (message size, calls in flight) answer with a gRPC status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.grpc.sending import GrpcWriter
from server.grpc.v2 import ClientType, Code, Permission, definition, service, service_grpc
from server.remoting.write_path import DeliveryTimer, write_path
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import META, send_request


async def start(
    tmp_path: Path, *, writable: bool = True, **settings: object
) -> tuple[QueryServer, WritableStore]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic("Plain", 4)
    timer = DeliveryTimer(store)
    srv = QueryServer(
        store.reader,
        ServerSettings(port=0, broker_name="b1", grpc_port=0, **settings),  # type: ignore[arg-type]
        configure=write_path(store, timer=timer) if writable else None,
        grpc_writer=GrpcWriter(store, cluster="DefaultCluster", on_scheduled=timer.arm) if writable else None,
    )
    await srv.start()
    return srv, store


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[QueryServer]:
    srv, store = await start(tmp_path)
    try:
        yield srv
    finally:
        await srv.stop()
        store.close()


@pytest.fixture
async def stub(server: QueryServer) -> AsyncIterator[service_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield service_grpc.MessagingServiceStub(channel)


async def test_route_names_the_grpc_endpoint_and_the_queues(server: QueryServer, stub) -> None:
    answer = await stub.QueryRoute(
        service.QueryRouteRequest(topic=definition.Resource(name="Plain")), metadata=META, timeout=5
    )
    assert answer.status.code == Code.OK
    assert [(q.id, q.permission) for q in answer.message_queues] == [
        (i, Permission.READ_WRITE) for i in range(4)
    ]
    endpoint = answer.message_queues[0].broker.endpoints.addresses[0]
    assert (endpoint.host, endpoint.port) == ("127.0.0.1", server.grpc_port)
    assert list(answer.message_queues[0].accept_message_types) == [1]  # a topic without message.type: NORMAL
    missing = await stub.QueryRoute(
        service.QueryRouteRequest(topic=definition.Resource(name="Nope")), metadata=META, timeout=5
    )
    assert missing.status.code == Code.TOPIC_NOT_FOUND and not missing.message_queues


async def test_unserved_calls_answer_not_implemented(stub) -> None:
    group = definition.Resource(name="G")
    topic = definition.Resource(name="Plain")
    unary = [
        stub.QueryAssignment(
            service.QueryAssignmentRequest(topic=topic, group=group), metadata=META, timeout=5
        ),
        stub.AckMessage(service.AckMessageRequest(topic=topic, group=group), metadata=META, timeout=5),
        stub.EndTransaction(service.EndTransactionRequest(topic=topic), metadata=META, timeout=5),
        stub.ChangeInvisibleDuration(
            service.ChangeInvisibleDurationRequest(topic=topic), metadata=META, timeout=5
        ),
        stub.RecallMessage(service.RecallMessageRequest(topic=topic), metadata=META, timeout=5),
        stub.GetOffset(service.GetOffsetRequest(group=group), metadata=META, timeout=5),
    ]
    for answer in await asyncio.gather(*unary):
        assert answer.status.code == Code.NOT_IMPLEMENTED
    streamed = [
        r
        async for r in stub.ReceiveMessage(
            service.ReceiveMessageRequest(group=group), metadata=META, timeout=5
        )
    ]
    assert [r.WhichOneof("content") for r in streamed] == ["status", "delivery_timestamp"]
    assert streamed[0].status.code == Code.NOT_IMPLEMENTED


async def test_bad_input_gets_the_proxys_status(stub) -> None:
    async def code(request: service.SendMessageRequest, metadata=META) -> int:
        answer = await stub.SendMessage(request, metadata=metadata, timeout=5)
        assert not answer.entries
        return answer.status.code

    assert await code(service.SendMessageRequest()) == Code.MESSAGE_CORRUPTED
    assert await code(send_request(topic="bad topic")) == Code.ILLEGAL_TOPIC
    assert await code(send_request(topic="TBW102")) == Code.ILLEGAL_TOPIC
    assert await code(send_request(topic="NoSuchTopic")) == Code.TOPIC_NOT_FOUND
    assert await code(send_request(tag="a|b")) == Code.ILLEGAL_MESSAGE_TAG
    assert await code(send_request(body=b"x" * 4097)) == Code.MESSAGE_BODY_TOO_LARGE
    assert await code(send_request(message_group="g")) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert await code(send_request(), metadata=()) == Code.CLIENT_ID_REQUIRED
    heartbeat = await stub.Heartbeat(service.HeartbeatRequest(), metadata=META, timeout=5)
    assert heartbeat.status.code == Code.UNRECOGNIZED_CLIENT_TYPE  # no Settings on Telemetry yet
    ok = await stub.SendMessage(send_request(), metadata=META, timeout=5)
    assert ok.status.code == Code.OK and ok.entries[0].message_id == "01RAWTEST0000000000000000001"


async def test_telemetry_answers_settings_then_heartbeat_knows_the_client(stub) -> None:
    settings = definition.Settings(client_type=ClientType.PRODUCER)
    settings.publishing.topics.add(name="Plain")
    call = stub.Telemetry(metadata=META, timeout=5)
    await call.write(service.TelemetryCommand(settings=settings))
    answer = await call.read()
    assert answer.status.code == Code.OK
    assert (
        answer.settings.publishing.max_body_size == 4096 and answer.settings.backoff_policy.max_attempts == 3
    )
    heartbeat = await stub.Heartbeat(
        service.HeartbeatRequest(client_type=ClientType.PRODUCER), metadata=META, timeout=5
    )
    assert heartbeat.status.code == Code.OK
    await call.done_writing()
    assert await call.read() == grpc.aio.EOF
    bye = await stub.NotifyClientTermination(
        service.NotifyClientTerminationRequest(), metadata=META, timeout=5
    )
    assert bye.status.code == Code.OK
    again = await stub.Heartbeat(service.HeartbeatRequest(), metadata=META, timeout=5)
    assert again.status.code == Code.UNRECOGNIZED_CLIENT_TYPE


async def test_a_message_over_the_frame_limit_is_refused_and_the_port_keeps_serving(tmp_path: Path) -> None:
    srv, store = await start(tmp_path, max_frame_length=64 * 1024)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.SendMessage(send_request(body=b"x" * (65 * 1024)), metadata=META, timeout=5)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            ok = await stub.SendMessage(send_request(), metadata=META, timeout=5)
            assert ok.status.code == Code.OK
    finally:
        await srv.stop()
        store.close()


async def test_calls_in_flight_are_capped(tmp_path: Path) -> None:
    srv, store = await start(tmp_path, grpc_max_concurrent_calls=2)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            held = [stub.Telemetry(metadata=META, timeout=10) for _ in range(2)]
            settings = definition.Settings(client_type=ClientType.PRODUCER)
            settings.publishing.topics.add(name="Plain")
            for call in held:
                await call.write(service.TelemetryCommand(settings=settings))
                assert (await call.read()).status.code == Code.OK
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.SendMessage(send_request(), metadata=META, timeout=5)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            for call in held:
                await call.done_writing()
                assert await call.read() == grpc.aio.EOF
            deadline = asyncio.get_running_loop().time() + 5
            while True:  # the slots come back once the streams have ended on the server
                try:
                    ok = await stub.SendMessage(send_request(), metadata=META, timeout=5)
                    break
                except grpc.aio.AioRpcError:
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
            assert ok.status.code == Code.OK
    finally:
        await srv.stop()
        store.close()


async def test_read_only_serving_answers_forbidden_to_a_send(tmp_path: Path) -> None:
    srv, store = await start(tmp_path, writable=False)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            route = await stub.QueryRoute(
                service.QueryRouteRequest(topic=definition.Resource(name="Plain")), metadata=META, timeout=5
            )
            assert route.status.code == Code.OK and len(route.message_queues) == 4
            answer = await stub.SendMessage(send_request(), metadata=META, timeout=5)
            assert answer.status.code == Code.FORBIDDEN
    finally:
        await srv.stop()
        store.close()


async def test_grpc_calls_are_counted_in_metrics(tmp_path: Path) -> None:
    """``/metrics`` counted remoting requests only: a 5.x client's calls left no trace (issue 35,
    item 5). Two QueryRoute calls and one unserved call are counted by method."""
    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    srv, store = await start(tmp_path, http_port=0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            for name in ("Plain", "Nope"):
                request = service.QueryRouteRequest(topic=definition.Resource(name=name))
                await stub.QueryRoute(request, metadata=META, timeout=5)
            await stub.QueryAssignment(
                service.QueryAssignmentRequest(
                    topic=definition.Resource(name="Plain"), group=definition.Resource(name="G")
                ),
                metadata=META,
                timeout=5,
            )
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{srv.http_port}/metrics") as response:
                text = await response.text()
    finally:
        await srv.stop()
        store.close()
    calls = {
        sample.labels["method"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "rmq_query_grpc_requests"
        for sample in family.samples
        if sample.name == "rmq_query_grpc_requests_total"
    }
    assert calls == {"QueryRoute": 2, "QueryAssignment": 1}
