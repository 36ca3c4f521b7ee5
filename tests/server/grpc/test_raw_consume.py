"""The SimpleConsumer calls spoken to directly over an in-process ``serve --writable``.

What the official client's happy path does not show: the assignment's queue id -1, the Proxy's
refusals (invisible time, filter, receipt handle), a held receive woken by a SEND long before its
polling time, the message's system properties, and ForwardMessageToDeadLetterQueue writing the
dead letter and committing past it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader
from server.app import QueryServer, ServerSettings
from server.broker.controller import BrokerController
from server.broker.put_message import PutContext, single_record
from server.broker.receive_store import store_leases
from server.broker.writable_store import WritableStore
from server.grpc.receiving import GrpcConsumers
from server.grpc.sending import GrpcWriter
from server.grpc.topics import GrpcTopics
from server.grpc.v2 import Code, Permission, definition, service, service_grpc
from server.remoting.write_path import DeliveryTimer, write_path
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import META, send_request

GROUP = definition.Resource(name="RawGroup")
TOPIC = definition.Resource(name="Plain")


class Served:
    def __init__(self, server: QueryServer, store: WritableStore, broker: BrokerController) -> None:
        self.server, self.store, self.broker = server, store, broker


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic("Plain", 4)
    timer = DeliveryTimer(store)
    path = write_path(store, timer=timer)
    srv = QueryServer(
        store.reader,
        ServerSettings(port=0, broker_name="b1", grpc_port=0),
        configure=path,
        grpc_writer=GrpcWriter(store, cluster="DefaultCluster", on_scheduled=timer.arm, broker=path.broker),
    )
    await srv.start()
    try:
        yield Served(srv, store, path.broker)
    finally:
        await srv.stop()
        store.close()


@pytest.fixture
async def stub(served: Served) -> AsyncIterator[service_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{served.server.grpc_port}") as channel:
        yield service_grpc.MessagingServiceStub(channel)


def receive_request(
    invisible_s: int = 10, polling_s: int = 20, expression: str = "*", kind: int = definition.FilterType.TAG
) -> service.ReceiveMessageRequest:
    return service.ReceiveMessageRequest(
        group=GROUP,
        message_queue=definition.MessageQueue(topic=TOPIC, id=-1),
        filter_expression=definition.FilterExpression(type=kind, expression=expression),
        batch_size=8,
        invisible_duration=Duration(seconds=invisible_s),
        long_polling_timeout=Duration(seconds=polling_s),
    )


async def receive(stub, request: service.ReceiveMessageRequest) -> list[service.ReceiveMessageResponse]:
    """The stream's responses but the last, which must be the delivery timestamp (Proxy 5.3)."""
    responses = [r async for r in stub.ReceiveMessage(request, metadata=META, timeout=30)]
    assert responses[-1].WhichOneof("content") == "delivery_timestamp"
    assert abs(responses[-1].delivery_timestamp.seconds - time.time()) < 60
    return responses[:-1]


async def test_query_assignment_is_the_whole_topic_as_queue_minus_one(served: Served, stub) -> None:
    answer = await stub.QueryAssignment(
        service.QueryAssignmentRequest(topic=TOPIC, group=GROUP), metadata=META, timeout=5
    )
    assert answer.status.code == Code.OK
    (assignment,) = answer.assignments
    queue = assignment.message_queue
    assert (queue.id, queue.permission, queue.broker.name) == (-1, Permission.READ_WRITE, "b1")
    assert queue.broker.endpoints.addresses[0].port == served.server.grpc_port
    missing = await stub.QueryAssignment(
        service.QueryAssignmentRequest(topic=definition.Resource(name="Nope"), group=GROUP),
        metadata=META,
        timeout=5,
    )
    assert missing.status.code == Code.TOPIC_NOT_FOUND


