"""One byte budget for the unfinished request frames of all connections together.

Each connection may hold one partial frame of up to the frame limit (16 MiB) while the rest of it
arrives, so without a shared bound, memory grows with connections × 16 MiB (40 connections each
sending 15 MiB of a frame and stopping held 601 MiB). Every connection reports how many bytes its
frame decoder holds after each read; when the total passes ``limit``, the connections holding the
most are closed, largest first, until the total is back within it (``server.remoting.byte_budget``).

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
from typing import Protocol

from server.remoting.byte_budget import ByteBudget

log = logging.getLogger(__name__)

#: Default budget: 64 MiB, four whole maximum-size frames, orders of magnitude above what the
#: query traffic this server answers ever holds unfinished.
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024


class Holder(Protocol):
    """A connection as the budget sees it."""

    @property
    def peer(self) -> str: ...

    def drop_partial_frame(self, reason: str) -> None: ...


class BufferBudget(ByteBudget[Holder]):
    """Bytes held in unfinished frames, per connection and in total, and the limit on the total."""

    __slots__ = ()

    def __init__(self, limit: int = DEFAULT_MAX_BUFFERED_BYTES) -> None:
        if limit < 1:
            raise ValueError(f"the buffered-bytes budget must be at least 1 byte, got {limit}")
        super().__init__(limit, None, log)

    def _evict(self, holder: Holder, count: int, over_total: bool) -> None:
        self._log.event(
            "closing connection from %s: it held %d bytes of an unfinished frame while unfinished "
            "frames of all connections passed the %d-byte budget",
            holder.peer,
            count,
            self.limit,
        )
        holder.drop_partial_frame("unfinished frames of all connections passed the buffered-bytes budget")
