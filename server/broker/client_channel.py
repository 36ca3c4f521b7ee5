"""What the broker knows of a client connection: the ``Channel`` it talks through, and who is on it.

The broker's managers (consumer groups, producer groups, rebalance locks) key their tables by the
client's channel, as the Java broker keys them by Netty's ``Channel``: a heartbeat registers the
client on the channel it arrived on, closing the channel unregisters it everywhere, and the broker
calls back over it (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...). The front door
(``server.remoting.channel``; the gRPC one later) implements ``Channel``; these rules only use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from protocol.command import RemotingCommand


class Channel(Protocol):
    """One client connection as the broker's rules see it."""

    #: Unique for the server's life: tables key by it.
    id: int
    #: ``ip:port`` of the client (``RemotingHelper.parseChannelRemoteAddr``).
    client_address: str

    @property
    def active(self) -> bool:
        """Whether the connection is still open."""
        ...

    def send_oneway(self, request: RemotingCommand) -> None:
        """Send a request expecting no answer (dropped if the connection cannot take it)."""
        ...

    def invoke(self, request: RemotingCommand, timeout: float) -> Awaitable[RemotingCommand]:
        """Send a request and wait for its answer; ``TimeoutError`` or ``ConnectionError`` else."""
        ...

    def close(self) -> None:
        """Close the connection (its close callbacks then run)."""
        ...

    def on_close(self, callback: Callable[[Channel], None]) -> None:
        """Call ``callback(channel)`` once when the connection closes (at once if it is closed)."""
        ...


@dataclass(slots=True)
class ClientChannelInfo:
    """``ClientChannelInfo``: a client on a channel, as its last heartbeat described it."""

    channel: Channel
    client_id: str
    #: ``LanguageCode`` name of the request that registered it (``JAVA``, ``GO``, ...).
    language: str
    version: int
    last_update_ms: int