async def test_refusals_are_one_status_response(stub) -> None:
    for request, code in (
        (receive_request(invisible_s=1), Code.ILLEGAL_INVISIBLE_TIME),
        (receive_request(invisible_s=13 * 3600), Code.ILLEGAL_INVISIBLE_TIME),
        (receive_request(kind=definition.FilterType.SQL, expression=""), Code.ILLEGAL_FILTER_EXPRESSION),
        # an SQL92 expression that does not compile: the broker's pop refuses it, the Proxy passes that on
        (receive_request(kind=definition.FilterType.SQL, expression="a >"), Code.INTERNAL_SERVER_ERROR),
        (receive_request(expression="||"), Code.ILLEGAL_FILTER_EXPRESSION),
    ):
        assert [r.status.code for r in await receive(stub, request)] == [code]
    too_many = receive_request()
    too_many.batch_size = 33
    (answer,) = await receive(stub, too_many)
    assert answer.status.code == Code.INTERNAL_SERVER_ERROR
    assert answer.status.message == "the broker[127.0.0.1] pop message's num is greater than 32"
    bad = await stub.AckMessage(
        service.AckMessageRequest(
            group=GROUP,
            topic=TOPIC,
            entries=[service.AckMessageEntry(message_id="x", receipt_handle="garbage")],
        ),
        metadata=META,
        timeout=5,
    )
    assert bad.status.code == Code.INVALID_RECEIPT_HANDLE
    assert [e.status.code for e in bad.entries] == [Code.INVALID_RECEIPT_HANDLE]


async def test_an_ack_answers_each_entry_and_overall_ok_or_multiple_results(stub) -> None:
    """Two received messages acked with a bad handle between them: each entry its own status (its
    message id and handle echoed), MULTIPLE_RESULTS overall; the other two acked together are OK
    "OK"; a lone entry's status is the answer's."""
    for body in (b"a1", b"a2", b"a3", b"a4"):
        sent = await stub.SendMessage(send_request(body=body), metadata=META, timeout=5)
        assert sent.status.code == Code.OK
    got = await receive(stub, receive_request())
    handles = [
        (r.message.system_properties.message_id, r.message.system_properties.receipt_handle) for r in got[1:]
    ]
    assert len(handles) == 4

    async def ack(pairs: list[tuple[str, str]]) -> service.AckMessageResponse:
        entries = [service.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in pairs]
        request = service.AckMessageRequest(group=GROUP, topic=TOPIC, entries=entries)
        return await stub.AckMessage(request, metadata=META, timeout=5)

    mixed = await ack([handles[0], ("bad-id", "garbage"), handles[1]])
    assert (mixed.status.code, mixed.status.message) == (Code.MULTIPLE_RESULTS, "ack has multiple results")
    assert [(e.message_id, e.receipt_handle) for e in mixed.entries] == [
        handles[0],
        ("bad-id", "garbage"),
        handles[1],
    ]
    codes = [(e.status.code, e.status.message if e.status.code == Code.OK else "") for e in mixed.entries]
    assert codes == [(Code.OK, "OK"), (Code.INVALID_RECEIPT_HANDLE, ""), (Code.OK, "OK")]
    fresh = await ack(handles[2:])
    assert (fresh.status.code, fresh.status.message) == (Code.OK, "OK")
    assert [e.status.code for e in fresh.entries] == [Code.OK, Code.OK]
    one = await ack([("bad-id", "garbage")])
    assert one.status == one.entries[0].status
    assert one.status.code == Code.INVALID_RECEIPT_HANDLE


