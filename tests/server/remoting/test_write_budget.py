"""Answers a peer never reads are bounded per connection and in total (issue 18, item 8).

100 connections each asking a 12 MB query answer and never reading it took RSS from 80 MB to
1.28 GB. Here a peer with a 4 KiB receive buffer pipelines 300 PULLs (~32 KB answers each, coroutine
answers, which the high-water pause does not hold back) and reads nothing: without the budget ~6.5 MB
stay queued in its transport for as long as it likes. Now a connection past the per-connection limit
is cut off, and past the total the ones with the most queued are, largest first; a client that reads
its answers is never touched. Counted in the server's transport buffers, not RSS.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.app import QueryServer
from tests.support.harness import RawClient, StartServer
from tests.support.pulls import pull_fields

KIB = 1024
#: ~9.6 MB of answers, of which the kernel's loopback buffers take ~3 MB.
PULLS = 300


async def _non_reader(port: int) -> RawClient:
    """A client that reads nothing, with a small receive buffer so the kernel absorbs little."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    return RawClient(reader, writer)


def _pulls(count: int = PULLS) -> list[RemotingCommand]:
    fields = pull_fields("TopicA", 1, 0, 32)
    return [RawClient.request(RequestCode.PULL_MESSAGE, fields) for _ in range(count)]


def _queued(server: QueryServer) -> int:
    return sum(connection.write_buffer_size for connection in server.connections)


async def _until_answered(server: QueryServer) -> None:
    """Until the server has taken the pulls and answered them (or cut the connection off): nothing
    in flight and the queued bytes unchanged over several looks."""
    last, same = -1, 0
    for _ in range(300):
        await asyncio.sleep(0.02)
        now = _queued(server)
        busy = any(connection.in_flight for connection in server.connections)
        same = same + 1 if (now == last and not busy) else 0
        if same >= 10:
            return
        last = now


async def _witness_served(server: QueryServer) -> None:
    witness = await RawClient.connect("127.0.0.1", server.port)
    try:
        answer = await witness.call(
            RawClient.request(RequestCode.PULL_MESSAGE, pull_fields("TopicA", 1, 0, 32))
        )
        assert answer.code == ResponseCode.SUCCESS
    finally:
        await witness.close()


async def test_a_connection_past_its_queued_bytes_limit_is_cut_off(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    limit = 1024 * KIB
    server = await start_server(max_queued_bytes_per_connection=limit)
    hog = await _non_reader(server.port)
    try:
        with caplog.at_level(logging.WARNING, logger="server.remoting.write_budget"):
            await hog.send(*_pulls())
            await _until_answered(server)
            await asyncio.sleep(0.1)
        assert _queued(server) <= limit
        assert server.write_budget.victims == 1
        assert len(server.connections) == 0
        assert server.write_budget.total == 0
        assert "unread answers passed the 1048576-byte limit" in caplog.text
        await _witness_served(server)
    finally:
        await hog.close()


async def test_past_the_total_the_connections_with_the_most_queued_are_cut_off(
    start_server: StartServer,
) -> None:
    total = 8 * 1024 * KIB
    server = await start_server(max_queued_bytes=total)
    hogs = [await _non_reader(server.port) for _ in range(3)]
    reader = await RawClient.connect("127.0.0.1", server.port)
    try:
        for hog in hogs:
            await hog.send(*_pulls())
            await _until_answered(server)
            assert _queued(server) <= total
            # A client that reads its answers is served throughout and never cut off.
            answers = await reader.ask_all(_pulls(20))
            assert {a.code for a in answers} == {ResponseCode.SUCCESS}
        assert server.write_budget.victims >= 1
        assert reader_is_open(server)
        assert server.write_budget.total == sum(server.write_budget.queued(c) for c in server.connections)
    finally:
        for client in (*hogs, reader):
            await client.close()


def reader_is_open(server: QueryServer) -> bool:
    return any(
        connection.write_buffer_size == 0 and not connection.writing_paused
        for connection in server.connections
    )
