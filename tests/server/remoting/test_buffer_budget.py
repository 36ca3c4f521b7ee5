"""The shared budget for unfinished frames: memory held by partial frames stays bounded in total.

Ten connections each send 1 MiB of a 3 MiB frame and stop, under a 4 MiB budget: without it the
server would hold 10 MiB (each connection alone is within the 16 MiB frame limit); with it, the
connections holding the most are closed, like a frame over the limit, until the total fits. Counted
in bytes the decoders hold (``RemotingConnection.buffered_bytes``), not in RSS.
"""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import encode_frame
from server.app import QueryServer
from server.remoting.buffer_budget import BufferBudget
from tests.support.harness import RawClient, StartServer

MIB = 1024 * 1024
BUDGET = 4 * MIB
HOLDERS = 10
CHUNK = 64 * 1024


def _partial_frame(declared: int = 3 * MIB, sent: int = MIB) -> bytes:
    """The first ``sent`` bytes of a JSON frame declaring ``declared`` bytes (header length 100)."""
    return struct.pack(">ii", declared, 100) + b"x" * (sent - 8)


def _view() -> object:
    return RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"})


def _held_by_connections(server: QueryServer) -> int:
    return sum(connection.buffered_bytes for connection in server.connections)


async def _settled(server: QueryServer) -> None:
    """Until the server has read what was sent (the held total stops changing)."""
    last = -1
    while (now := _held_by_connections(server)) != last:
        last = now
        await asyncio.sleep(0.05)


async def test_partial_frames_of_all_connections_stay_within_the_budget(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(max_buffered_bytes=BUDGET)
    witness = await RawClient.connect("127.0.0.1", server.port)
    holders = [await RawClient.connect("127.0.0.1", server.port) for _ in range(HOLDERS)]
    peak = 0
    try:
        with caplog.at_level(logging.WARNING, logger="server.remoting.buffer_budget"):
            for client in holders:
                request = _view()
                data = encode_frame(request) + _partial_frame()  # type: ignore[arg-type]
                for start in range(0, len(data), CHUNK):
                    try:
                        await client.send_bytes(data[start : start + CHUNK])
                    except ConnectionError:
                        break  # closed for the budget already
                    await asyncio.sleep(0)
                    peak = max(peak, _held_by_connections(server))
                await _settled(server)
                peak = max(peak, _held_by_connections(server))
                assert server.buffer_budget.total == _held_by_connections(server)
                # The witness is served throughout, also with a frame that arrives in two pieces.
                frame = encode_frame(_view())  # type: ignore[arg-type]
                await witness.send_bytes(frame[:10])
                await asyncio.sleep(0.01)
                await witness.send_bytes(frame[10:])
                assert (await witness.receive()).code == ResponseCode.SUCCESS
        assert peak <= BUDGET + CHUNK, peak  # one read past the budget at most, before shedding
        assert _held_by_connections(server) <= BUDGET
        victims = server.buffer_budget.victims
        assert victims >= HOLDERS - BUDGET // MIB
        closed = 0
        for client in holders:
            # The request sent whole before the partial frame is answered, closed or not.
            assert (await client.receive()).code == ResponseCode.SUCCESS
            try:
                await asyncio.wait_for(client.reader.read(1), 0.2)
                closed += client.reader.at_eof()
            except TimeoutError:
                pass
        assert closed == victims
        lines = [r for r in caplog.records if r.name == "server.remoting.buffer_budget"]
        assert len(lines) == 1 and "budget" in lines[0].getMessage()  # one line per burst
    finally:
        for client in [witness, *holders]:
            await client.close()


class _Holder:
    def __init__(self, name: str) -> None:
        self.peer = name
        self.dropped = False

    def drop_partial_frame(self, reason: str) -> None:
        self.dropped = True


def test_the_largest_holders_are_shed_first_until_the_total_fits() -> None:
    budget = BufferBudget(100)
    small, middle, large = _Holder("small"), _Holder("middle"), _Holder("large")
    budget.update(small, 10)
    budget.update(large, 60)
    budget.update(middle, 25)
    assert budget.total == 95 and not large.dropped
    budget.update(small, 20)  # 105 > 100: the largest goes, and that is enough
    assert (large.dropped, middle.dropped, small.dropped) == (True, False, False)
    assert budget.total == 45 and budget.held(large) == 0
    budget.update(middle, 0)
    budget.release(small)
    assert budget.total == 0


async def test_requests_in_the_same_read_as_the_frame_that_breaks_the_budget_are_answered_first(
    start_server: StartServer,
) -> None:
    server = await start_server(max_buffered_bytes=1000)
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        requests = [_view(), _view()]
        # One small write: the two whole requests and 2000 bytes of a frame arrive in one read.
        await client.send_bytes(b"".join(encode_frame(r) for r in requests) + _partial_frame(3 * MIB, 2000))  # type: ignore[arg-type]
        for request in requests:
            answer = await client.receive()
            assert (answer.code, answer.opaque) == (ResponseCode.SUCCESS, request.opaque)  # type: ignore[attr-defined]
        assert await client.closed_by_server()
        assert server.buffer_budget.victims == 1 and server.buffer_budget.total == 0
    finally:
        await client.close()