async def test_a_held_receive_is_answered_by_a_send_with_the_proxys_properties(stub) -> None:
    started = time.monotonic()
    held = asyncio.ensure_future(receive(stub, receive_request(polling_s=20)))
    await asyncio.sleep(0.5)
    assert not held.done()
    request = send_request(body=b"woken", tag="T1")
    request.messages[0].system_properties.keys.extend(["k1", "k2"])
    request.messages[0].user_properties["color"] = "blue"
    sent = await stub.SendMessage(request, metadata=META, timeout=5)
    assert sent.status.code == Code.OK
    responses = await asyncio.wait_for(held, 10)
    assert time.monotonic() - started < 5  # woken by the SEND, not by the 20 s polling time
    assert [r.WhichOneof("content") for r in responses] == ["status", "message"]
    assert responses[0].status.code == Code.OK
    message = responses[1].message
    props = message.system_properties
    assert message.body == b"woken" and message.topic.name == "Plain"
    assert props.message_id == "01RAWTEST0000000000000000001" and props.tag == "T1"
    assert list(props.keys) == ["k1", "k2"] and dict(message.user_properties) == {"color": "blue"}
    assert props.body_digest.checksum == hashlib.md5(b"woken").hexdigest().upper()
    assert props.delivery_attempt == 1 and props.queue_offset == sent.entries[0].offset
    assert props.invisible_duration.seconds == 10 and props.receipt_handle
    assert abs(props.store_timestamp.seconds - time.time()) < 60


async def test_forward_to_dead_letter_queue_stores_it_and_commits_past_it(served: Served, stub) -> None:
    sent = await stub.SendMessage(send_request(body=b"poison"), metadata=META, timeout=5)
    queue_id = next(i for i in range(4) if served.store.reader.max_offset("Plain", i) == 1)
    (_, got) = await receive(stub, receive_request())
    handle = got.message.system_properties.receipt_handle
    forwarded = await stub.ForwardMessageToDeadLetterQueue(
        service.ForwardMessageToDeadLetterQueueRequest(
            group=GROUP, topic=TOPIC, receipt_handle=handle, message_id=sent.entries[0].message_id
        ),
        metadata=META,
        timeout=5,
    )
    assert forwarded.status.code == Code.OK
    result = served.store.reader.get_message("%DLQ%RawGroup", 0, 0, 8)
    (dead,) = [decode_message(bytes(b)) for b in result.buffers]
    assert dead.body == b"poison" and dead.properties["RETRY_TOPIC"] == "Plain"
    assert dead.properties["UNIQ_KEY"] == sent.entries[0].message_id
    assert served.broker.query_offset("RawGroup", "Plain", queue_id) == 1
    again = await stub.AckMessage(
        service.AckMessageRequest(
            group=GROUP, topic=TOPIC, entries=[service.AckMessageEntry(message_id="x", receipt_handle=handle)]
        ),
        metadata=META,
        timeout=5,
    )
    assert again.status.code == Code.INVALID_RECEIPT_HANDLE
    changed = await stub.ChangeInvisibleDuration(
        service.ChangeInvisibleDurationRequest(
            group=GROUP, topic=TOPIC, receipt_handle=handle, invisible_duration=Duration(seconds=10)
        ),
        metadata=META,
        timeout=5,
    )
    assert changed.status.code == Code.INVALID_RECEIPT_HANDLE


async def test_a_consumers_heartbeat_makes_it_a_member_of_the_group_until_it_terminates(
    served: Served, stub
) -> None:
    settings = definition.Settings(client_type=definition.ClientType.SIMPLE_CONSUMER)
    settings.subscription.group.CopyFrom(GROUP)
    entry = settings.subscription.subscriptions.add()
    entry.topic.CopyFrom(TOPIC)
    entry.expression.CopyFrom(
        definition.FilterExpression(type=definition.FilterType.TAG, expression="A || B")
    )
    meta = (*META, ("x-mq-language", "PYTHON"))
    commands: asyncio.Queue[service.TelemetryCommand | None] = asyncio.Queue()
    await commands.put(service.TelemetryCommand(settings=settings))

    async def outgoing() -> AsyncIterator[service.TelemetryCommand]:
        while (command := await commands.get()) is not None:
            yield command

    telemetry = stub.Telemetry(outgoing(), metadata=meta)
    try:
        answered = await asyncio.wait_for(telemetry.read(), 5)
        assert answered.status.code == Code.OK
        beat = await stub.Heartbeat(
            service.HeartbeatRequest(group=GROUP, client_type=definition.ClientType.SIMPLE_CONSUMER),
            metadata=meta,
            timeout=5,
        )
        assert beat.status.code == Code.OK
        group = served.broker.consumers.get("RawGroup")
        assert group is not None and group.client_ids() == ["raw-test-client"]
        assert (group.consume_type, group.message_model) == ("CONSUME_ACTIVELY", "CLUSTERING")
        (member,) = group.members.values()
        assert member.language == "PYTHON"
        # the client's own address (the TLS relay's client side), not the relay's toward grpcio
        relay = served.server._grpc.relay
        assert relay is not None
        clients = {f"{host}:{port}" for host, port in (front.peer for front in relay._open)}
        assert member.channel.client_address in clients
        subscription = group.subscriptions["Plain"]
        assert subscription.subString == "A || B" and subscription.tagsSet == ["A", "B"]
        ended = await stub.NotifyClientTermination(
            service.NotifyClientTerminationRequest(group=GROUP), metadata=meta, timeout=5
        )
        assert ended.status.code == Code.OK
        assert (
            served.broker.consumers.get("RawGroup") is None
            or not served.broker.consumers.get("RawGroup").members
        )
    finally:
        await commands.put(None)
        telemetry.cancel()


