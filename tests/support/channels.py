"""A ``server.broker.client_channel.Channel`` with no socket, for the broker's sans-IO rules."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from protocol.command import RemotingCommand

_ids = itertools.count(1_000_000)


class FakeChannel:
    """Records what the broker sends it; ``close()`` runs the close callbacks as a real one does."""

    def __init__(self, client_address: str = "127.0.0.1:1") -> None:
        self.id = next(_ids)
        self.client_address = client_address
        self.active = True
        self.oneway: list[RemotingCommand] = []
        self.closed_by_broker = False
        self._callbacks: list[Callable[[FakeChannel], None]] = []

    def send_oneway(self, request: RemotingCommand) -> None:
        self.oneway.append(request)

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        raise ConnectionError("a FakeChannel answers nothing")

    def close(self) -> None:
        self.closed_by_broker = True
        self.lose()

    def lose(self) -> None:
        """The connection went away: callbacks run once."""
        if not self.active:
            return
        self.active = False
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def on_close(self, callback: Callable[[FakeChannel], None]) -> None:
        if self.active:
            self._callbacks.append(callback)
        else:
            callback(self)
