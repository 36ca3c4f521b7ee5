"""Transactions and the offset calls spoken to directly over an in-process ``serve --writable``.

What the official client's happy path does not show: EndTransaction's refusals, the transaction data
taken out by the first EndTransaction, the RecoverOrphanedTransactionCommand as it is written on a
raw Telemetry stream (the check-back driven by hand, with a zero transaction timeout), and the offset
calls against the offset table the remoting side reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from server.app import QueryServer, ServerSettings
from server.broker.controller import ConsumeSettings
from server.broker.transactions import TransactionSettings
from server.broker.writable_store import WritableStore
from server.grpc.sending import GrpcWriter
from server.grpc.v2 import ClientType, Code, MessageType, definition, service, service_grpc
from server.remoting.write_path import DeliveryTimer, WritePath, write_path
from store.config.store_config import StoreConfig
from store.config.topics import TopicConfig
from tests.support.grpc_calls import META, send_request
from tests.support.harness import RawClient

TX = definition.Resource(name="TxTopic")


class Served:
    def __init__(self, server: QueryServer, store: WritableStore, path: WritePath) -> None:
        self.server, self.store, self.path = server, store, path


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic("Plain", 4)
    store.topics.put(TopicConfig("TxTopic", 2, 2, 6, attributes={"message.type": "TRANSACTION"}), 1)
    timer = DeliveryTimer(store)
    # a zero timeout: every half message is old enough for the check driven by hand
    consume = ConsumeSettings(transactions=TransactionSettings(check_interval_ms=3_600_000, timeout_ms=0))
    path = write_path(store, timer=timer, consume=consume)
    srv = QueryServer(
        store.reader,
        ServerSettings(port=0, broker_name="b1", grpc_port=0),
        configure=path,
        grpc_writer=GrpcWriter(store, cluster="DefaultCluster", on_scheduled=timer.arm, broker=path.broker),
    )
    await srv.start()
    try:
        yield Served(srv, store, path)
    finally:
        await srv.stop()
        store.close()


@pytest.fixture
async def stub(served: Served) -> AsyncIterator[service_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{served.server.grpc_port}") as channel:
        yield service_grpc.MessagingServiceStub(channel)


def half(message_id: str, body: bytes) -> service.SendMessageRequest:
    request = send_request(topic="TxTopic", body=body, message_type=MessageType.TRANSACTION)
    request.messages[0].system_properties.message_id = message_id
    return request


def end(message_id: str, resolution: int, source: int = definition.TransactionSource.SOURCE_CLIENT):
    return service.EndTransactionRequest(
        topic=TX, message_id=message_id, transaction_id=message_id, resolution=resolution, source=source
    )


def topic_bodies(store: WritableStore) -> list[bytes]:
    bodies = []
    for queue in range(2):
        found = store.reader.get_message("TxTopic", queue, 0, 32)
        bodies += [decode_message(buf).body for buf in found.buffers]
    return bodies


async def test_end_transaction_commits_once_and_refuses_what_it_cannot_find(served: Served, stub) -> None:
    sent = await stub.SendMessage(half("TX-1", b"committed"), metadata=META, timeout=5)
    assert sent.status.code == Code.OK
    assert sent.entries[0].transaction_id == "TX-1"  # the broker's transaction id: the UNIQ_KEY
    assert topic_bodies(served.store) == []  # a half message only
    blank = service.EndTransactionRequest(topic=TX, resolution=definition.TransactionResolution.COMMIT)
    answer = await stub.EndTransaction(blank, metadata=META, timeout=5)
    assert answer.status.code == Code.INVALID_TRANSACTION_ID
    unknown = await stub.EndTransaction(end("NOPE", 1), metadata=META, timeout=5)
    assert (unknown.status.code, unknown.status.message) == (
        Code.INTERNAL_SERVER_ERROR,
        "cannot found transaction data",
    )
    committed = await stub.EndTransaction(end("TX-1", 1), metadata=META, timeout=5)
    assert committed.status.code == Code.OK
    assert topic_bodies(served.store) == [b"committed"]
    again = await stub.EndTransaction(end("TX-1", 1), metadata=META, timeout=5)
    assert again.status.code == Code.INTERNAL_SERVER_ERROR  # its data was taken by the first
    # rolled back: never in the topic, and the check-back has nothing left to ask about
    await stub.SendMessage(half("TX-2", b"rolledback"), metadata=META, timeout=5)
    rolled = await stub.EndTransaction(end("TX-2", 2), metadata=META, timeout=5)
    assert rolled.status.code == Code.OK
    await asyncio.sleep(0.01)
    list(served.path.checker.check())
    assert served.path.checker.sent == 0
    assert topic_bodies(served.store) == [b"committed"]


async def test_check_back_is_a_recover_command_on_the_producers_telemetry(served: Served, stub) -> None:
    settings = definition.Settings(
        client_type=ClientType.PRODUCER, publishing=definition.Publishing(topics=[TX])
    )
    outgoing: asyncio.Queue[service.TelemetryCommand | None] = asyncio.Queue()
    await outgoing.put(service.TelemetryCommand(settings=settings))

    async def commands() -> AsyncIterator[service.TelemetryCommand]:
        while (command := await outgoing.get()) is not None:
            yield command

    stream = stub.Telemetry(commands(), metadata=META, timeout=30)
    first = await asyncio.wait_for(stream.read(), 5)
    assert first.status.code == Code.OK and first.settings.HasField("publishing")
    heartbeat = await stub.Heartbeat(
        service.HeartbeatRequest(client_type=ClientType.PRODUCER), metadata=META, timeout=5
    )
    assert heartbeat.status.code == Code.OK
    assert [m.client_id for m in served.path.broker.producers.members("TxTopic")] == ["raw-test-client"]
    assert (
        await stub.SendMessage(half("TX-3", b"committed"), metadata=META, timeout=5)
    ).status.code == Code.OK
    await asyncio.sleep(0.01)
    list(served.path.checker.check())
    assert served.path.checker.sent == 1
    command = await asyncio.wait_for(stream.read(), 5)
    recover = command.recover_orphaned_transaction_command
    assert recover.transaction_id == "TX-3"
    shown = recover.message
    assert (shown.topic.name, shown.body) == ("TxTopic", b"committed")
    assert shown.system_properties.message_id == "TX-3"
    assert shown.system_properties.message_type == MessageType.TRANSACTION
    # the checker's answer names the copy the broker put back
    answer = await stub.EndTransaction(
        end("TX-3", 1, definition.TransactionSource.SOURCE_SERVER_CHECK), metadata=META, timeout=5
    )
    assert answer.status.code == Code.OK
    assert topic_bodies(served.store) == [b"committed"]
    # the stream gone, the producer is no longer asked
    await outgoing.put(None)
    stream.cancel()
    deadline = time.monotonic() + 5
    while served.path.broker.producers.members("TxTopic") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert served.path.broker.producers.available_channel("TxTopic") is None


def queue(topic: str = "Plain", queue_id: int = 1) -> definition.MessageQueue:
    return definition.MessageQueue(topic=definition.Resource(name=topic), id=queue_id)


async def test_offset_calls_over_the_broker_offset_table(served: Served, stub) -> None:
    group = definition.Resource(name="OffsetGroup")
    missing = await stub.GetOffset(
        service.GetOffsetRequest(group=group, message_queue=queue()), metadata=META, timeout=5
    )
    assert missing.status.code == Code.OFFSET_NOT_FOUND  # nothing committed, the queue empty
    before = int(time.time() * 1000) - 1
    for i in range(3):
        request = send_request(body=b"m%d" % i)
        request.messages[0].system_properties.message_id = f"OFF-{i}"
        await stub.SendMessage(request, metadata=META, timeout=5)
    placed = [served.store.reader.max_offset("Plain", q) for q in range(4)]
    busy = max(range(4), key=lambda q: placed[q])
    fresh = await stub.GetOffset(
        service.GetOffsetRequest(group=group, message_queue=queue(queue_id=busy)), metadata=META, timeout=5
    )
    assert (fresh.status.code, fresh.offset) == (Code.OK, 0)  # the queue still has its message 0
    updated = await stub.UpdateOffset(
        service.UpdateOffsetRequest(group=group, message_queue=queue(queue_id=busy), offset=1),
        metadata=META,
        timeout=5,
    )
    assert updated.status.code == Code.OK
    assert served.path.broker.offsets.query("OffsetGroup", "Plain", busy) == 1
    got = await stub.GetOffset(
        service.GetOffsetRequest(group=group, message_queue=queue(queue_id=busy)), metadata=META, timeout=5
    )
    assert (got.status.code, got.offset) == (Code.OK, 1)

    async def query(policy: int, at: int | None = None) -> service.QueryOffsetResponse:
        request = service.QueryOffsetRequest(message_queue=queue(queue_id=busy), query_offset_policy=policy)
        if at is not None:
            request.timestamp.CopyFrom(Timestamp(seconds=at // 1000, nanos=(at % 1000) * 1_000_000))
        return await stub.QueryOffset(request, metadata=META, timeout=5)

    policy = definition.QueryOffsetPolicy
    assert (await query(policy.BEGINNING)).offset == 0
    assert (await query(policy.END)).offset == placed[busy]
    assert (await query(policy.TIMESTAMP, before)).offset == 0
    # a time after the last message finds that message (``getOffsetInQueueByTime``), not the end
    assert (await query(policy.TIMESTAMP, int(time.time() * 1000) + 60_000)).offset == placed[busy] - 1
    refusals = [
        (
            stub.UpdateOffset(
                service.UpdateOffsetRequest(group=group, message_queue=queue(queue_id=9), offset=0),
                metadata=META,
                timeout=5,
            ),
            Code.BAD_REQUEST,
        ),
        (
            stub.UpdateOffset(
                service.UpdateOffsetRequest(group=group, message_queue=queue(), offset=-1),
                metadata=META,
                timeout=5,
            ),
            Code.ILLEGAL_OFFSET,
        ),
        (
            stub.GetOffset(
                service.GetOffsetRequest(group=group, message_queue=queue(topic="Nope")),
                metadata=META,
                timeout=5,
            ),
            Code.TOPIC_NOT_FOUND,
        ),
        (
            stub.GetOffset(
                service.GetOffsetRequest(group=definition.Resource(name="bad group"), message_queue=queue()),
                metadata=META,
                timeout=5,
            ),
            Code.ILLEGAL_CONSUMER_GROUP,
        ),
    ]
    for call, code in refusals:
        assert (await call).status.code == code


async def test_a_commit_over_both_doors_stores_one_copy(served: Served, stub) -> None:
    """Issue 31 item 6: EndTransaction and the remoting END_TRANSACTION share the broker's decision
    (``server.broker.decided_halves``): a half message committed over gRPC and then again over remoting
    (as a 4.x tool or a retrying client might) is in the topic once; the second commit gets the
    broker's answer to a commit and writes nothing."""
    sent = await stub.SendMessage(half("TX-9", b"once"), metadata=META, timeout=5)
    assert sent.status.code == Code.OK
    [buf] = served.store.reader.get_message("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 1).buffers
    half_message = decode_message(buf)
    committed = await stub.EndTransaction(end("TX-9", 1), metadata=META, timeout=5)
    assert committed.status.code == Code.OK
    again = RawClient.request(
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": half_message.properties["PGROUP"],
            "tranStateTableOffset": str(half_message.queue_offset),
            "commitLogOffset": str(half_message.commit_log_offset),
            "commitOrRollback": "8",
            "fromTransactionCheck": "false",
            "msgId": "TX-9",
            "transactionId": "TX-9",
        },
    )
    client = await RawClient.connect("127.0.0.1", served.server.port)
    try:
        answer = await client.call(again)
    finally:
        await client.close()
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert topic_bodies(served.store) == [b"once"]
