"""At the connection limit the connection idle the longest makes room, never a live client's (issue 31,
item 4).

The attack: connections that each made one request and then stay silent fill ``--max-connections``,
and every fresh client got SYSTEM_BUSY for the whole idle timeout (120 s). Now a fresh client is
served and the silent connection idle the longest is closed, one per fresh client, said in the log
and in ``/metrics``; connections whose client heart-beat (a producer's or consumer's, registered in
its group under ``--writable``) are kept however quiet, and with only those left a fresh client is
refused as before. The order itself (``IdleConnections``) is checked on its own too: O(1) per step,
at most ``MAX_LOOK`` steps per new connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.connection import RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.refusal import EVICTABLE_AFTER, MAX_LOOK, IdleConnections
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient, StartServer
from tests.support.pulls import heartbeat
from tests.support.request_path import Recorder, frame


def max_offset() -> RemotingCommand:
    return RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicA", "queueId": "0"})


async def silent_after_one_request(port: int, count: int) -> list[RawClient]:
    """``count`` connections that each make one request and then say nothing more."""
    clients = [await RawClient.connect("127.0.0.1", port) for _ in range(count)]
    for client in clients:
        assert (await client.call(max_offset())).code == ResponseCode.SUCCESS
        await asyncio.sleep(0.02)  # a distinct last activity each: the first is the idlest
    return clients


def evicted_metric(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rmq_query_connections_evicted_total":
                found[sample.labels["reason"]] = sample.value
            elif sample.name == "rmq_query_connections_refused_total":
                found["refused"] = sample.value
    return found


async def test_silent_connections_make_room_for_fresh_clients_one_each(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(max_connections=4, http_port=0)
    silent = await silent_after_one_request(server.port, 4)
    fresh: list[RawClient] = []
    try:
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)
        with caplog.at_level(logging.WARNING, logger="server.remoting.connection"):
            for gone in (0, 1):
                client = await RawClient.connect("127.0.0.1", server.port)
                fresh.append(client)
                assert (await client.call(max_offset())).code == ResponseCode.SUCCESS
                assert await silent[gone].closed_by_server(timeout=5)  # the idlest, and only it
        assert "not a heart-beating client's, to make room" in caplog.text
        for client in silent[2:]:
            assert (await client.call(max_offset())).code == ResponseCode.SUCCESS
        assert (server.idle.evicted, server.incomplete.evicted, server.refuser.refused) == (2, 0, 0)
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            async with session.get("/metrics") as response:
                metrics = evicted_metric(await response.text())
        assert metrics == {"idle": 2.0, "incomplete": 0.0, "refused": 0.0}
    finally:
        for client in (*silent, *fresh):
            await client.close()


async def test_nobody_idle_long_enough_means_refused_as_before(start_server: StartServer) -> None:
    server = await start_server(max_connections=2)
    served = await silent_after_one_request(server.port, 2)  # idle for milliseconds only
    extra = await RawClient.connect("127.0.0.1", server.port)
    try:
        assert (await extra.call(max_offset())).code == ResponseCode.SYSTEM_BUSY
        for client in served:
            assert (await client.call(max_offset())).code == ResponseCode.SUCCESS
        assert (server.idle.evicted, server.refuser.refused) == (0, 1)
    finally:
        for client in (*served, extra):
            await client.close()


async def test_heart_beating_clients_are_kept_on_a_read_only_server(start_server: StartServer) -> None:
    """More heart-beating clients than ``MAX_LOOK``, all idler than the one silent connection: they
    are out of the order, so the silent one is found at once; then nobody can go."""
    beating = MAX_LOOK + 2
    server = await start_server(max_connections=beating + 1)
    clients = [await RawClient.connect("127.0.0.1", server.port) for _ in range(beating)]
    extra: list[RawClient] = []
    try:
        for i, client in enumerate(clients):
            beat = RawClient.request(RequestCode.HEART_BEAT, None, heartbeat(f"c{i}", "G", {"TopicA": "*"}))
            assert (await client.call(beat)).code == ResponseCode.SUCCESS
        (silent,) = await silent_after_one_request(server.port, 1)
        extra.append(silent)
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)
        fresh = await RawClient.connect("127.0.0.1", server.port)
        extra.append(fresh)
        assert (await fresh.call(max_offset())).code == ResponseCode.SUCCESS
        assert await silent.closed_by_server(timeout=5)
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)  # fresh, idle a second now, is the only evictable one
        second = await RawClient.connect("127.0.0.1", server.port)
        extra.append(second)
        assert (await second.call(max_offset())).code == ResponseCode.SUCCESS
        assert await fresh.closed_by_server(timeout=5)
        # Now only second (too recent) and the heart-beating ones: the next is refused.
        last = await RawClient.connect("127.0.0.1", server.port)
        extra.append(last)
        assert (await last.call(max_offset())).code == ResponseCode.SYSTEM_BUSY
        for client in clients:
            assert (await client.call(max_offset())).code == ResponseCode.SUCCESS
        assert (server.idle.evicted, server.refuser.refused) == (2, 1)
    finally:
        for client in (*clients, *extra):
            await client.close()


@pytest.fixture
async def writable(tmp_path: Path) -> AsyncIterator[QueryServer]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic("T", 4)
    srv = QueryServer(
        store.reader, ServerSettings(port=0, broker_name="b1", max_connections=4), configure=write_path(store)
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()
        store.close()


async def test_registered_consumers_are_never_evicted_silent_connections_are(writable: QueryServer) -> None:
    server = writable
    consumers = [await RawClient.connect("127.0.0.1", server.port) for _ in range(3)]
    silent = await RawClient.connect("127.0.0.1", server.port)  # the newest, so not the idlest by order
    others: list[RawClient] = []
    try:
        for i, consumer in enumerate(consumers):
            beat = RawClient.request(RequestCode.HEART_BEAT, None, heartbeat(f"c{i}", "G", {"T": "*"}))
            assert (await consumer.call(beat)).code == ResponseCode.SUCCESS
        topics = RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert (await silent.call(topics)).code == ResponseCode.SUCCESS
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)
        fresh = await RawClient.connect("127.0.0.1", server.port)
        others.append(fresh)
        assert (await fresh.call(topics)).code == ResponseCode.SUCCESS
        assert await silent.closed_by_server(timeout=5)
        refused = await RawClient.connect("127.0.0.1", server.port)
        others.append(refused)
        assert (await refused.call(topics)).code == ResponseCode.SYSTEM_BUSY  # fresh is too recent
        listing = RawClient.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        answer = await consumers[0].call(listing)
        assert answer.code == ResponseCode.SUCCESS
        assert sorted(json.loads(bytes(answer.body or b""))["consumerIdList"]) == ["c0", "c1", "c2"]
        assert (server.idle.evicted, server.refuser.refused) == (1, 1)
    finally:
        for client in (*consumers, silent, *others):
            await client.close()


# -- the order on its own --------------------------------------------------------------------------


class _Conn:
    def __init__(self, name: str, last: float, *, live: bool = False, busy: bool = False) -> None:
        self.name = name
        self.last_activity = last
        self.live = live
        self.busy = busy
        self.evicted: tuple[int, float] | None = None

    def evictable(self, now: float, live_window: float) -> bool | None:
        return None if self.live else not self.busy

    def evict_idle(self, limit: int, idle_for: float) -> None:
        self.evicted = (limit, idle_for)

    def __repr__(self) -> str:
        return self.name


def test_the_idlest_goes_skipping_live_and_busy_ones_within_a_bounded_look() -> None:
    idle = IdleConnections()
    live = _Conn("live", 0.0, live=True)
    busy = _Conn("busy", 1.0, busy=True)
    quiet = _Conn("quiet", 2.0)
    recent = _Conn("recent", 9.5)
    for conn in (live, busy, quiet, recent):
        idle.touch(conn)
    assert idle.evict_idlest(10.0, 7, min_idle=1.0) is quiet
    assert quiet.evicted == (7, 8.0) and idle.evicted == 1
    assert len(idle) == 2  # the live one left the order, quiet was evicted; busy went to the back
    assert idle.evict_idlest(10.0, 7, min_idle=1.0) is None  # busy, and recent only 0.5 s idle
    assert idle.evicted == 1 and recent.evicted is None and busy.evicted is None
    live.live = False
    idle.touch(live)  # its next read: back in the order, at the end
    live.last_activity = 5.0
    assert idle.evict_idlest(10.0, 7, min_idle=1.0) is live
    idle.remove(recent)
    idle.remove(recent)  # twice is harmless
    assert len(idle) == 1


def test_a_front_of_live_clients_is_looked_at_max_look_at_a_time() -> None:
    idle = IdleConnections()
    lives = [_Conn(f"live{i}", float(i), live=True) for i in range(MAX_LOOK + 3)]
    quiet = _Conn("quiet", 100.0)
    for conn in (*lives, quiet):
        idle.touch(conn)
    assert idle.evict_idlest(200.0, 1) is None  # MAX_LOOK steps taken, all on live clients
    assert len(idle) == 4
    assert idle.evict_idlest(200.0, 1) is quiet  # the next new connection looks further


async def test_each_read_puts_its_connection_at_the_back_of_the_order() -> None:
    """A read moves its connection behind every other, the order ``evict_idlest`` looks at first:
    ``first``, accepted first, reads after ``second``, so ``second`` is the idlest and goes, and
    ``first`` stays (the read path takes a connection already in the order without ``touch``'s
    call; one not in it, after its heartbeats stopped, is added back)."""
    idle = IdleConnections()
    connections = [RemotingConnection(Dispatcher(), idle_timeout=0, idle=idle) for _ in range(3)]
    transports = [Recorder() for _ in connections]
    for connection, transport in zip(connections, transports, strict=True):
        connection.connection_made(transport)  # type: ignore[arg-type]
    first, second, third = connections
    idle.remove(third)  # as a heartbeat takes a live client's connection out
    unknown = frame('{"code":9999,"flag":0,"opaque":1}')  # answered at once: not supported
    first.data_received(unknown)
    third.data_received(unknown)  # its client went quiet: back in the order, at the end
    assert len(transports[0].data) > 0 and len(transports[2].data) > 0
    later = asyncio.get_running_loop().time() + 10 * EVICTABLE_AFTER
    assert idle.evict_idlest(later, 3) is second
    assert idle.evict_idlest(later, 3) is first
    assert idle.evict_idlest(later, 3) is third
