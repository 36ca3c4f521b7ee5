"""Bytes of answers queued for writing and not yet taken by the peers: bounded per connection and in
total.

When a peer stops reading, its transport stops taking our writes and we stop reading from it and
answering it (``PEER_NOT_READING`` in ``protocol.connection_state``). That bounds what ordinary
answers queue, but not what one answer or the coroutine processors' answers bring: 100 connections
each asking a 12 MB query answer and never reading it held 1.2 GB of answers (RSS 80 MB -> 1.28 GB).
Every connection reports its transport's queued bytes after each write and when the peer drains
(``resume_writing``); a connection past ``per_connection`` is cut off, and when the total passes
``total`` the connections with the most queued are cut off, largest first, until it fits
(``server.remoting.byte_budget``, shared with the unfinished frames' budget).

Why cut off (abort), not close: what is queued is what the peer is not reading, so a close could
never flush it and would keep the memory; and why the largest: they free the most with the fewest
victims, while a client reading its answers keeps a queue near zero and is never one of them. One log
line per burst (``server.burst_log``).
"""

from __future__ import annotations

import logging
from typing import Protocol

from server.remoting.byte_budget import ByteBudget

log = logging.getLogger(__name__)

MIB = 1024 * 1024

#: Default per connection: four answers of the largest frame (16 MiB), far above what a reading
#: client ever has queued.
DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION = 64 * MIB

#: Default for all connections together.
DEFAULT_MAX_QUEUED_BYTES = 256 * MIB


class Queuer(Protocol):
    """A connection as the budget sees it."""

    @property
    def peer(self) -> str: ...

    def cut_off(self, reason: str) -> None: ...


class WriteBudget(ByteBudget[Queuer]):
    """Bytes queued for writing per connection and in total, and the limits on both."""

    __slots__ = ()

    def __init__(
        self,
        total_limit: int = DEFAULT_MAX_QUEUED_BYTES,
        per_connection: int = DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION,
    ) -> None:
        if total_limit < 1 or per_connection < 1:
            raise ValueError(
                f"queued-bytes limits must be at least 1 byte, got {total_limit}, {per_connection}"
            )
        super().__init__(total_limit, per_connection, log)

    @property
    def total_limit(self) -> int:
        """The limit on the answers queued for all connections together."""
        return self.limit

    @property
    def per_connection(self) -> int:
        """One connection's limit."""
        return self.per_holder  # type: ignore[return-value]

    def queued(self, queuer: Queuer) -> int:
        """Bytes ``queuer`` was last reported to have queued."""
        return self.held(queuer)

    def _evict(self, queuer: Queuer, count: int, over_total: bool) -> None:
        if over_total:
            why = (
                f"it had {count} bytes of unread answers while the answers queued for all "
                f"connections passed the {self.limit}-byte limit"
            )
        else:
            why = f"its {count} bytes of unread answers passed the {self.per_holder}-byte limit"
        self._log.event("cutting off connection from %s: %s", queuer.peer, why)
        queuer.cut_off(why)
