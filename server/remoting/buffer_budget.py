"""One byte budget for the unfinished request frames of all connections together.

Each connection may hold one partial frame of up to the frame limit (16 MiB) while the rest of it
arrives, so without a shared bound, memory grows with connections × 16 MiB (40 connections each
sending 15 MiB of a frame and stopping held 601 MiB). Every connection reports how many bytes its
frame decoder holds after each read; when the total passes ``limit``, the connections holding the
most are closed, largest first, until the total is back within it.

Why those, and why closed: a query, a heartbeat or a route request is well under a kilobyte, so a
connection holding megabytes of an unfinished frame is either uploading something this server never
needs or deliberately holding memory; closing the largest holders frees the most memory with the
fewest victims, and leaves every ordinary client untouched. They are treated exactly like a frame
over the limit (``server.remoting.connection``): the requests they sent whole before are still answered,
nothing more is read, the partial frame is dropped at once and the connection is closed, with one
log line per burst. A request header is never partly decoded, so nothing half-done is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from server.burst_log import BurstLog

log = logging.getLogger(__name__)

#: Default budget: 64 MiB, four whole maximum-size frames, orders of magnitude above what the
#: query traffic this server answers ever holds unfinished.
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024


class Holder(Protocol):
    """A connection as the budget sees it."""

    @property
    def peer(self) -> str: ...

    def drop_partial_frame(self, reason: str) -> None: ...


class BufferBudget:
    """Bytes held in unfinished frames, per connection and in total, and the limit on the total."""

    __slots__ = ("_held", "_log", "limit", "total", "victims")

    def __init__(self, limit: int = DEFAULT_MAX_BUFFERED_BYTES) -> None:
        if limit < 1:
            raise ValueError(f"the buffered-bytes budget must be at least 1 byte, got {limit}")
        self.limit = limit
        self.total = 0
        #: Connections closed to stay within the budget (a counter, for tests and reports).
        self.victims = 0
        self._held: dict[Holder, int] = {}
        self._log = BurstLog(log)

    def held(self, holder: Holder) -> int:
        """Bytes ``holder`` was last reported to hold."""
        return self._held.get(holder, 0)

    def update(self, holder: Holder, held: int) -> None:
        """``holder`` now holds ``held`` bytes of an unfinished frame; enforce the limit."""
        before = self._held.get(holder, 0)
        if held == before:
            return
        if held:
            self._held[holder] = held
        else:
            del self._held[holder]
        self.total += held - before
        if self.total > self.limit:
            self._shed()

    def release(self, holder: Holder) -> None:
        """``holder`` is gone (or dropped its partial frame): it holds nothing any more."""
        self.total -= self._held.pop(holder, 0)

    def _shed(self) -> None:
        largest: Callable[[Holder], int] = self._held.__getitem__
        for holder in sorted(self._held, key=largest, reverse=True):
            if self.total <= self.limit:
                return
            held = self._held[holder]
            self.release(holder)
            self.victims += 1
            self._log.event(
                "closing connection from %s: it held %d bytes of an unfinished frame while unfinished "
                "frames of all connections passed the %d-byte budget",
                holder.peer,
                held,
                self.limit,
            )
            holder.drop_partial_frame("unfinished frames of all connections passed the buffered-bytes budget")
