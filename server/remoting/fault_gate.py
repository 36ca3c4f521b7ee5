"""A broker connection's way to its dispatcher through the faults in force (``server.faults``).

The connection asks its dispatcher for the compiled request path, the stats and each dispatch;
this gate stands in for the dispatcher on the connections of a broker that can be made to fail.
While no request fault is on it hands the real dispatcher's answers through unchanged (the compiled
path included); while one is on the compiled path is not offered, so every request comes here:
``drop`` resets the connection instead of answering, ``busy`` answers SENDs and pulls SYSTEM_BUSY,
``delayMs`` answers after the delay (the request is processed then, as a broker whose queue held it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from server.faults import BUSY_REMARK, BrokerFaults
from server.remoting.dispatch import Dispatcher, FastPath
from server.request_stats import RequestStats

if TYPE_CHECKING:
    from server.remoting.connection import RemotingConnection


class FaultGate:
    """The dispatcher of one connection, as the faults in force let it answer."""

    __slots__ = ("_dispatcher", "_faults", "connection")

    def __init__(self, dispatcher: Dispatcher, faults: BrokerFaults) -> None:
        self._dispatcher = dispatcher
        self._faults = faults
        #: The connection served (set once it is made): ``drop`` resets it.
        self.connection: RemotingConnection | None = None

    @property
    def fast_path(self) -> FastPath | None:
        return None if self._faults.state.on_requests else self._dispatcher.fast_path

    @property
    def stats(self) -> RequestStats | None:
        return self._dispatcher.stats

    def dispatch(
        self, request: RemotingCommand, remote_host: str | None = None, peer: str | None = None
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        faults = self._faults
        state = faults.state
        if not state.on_requests:
            return self._dispatcher.dispatch(request, remote_host, peer)
        if faults.drop_now():
            if self.connection is not None:
                self.connection.reset()
            return None
        if faults.busy_now(request.code):
            return request.make_response(ResponseCode.SYSTEM_BUSY, remark=BUSY_REMARK)
        if state.delay_ms > 0:
            return self._delayed(request, remote_host, peer, state.delay_ms / 1000)
        return self._dispatcher.dispatch(request, remote_host, peer)

    async def _delayed(
        self, request: RemotingCommand, remote_host: str | None, peer: str | None, delay: float
    ) -> RemotingCommand | None:
        await asyncio.sleep(delay)
        result = self._dispatcher.dispatch(request, remote_host, peer)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return await result
