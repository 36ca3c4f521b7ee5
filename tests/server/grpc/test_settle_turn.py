"""SendMessage calls of one loop turn settled once, and nothing acknowledged before it is readable.

``GrpcWriter.send`` appends at once and waits for its turn's settle (``server/grpc/settle_turn.py``).
Checked here on the writer over a real writable store: calls started together share one settle and
each is readable (its consume queue holds it) when its answer comes; a settle failure answers every
call of the turn with the broker's refusal; records another writer's failed settle took from the
store are not acknowledged. And over the gRPC port: concurrent calls all answered, each readable when
answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from server.app import QueryServer, ServerSettings
from server.broker.put_message import disk_full
from server.broker.writable_store import WritableStore
from server.grpc.conversion import to_broker_message
from server.grpc.sending import NOT_SETTLED_MESSAGE, GrpcWriter, Stored
from server.grpc.v2 import Code, service_grpc
from server.grpc.validation import GrpcStatusError
from server.remoting.write_path import DeliveryTimer, write_path
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import META, send_request

TOPIC = "Plain"
BORN = ("127.0.0.1", 50000)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WritableStore]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic(TOPIC, 4)
    try:
        yield store
    finally:
        store.close()


def counted_settles(store: WritableStore) -> list[int]:
    """Count the store's settles (every one, whoever calls it)."""
    calls: list[int] = []
    settle = store.settle

    def counting() -> Any:
        calls.append(1)
        return settle()

    store.settle = counting  # type: ignore[method-assign]
    return calls


def message(i: int) -> Any:
    request = send_request(TOPIC, body=b"m%d" % i, message_id=f"01TURN{i:022d}")
    return to_broker_message(request.messages[0], peer_host="127.0.0.1:50000", now_ms=0, delays={1: 1000})


def readable(store: WritableStore, queue_id: int, stored: list[Stored]) -> bool:
    """Whether the consume queue holds every one of ``stored`` (a pull would find it)."""
    return all(store.reader.max_offset(TOPIC, queue_id) > s.queue_offset for s in stored)


async def test_calls_of_one_turn_share_one_settle_and_each_is_readable_when_answered(
    store: WritableStore,
) -> None:
    writer = GrpcWriter(store, cluster="DefaultCluster")
    settles = counted_settles(store)
    answered_readable: list[bool] = []

    async def send(i: int) -> list[Stored]:
        stored = await writer.send([message(i)], i % 4, BORN)
        answered_readable.append(readable(store, i % 4, stored))  # at the moment of the answer
        return stored

    results = await asyncio.gather(*(send(i) for i in range(8)))
    assert len(settles) == 1
    assert answered_readable == [True] * 8
    assert sorted(s.queue_offset for r in results for s in r) == [0, 0, 0, 0, 1, 1, 1, 1]
    # a call of a later turn settles on its own
    await writer.send([message(8), message(9)], 0, BORN)
    assert len(settles) == 2
    assert store.reader.max_offset(TOPIC, 0) == 4


async def test_a_failed_settle_refuses_every_call_of_its_turn(store: WritableStore) -> None:
    writer = GrpcWriter(store, cluster="DefaultCluster")
    settle = store.settle

    def full() -> Any:
        settle()  # the records are dispatched, but the settle reports the disk full
        raise disk_full(99.0, 99.0, 99.0)

    store.settle = full  # type: ignore[method-assign]
    outcomes = await asyncio.gather(
        *(writer.send([message(i)], 0, BORN) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(o, GrpcStatusError) for o in outcomes), outcomes
    assert {(o.code, "disk is full" in o.message) for o in outcomes} == {(Code.INTERNAL_SERVER_ERROR, True)}


async def test_records_another_writers_failed_settle_took_are_not_acknowledged(store: WritableStore) -> None:
    """The call's records are taken by another writer's settle (between its append and its turn's
    settle) whose dispatch fails: they are not in their queue, so the call is refused."""
    writer = GrpcWriter(store, cluster="DefaultCluster")
    call = asyncio.ensure_future(writer.send([message(0)], 1, BORN))
    await asyncio.sleep(0)  # the call appended and waits for its turn's settle, which runs next
    dispatch = store.dispatch

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a dispatch bug")

    store.dispatch = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        store.settle()  # another writer's settle: it takes the call's records and fails
    store.dispatch = dispatch  # type: ignore[method-assign]
    with pytest.raises(GrpcStatusError) as refused:
        await call
    assert (refused.value.code, refused.value.message) == (Code.INTERNAL_SERVER_ERROR, NOT_SETTLED_MESSAGE)
    assert store.reader.max_offset(TOPIC, 1) == 0


async def test_records_another_writers_settle_took_are_acknowledged(store: WritableStore) -> None:
    writer = GrpcWriter(store, cluster="DefaultCluster")
    call = asyncio.ensure_future(writer.send([message(0)], 1, BORN))
    await asyncio.sleep(0)
    store.settle()  # a remoting SEND's put settles every unsettled append, the call's too
    stored = await call
    assert readable(store, 1, stored)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritableStore]]:
    config = StoreConfig.for_store(tmp_path / "served", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic(TOPIC, 4)
    timer = DeliveryTimer(store)
    srv = QueryServer(
        store.reader,
        ServerSettings(port=0, broker_name="b1", grpc_port=0),
        configure=write_path(store, timer=timer),
        grpc_writer=GrpcWriter(store, cluster="DefaultCluster", on_scheduled=timer.arm),
    )
    await srv.start()
    try:
        yield srv, store
    finally:
        await srv.stop()
        store.close()


async def test_concurrent_send_message_calls_are_each_readable_when_answered(
    server: tuple[QueryServer, WritableStore],
) -> None:
    srv, store = server
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        stub = service_grpc.MessagingServiceStub(channel)

        answered = 0

        async def send(i: int) -> bool:
            nonlocal answered
            request = send_request(TOPIC, body=b"c%d" % i, message_id=f"01CONC{i:022d}")
            answer = await stub.SendMessage(request, metadata=META, timeout=10)
            assert answer.status.code == Code.OK, answer.status
            answered += 1
            # the server runs in this loop: every call answered so far is in a consume queue
            return sum(store.reader.max_offset(TOPIC, q) for q in range(4)) >= answered

        seen = await asyncio.gather(*(send(i) for i in range(32)))
    assert all(seen)
    assert sum(store.reader.max_offset(TOPIC, q) for q in range(4)) == 32