async def test_unacked_leases_are_lost_on_restart_and_the_message_handed_out_again(tmp_path: Path) -> None:
    """Leases live in memory (the broker keeps pop checkpoints we do not): a restart forgets them,
    the committed offset is where the next receive starts, and the unacked message comes back."""

    async def run(action):
        config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
        store = WritableStore(config)
        if store.topic_config("Plain") is None:
            store.create_topic("Plain", 1)
        timer = DeliveryTimer(store)
        path = write_path(store, timer=timer)
        srv = QueryServer(
            store.reader,
            ServerSettings(port=0, broker_name="b1", grpc_port=0),
            configure=path,
            grpc_writer=GrpcWriter(
                store, cluster="DefaultCluster", on_scheduled=timer.arm, broker=path.broker
            ),
        )
        await srv.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
                return await action(service_grpc.MessagingServiceStub(channel))
        finally:
            await srv.stop()
            store.close()

    async def first(stub) -> list[int]:
        for body in (b"acked", b"unacked"):
            assert (
                await stub.SendMessage(send_request(body=body), metadata=META, timeout=5)
            ).status.code == Code.OK
        (_, *got) = await receive(stub, receive_request(invisible_s=3600))
        acked = next(r.message for r in got if r.message.body == b"acked")
        ack = service.AckMessageEntry(receipt_handle=acked.system_properties.receipt_handle)
        answer = await stub.AckMessage(
            service.AckMessageRequest(group=GROUP, topic=TOPIC, entries=[ack]), metadata=META, timeout=5
        )
        assert answer.status.code == Code.OK
        return [r.message.system_properties.delivery_attempt for r in got]

    async def second(stub) -> list[tuple[bytes, int]]:
        (_, *got) = await receive(stub, receive_request(invisible_s=3600))
        return [(r.message.body, r.message.system_properties.delivery_attempt) for r in got]

    assert await run(first) == [1, 1]
    # the restart comes long before the hour's invisible time: only the unacked one is handed out
    assert await run(second) == [(b"unacked", 1)]


async def test_an_empty_receive_without_long_polling_answers_before_the_clients_deadline(stub) -> None:
    """The Go client's receive: no long polling timeout, a deadline of its await duration (5 s) plus
    its request timeout (3 s). The Proxy polls for the time remaining minus half the request timeout
    (8 - 1.5 = 6.5 s), so "nothing found" arrives before the deadline, not as DEADLINE_EXCEEDED."""
    request = receive_request()
    request.ClearField("long_polling_timeout")
    started = time.monotonic()
    responses = [r async for r in stub.ReceiveMessage(request, metadata=META, timeout=8)]
    took = time.monotonic() - started
    assert [r.WhichOneof("content") for r in responses] == ["status", "delivery_timestamp"]
    assert responses[0].status.code == Code.MESSAGE_NOT_FOUND
    assert 6.0 <= took < 7.5


