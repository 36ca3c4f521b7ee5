"""Bytes of answers queued for writing and not yet taken by the peers: bounded per connection and in
total.

When a peer stops reading, its transport stops taking our writes and we stop reading from it and
answering it (``PEER_NOT_READING`` in ``protocol.connection_state``). That bounds what ordinary
answers queue, but not what one answer or the coroutine processors' answers bring: 100 connections
each asking a 12 MB query answer and never reading it held 1.2 GB of answers (RSS 80 MB -> 1.28 GB).
Every connection reports its transport's queued bytes after each write and when the peer drains
(``resume_writing``); a connection past ``per_connection`` is cut off, and when the total passes
``total`` the connections with the most queued are cut off, largest first, until it fits.

Why cut off (abort), not close: what is queued is what the peer is not reading, so a close could
never flush it and would keep the memory; and why the largest: they free the most with the fewest
victims, while a client reading its answers keeps a queue near zero and is never one of them. One log
line per burst (``server.burst_log``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from server.burst_log import BurstLog

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


class WriteBudget:
    """Bytes queued for writing per connection and in total, and the limits on both."""

    __slots__ = ("_log", "_queued", "per_connection", "total", "total_limit", "victims")

    def __init__(
        self,
        total_limit: int = DEFAULT_MAX_QUEUED_BYTES,
        per_connection: int = DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION,
    ) -> None:
        if total_limit < 1 or per_connection < 1:
            raise ValueError(
                f"queued-bytes limits must be at least 1 byte, got {total_limit}, {per_connection}"
            )
        self.total_limit = total_limit
        self.per_connection = per_connection
        self.total = 0
        #: Connections cut off to stay within the limits (a counter, for tests and reports).
        self.victims = 0
        self._queued: dict[Queuer, int] = {}
        self._log = BurstLog(log)

    def queued(self, queuer: Queuer) -> int:
        """Bytes ``queuer`` was last reported to have queued."""
        return self._queued.get(queuer, 0)

    def update(self, queuer: Queuer, queued: int) -> None:
        """``queuer``'s transport now holds ``queued`` bytes of answers; enforce the limits."""
        before = self._queued.get(queuer, 0)
        if queued == before:
            return
        if queued:
            self._queued[queuer] = queued
        else:
            del self._queued[queuer]
        self.total += queued - before
        if queued > self.per_connection:
            self._cut(
                queuer, f"its {queued} bytes of unread answers passed the {self.per_connection}-byte limit"
            )
        if self.total > self.total_limit:
            self._shed()

    def release(self, queuer: Queuer) -> None:
        """``queuer`` is gone: nothing of it is queued any more."""
        self.total -= self._queued.pop(queuer, 0)

    def _cut(self, queuer: Queuer, why: str) -> None:
        self.release(queuer)
        self.victims += 1
        self._log.event("cutting off connection from %s: %s", queuer.peer, why)
        queuer.cut_off(why)

    def _shed(self) -> None:
        largest: Callable[[Queuer], int] = self._queued.__getitem__
        for queuer in sorted(self._queued, key=largest, reverse=True):
            if self.total <= self.total_limit:
                return
            self._cut(
                queuer,
                f"it had {self._queued[queuer]} bytes of unread answers while the answers queued for all "
                f"connections passed the {self.total_limit}-byte limit",
            )
