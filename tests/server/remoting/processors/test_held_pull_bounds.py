"""Held long-polling pulls are bounded per connection and in total (issue 18, item 4).

One connection pipelining suspend-flag PULLs used to get every one of them held (76.8k: RSS 70 ->
559 MB, other clients' queries 3-9 s). Now a pull past a bound is answered at once with the broker's
answer to a request its pull thread pool cannot take (SYSTEM_BUSY, ``[OVERLOAD]system busy, start
flow control for a while``), the slots come back when held pulls answer, and other clients are
served meanwhile. Small bounds set through the settings keep the test small.
"""

from __future__ import annotations

import asyncio

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.remoting.processors.pull_message import BUSY_REMARK
from tests.support.harness import RawClient, StartServer
from tests.support.pulls import pull_fields

PER_CONNECTION = 4
TOTAL = 6


def _held_pull() -> RemotingCommand:
    # TopicA queue 1 ends at 498 and the Java store does not grow: a suspended pull there is held.
    fields = {**pull_fields("TopicA", 1, 498, 32), "sysFlag": "6", "suspendTimeoutMillis": "600000"}
    return RawClient.request(RequestCode.PULL_MESSAGE, fields)


async def _answers(client: RawClient, count: int) -> list[RemotingCommand]:
    return [await client.receive(timeout=10) for _ in range(count)]


async def test_pulls_past_the_bounds_are_answered_system_busy_at_once(start_server: StartServer) -> None:
    server = await start_server(max_held_pulls=TOTAL, max_held_pulls_per_connection=PER_CONNECTION)
    first = await RawClient.connect("127.0.0.1", server.port)
    second = await RawClient.connect("127.0.0.1", server.port)
    witness = await RawClient.connect("127.0.0.1", server.port)
    try:
        # 20 pipelined on one connection: 4 held, 16 answered busy at once.
        await first.send(*(_held_pull() for _ in range(20)))
        busy = await _answers(first, 16)
        assert {(a.code, a.remark) for a in busy} == {(ResponseCode.SYSTEM_BUSY, BUSY_REMARK)}
        assert server.held_pulls.held == PER_CONNECTION
        # Another connection gets what is left of the total (2), the rest is busy.
        await second.send(*(_held_pull() for _ in range(5)))
        busy = await _answers(second, 3)
        assert {a.code for a in busy} == {ResponseCode.SYSTEM_BUSY}
        assert server.held_pulls.held == TOTAL
        assert server.held_pulls.refused == 19
        # Everyone else is still answered, and the held pulls count as in flight (backpressure).
        other = await witness.call(
            RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicA", "queueId": "1"})
        )
        assert other.ext_fields == {"offset": "498"}
        assert sorted(c.in_flight for c in server.connections) == [0, 2, 4]
        # A closed connection gives its slots back; a new pull is held again.
        await first.close()
        for _ in range(100):
            if server.held_pulls.held == 2:
                break
            await asyncio.sleep(0.02)
        assert server.held_pulls.held == 2
        await witness.send(_held_pull())
        for _ in range(100):
            if server.held_pulls.held == 3:
                break
            await asyncio.sleep(0.02)
        assert server.held_pulls.held == 3
        await server.stop()  # held pulls answer at once
        assert {a.code for a in await _answers(second, 2)} == {ResponseCode.PULL_NOT_FOUND}
        assert server.held_pulls.held == 0
    finally:
        for client in (first, second, witness):
            await client.close()
