"""Two ``serve --writable`` servers fed the same reads, one with the compiled request path and one
without it (the reference): the harness of the compiled path's differential tests on writable
stores (``test_request_path_pull.py``, ``test_request_path_send.py``).

A feed's bytes are its answers in the order written, then the requests the broker sent on its own
(a heartbeat's NOTIFY_CONSUMER_IDS_CHANGED, ``ConsumerIdsNotifier``: told ``NOTIFY_DELAY`` after
the change). That request comes from a timer of its own, not from the request path: whether it came
before the connection closed, and where among the answers of held pulls (another timer), depended
on how fast the loop ran, so under CPU load one side had it and the other not. The feed waits for it
as it waits for the held pulls, and keeps it after the answers: both are compared, exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from protocol.frame import decode_frames
from server.app import QueryServer
from server.broker.writable_store import WritableStore
from server.remoting import request_path
from server.remoting.connection import RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.refusal import IncompleteRequests
from server.remoting.request_path import RequestPath
from server.remoting.write_path import WritePath
from tests.support.request_path import CountingPath, Recorder


class WritableSide:
    """One writable server (not listening to anyone but the test), fed reads on a fresh connection."""

    def __init__(self, server: QueryServer, store: WritableStore, hook: WritePath) -> None:
        self.server, self.store, self.hook = server, store, hook

    @property
    def dispatcher(self) -> Dispatcher:
        assert self.server.dispatcher is not None
        return self.server.dispatcher

    def use_compiled_path(self, compiled: bool) -> None:
        """Drop the compiled path (the reference), or count what it answers (``answered``)."""
        dispatcher = self.dispatcher
        if not compiled:
            dispatcher.fast_path = None
        elif dispatcher.fast_path is not None:
            dispatcher.fast_path = CountingPath(dispatcher.fast_path)

    @property
    def answered(self) -> int:
        """How many requests the compiled path answered (0 without it)."""
        path = self.dispatcher.fast_path
        return path.answered if isinstance(path, CountingPath) else 0

    async def feed(self, reads: list[bytes], settle_s: float = 0.5) -> tuple[bytes, list[str]]:
        """The bytes written (the answers, then the broker's own requests: ``broker_requests_last``)
        and the transport's other calls, after ``reads`` and up to ``settle_s`` for the answers that
        come from tasks (a held pull, a SEND that created its topic) and for the group changes the
        notifier has still to tell (a heartbeat's)."""
        # a loop iteration of its own, as a client's read is: the server's per-iteration heartbeat
        # budget (server.loop_budget) would otherwise be spent by the heartbeats of earlier feeds
        # run back to back without a yield, and this one's answered later, in a task
        await asyncio.sleep(0)
        transport = Recorder()
        connection = RemotingConnection(self.dispatcher, idle_timeout=0, incomplete=IncompleteRequests())
        transport.protocol = connection
        connection.connection_made(transport)  # type: ignore[arg-type]
        for data in reads:
            connection.data_received(data)
        for _ in range(int(settle_s / 0.01)):
            if not connection.in_flight and not self.hook.notifier.waiting:
                break
            await asyncio.sleep(0.01)
        connection.connection_lost(None)
        return broker_requests_last(bytes(transport.data)), transport.calls

    async def stop(self) -> None:
        await self.server.stop()
        self.store.close()


def broker_requests_last(data: bytes) -> bytes:
    """``data``'s frames with the requests the broker sent (not answers) moved after the answers,
    each kind in its order; the bytes of every frame as written."""
    commands, end = decode_frames(data, len(data) + 1, len(data) + 1)
    assert end == len(data), "a frame written in part"
    answers, requests, at = [], [], 0
    for command in commands:
        size = 4 + int.from_bytes(data[at : at + 4], "big")
        (answers if command.is_response else requests).append(data[at : at + size])
        at += size
    return b"".join(answers + requests)


def _diff(mine: object, theirs: object) -> object:
    """What differs between two parts of a side's state: for dicts, the keys whose values differ."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return {
            k: (mine.get(k), theirs.get(k))
            for k in mine.keys() | theirs.keys()
            if mine.get(k) != theirs.get(k)
        }
    return mine, theirs


async def same_both_ways(
    fast: WritableSide, reference: WritableSide, reads: list[bytes], state: Callable[[Any], object]
) -> bytes:
    """Feed ``reads`` to both sides: the bytes written, the transport's calls and ``state(side)``
    (what the side stored or counted) must be the same; the bytes are returned."""
    got = await fast.feed(reads)
    expected = await reference.feed(reads)
    assert got[1] == expected[1]
    if got[0] != expected[0]:
        mine, theirs = (decode_frames(d, len(d) + 1, len(d) + 1)[0] for d in (got[0], expected[0]))
        raise AssertionError(f"the answers differ (compiled, reference): {mine!r:.3000} {theirs!r:.3000}")
    mine, theirs = state(fast), state(reference)
    if mine != theirs:
        parts = [mine, theirs]
        if isinstance(mine, tuple) and isinstance(theirs, tuple) and len(mine) == len(theirs):
            parts = [(i, _diff(a, b)) for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
        raise AssertionError(f"the sides' state differs (index, compiled, reference): {parts!r:.3000}")
    return got[0]


def takes_code(side: WritableSide, code: int) -> None:
    """The side's compiled path (when built) answers ``code``, and is the ``RequestPath``."""
    path = side.dispatcher.fast_path
    assert (path is not None) == request_path.COMPILED
    if path is not None:
        assert code in path.codes
        assert isinstance(path.inner, RequestPath)  # type: ignore[attr-defined]
