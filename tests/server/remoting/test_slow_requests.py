"""Slow senders can hold neither a connection nor every slot (issue 18, item 7).

Connections sending one byte a second stayed past ``--idle-timeout`` (each byte is traffic), so
10,000 of them held every slot and every real client got SYSTEM_BUSY for the whole attack. Now a
request must arrive whole within ``request_timeout`` of the read its first byte came in, and at the
connection limit the connection without a completed request for longest is evicted for the new one.
Small numbers: a 0.5 s deadline, a limit of 3 connections.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import encode_frame
from server.remoting.refusal import EVICTABLE_AFTER, IncompleteRequests
from tests.support.harness import RawClient, StartServer


def _max_offset() -> RemotingCommand:
    return RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicA", "queueId": "1"})


async def test_a_request_trickling_in_is_cut_off_at_its_deadline(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(request_timeout=0.5)
    slow = await RawClient.connect("127.0.0.1", server.port)
    try:
        frame = encode_frame(_max_offset())
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="server.remoting.connection"):
            for byte in range(len(frame) - 1):  # one byte per 0.05 s: never idle, never whole
                try:
                    await slow.send_bytes(frame[byte : byte + 1])
                except ConnectionError:
                    break
                await asyncio.sleep(0.05)
                if not server.connections:
                    break
            assert await slow.closed_by_server(timeout=5)
        assert time.monotonic() - started < 3
        assert "a request did not arrive whole within 0.5 s of its first byte" in caplog.text
    finally:
        await slow.close()


async def test_requests_that_keep_arriving_are_never_cut_off(start_server: StartServer) -> None:
    """Reads that end mid-frame for longer than the deadline, each frame finishing quickly: the
    deadline is per frame, from the read it began in."""
    server = await start_server(request_timeout=0.5)
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        requests = [_max_offset() for _ in range(15)]
        data = b"".join(encode_frame(r) for r in requests)
        step = len(data) // 30 + 1  # every read ends inside a frame
        for start in range(0, len(data), step):  # ~1.5 s in all
            await client.send_bytes(data[start : start + step])
            await asyncio.sleep(0.05)
        answers = [await client.receive() for _ in requests]
        assert [a.opaque for a in answers] == [r.opaque for r in requests]
        assert {a.code for a in answers} == {ResponseCode.SUCCESS}
    finally:
        await client.close()


async def test_at_the_limit_the_oldest_incomplete_connection_makes_room(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(max_connections=3, request_timeout=0)
    slow = [await RawClient.connect("127.0.0.1", server.port) for _ in range(3)]
    clients: list[RawClient] = []
    try:
        for client in slow:
            await client.send_bytes(b"\x00\x00")  # two bytes of a frame, then nothing
            await asyncio.sleep(0.05)
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)
        with caplog.at_level(logging.WARNING, logger="server.remoting.connection"):
            for expected_gone in (0, 1):
                client = await RawClient.connect("127.0.0.1", server.port)
                clients.append(client)
                answer = await client.call(_max_offset())
                assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {"offset": "498"})
                assert await slow[expected_gone].closed_by_server(timeout=5)  # the oldest first
        assert server.incomplete.evicted == 2
        assert "to make room" in caplog.text
        # An incomplete connection goes before any idle one: the next evicts slow[2], although the two
        # that completed a request have been idle longer.
        await asyncio.sleep(EVICTABLE_AFTER + 0.1)
        client = await RawClient.connect("127.0.0.1", server.port)
        clients.append(client)
        assert (await client.call(_max_offset())).code == ResponseCode.SUCCESS
        assert await slow[2].closed_by_server(timeout=5)
        assert (server.incomplete.evicted, server.idle.evicted) == (3, 0)
        # With none incomplete left, the connection idle the longest makes room (issue 31, item 4;
        # test_idle_eviction.py): clients[0], silent since its answer over a second ago.
        newest = await RawClient.connect("127.0.0.1", server.port)
        clients.append(newest)
        assert (await newest.call(_max_offset())).code == ResponseCode.SUCCESS
        assert await clients[0].closed_by_server(timeout=5)
        assert (server.incomplete.evicted, server.idle.evicted) == (3, 1)
    finally:
        for client in (*slow, *clients):
            await client.close()


class _Listed:
    def __init__(self) -> None:
        self.evicted_at: int | None = None

    def evict(self, limit: int) -> None:
        self.evicted_at = limit


def test_the_eviction_list_gives_the_oldest_once_it_is_old_enough() -> None:
    """Order is when each became incomplete (a new request moves a connection to the back), the
    oldest goes first, and nobody younger than the minimum age is evicted."""
    incomplete = IncompleteRequests()
    a, b, c = _Listed(), _Listed(), _Listed()
    incomplete.begin(a, 0.0)
    incomplete.begin(b, 1.0)
    incomplete.begin(c, 2.0)
    incomplete.begin(a, 3.0)  # a began another request: now the youngest
    incomplete.end(b)  # b completed its request
    assert incomplete.evict_oldest(2.5, 7, min_age=1.0) is None  # c is only 0.5 s old
    assert incomplete.evict_oldest(3.5, 7, min_age=1.0) is c
    assert (c.evicted_at, incomplete.evicted, len(incomplete)) == (7, 1, 1)
    assert incomplete.evict_oldest(4.0, 7, min_age=1.0) is a
    assert incomplete.evict_oldest(9.0, 7, min_age=1.0) is None
    assert b.evicted_at is None