async def test_under_five_seconds_left_is_refused_with_the_code_the_client_knows(stub) -> None:
    """The Proxy answers ILLEGAL_POLLING_TIME to clients from 5.0.3 on (``x-mq-client-version``),
    BAD_REQUEST to older ones and to a client that names no version."""
    for meta, code in (
        (META, Code.BAD_REQUEST),
        ((*META, ("x-mq-client-version", "5.0.2")), Code.BAD_REQUEST),
        ((*META, ("x-mq-client-version", "5.1.2")), Code.ILLEGAL_POLLING_TIME),
    ):
        responses = [r async for r in stub.ReceiveMessage(receive_request(), metadata=meta, timeout=4)]
        assert responses[0].status.code == code


async def test_a_send_between_a_receives_read_and_its_wait_wakes_it(served: Served) -> None:
    """A receive that found nothing yields once it waits; a SEND handled before its wait's tasks
    first run (the same turn of the event loop) must still wake it, not leave it to the polling time.
    Driven by hand on the port's own consume side, so that the SEND lands exactly there."""
    store, broker = served.store, served.broker
    consumers = GrpcConsumers(
        broker,
        store_leases(broker, "b1"),
        GrpcTopics(store.reader, 6, store),
        served.server.changes,
        clock=broker.clock,
    )
    responses = consumers.receive(receive_request(polling_s=20), None, 30_000)
    first = asyncio.ensure_future(anext(responses))
    await asyncio.sleep(0)  # the receive reads (nothing) and starts to wait
    assert not first.done()
    header = SendMessageRequestHeader("g", "Plain", "TBW102", 4, 0, 0, int(time.time() * 1000), 0, "")
    store.put([single_record(header, b"between", PutContext("DefaultCluster", 4096, "127.0.0.1", 9))])
    try:
        status = await asyncio.wait_for(first, 5)  # not the 20 s polling time
        assert service.ReceiveMessageResponse.FromString(status).status.code == Code.OK
        message = service.ReceiveMessageResponse.FromString(await anext(responses)).message
        assert message.body == b"between"
    finally:
        await responses.aclose()


async def test_an_orderly_groups_ack_wakes_the_receive_held_on_its_queue(served: Served, stub) -> None:
    """An orderly group's queue is locked while a message of it is out: a receive then waits. The
    ack of that message wakes it at once (``notify_queue`` of each queue the ack's handles were
    on), as the broker's ack of an orderly pop notifies its long polling - not at the lease's
    deadline (10 s) or the polling time (20 s)."""
    from dataclasses import replace

    config = served.broker.find_group(GROUP.name)
    assert config is not None
    served.broker.groups.put(replace(config, consume_message_orderly=True))
    served.store.create_topic("One", 1)
    request = receive_request(polling_s=20)
    request.message_queue.topic.name = "One"
    assert (
        await stub.SendMessage(send_request("One", b"m0"), metadata=META, timeout=5)
    ).status.code == Code.OK
    first = await receive(stub, request)
    assert [r.message.body for r in first[1:]] == [b"m0"]
    assert (
        await stub.SendMessage(send_request("One", b"m1"), metadata=META, timeout=5)
    ).status.code == Code.OK
    held = asyncio.ensure_future(receive(stub, request))
    await asyncio.sleep(1.0)
    assert not held.done()  # the queue is locked by m0
    started = time.monotonic()
    entry = service.AckMessageEntry(
        message_id=first[1].message.system_properties.message_id,
        receipt_handle=first[1].message.system_properties.receipt_handle,
    )
    acked = await stub.AckMessage(
        service.AckMessageRequest(group=GROUP, topic=request.message_queue.topic, entries=[entry]),
        metadata=META,
        timeout=5,
    )
    assert acked.status.code == Code.OK
    second = await asyncio.wait_for(held, 25)
    assert time.monotonic() - started < 3
    assert [r.message.body for r in second[1:]] == [b"m1"]
