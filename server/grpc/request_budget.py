"""The bytes of gRPC requests in flight, per connection and in total, with the calls waiting for room.

grpcio reads a unary call's whole message before a handler sees it, and does not say how long the
message is until it has it. So a call is given room before its message is read (``admission``):
``reserve`` bytes, the largest message grpc accepts, held while the message arrives; once read, the
reservation becomes the message's own size, held until the call ends. A call that finds no room
(the total, or its own connection's share) waits its turn, first come first served, for at most
``wait`` seconds; it is refused past that, or at once when ``max_waiting`` calls already wait. A
waiting call holds no message: with the transport's bandwidth probe off (``server.grpc.server``)
grpc takes no more of a stream's bytes than its flow-control window until the message is asked for.

So the messages of all calls together never exceed ``limit`` bytes, nor one connection's
``per_connection``, whatever the number of calls, connections or their sizes, and a burst of small
calls only waits a loop turn or two for the reads ahead of it. It is the remoting port's
``ByteBudget`` (``server.remoting.byte_budget``) made for grpc: there a holder's bytes are seen as
they arrive and the largest is evicted; here nothing is seen before the message is whole, so room is
asked before, and refused, rather than taken back after.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from server.burst_log import BurstLog
from server.grpc.defaults import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION

log = logging.getLogger(__name__)

#: Seconds a call may wait for room before RESOURCE_EXHAUSTED.
DEFAULT_ADMISSION_WAIT = 2.0
#: Calls that may wait for room at once; one more is refused at once.
DEFAULT_MAX_WAITING = 1024


class Hold:
    """The bytes one call holds in the budget."""

    __slots__ = ("connection", "held")

    def __init__(self, connection: str, held: int) -> None:
        self.connection = connection
        self.held = held


class RequestBudget:
    """Room for request messages: ``admit`` before a message is read, ``settle`` and ``release``."""

    def __init__(
        self,
        *,
        reserve: int,
        limit: int = DEFAULT_MAX_REQUEST_BYTES,
        per_connection: int = DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
        wait: float = DEFAULT_ADMISSION_WAIT,
        max_waiting: int = DEFAULT_MAX_WAITING,
    ) -> None:
        if not 0 < reserve <= per_connection <= limit:
            raise ValueError(
                f"the gRPC request budget needs 0 < one message ({reserve}) <= a connection's share "
                f"({per_connection}) <= the total ({limit})"
            )
        self.reserve = reserve
        self.limit = limit
        self.per_connection = per_connection
        self.wait = wait
        self.max_waiting = max_waiting
        #: Bytes held by all calls now.
        self.total = 0
        #: Calls refused for want of room (a counter, for tests and reports).
        self.refused = 0
        self._by_connection: dict[str, int] = {}
        self._waiting: deque[tuple[str, asyncio.Future[None]]] = deque()
        self._refusals = BurstLog(log)

    def held(self, connection: str) -> int:
        """Bytes the calls of ``connection`` hold now."""
        return self._by_connection.get(connection, 0)

    @property
    def waiting(self) -> int:
        """Calls waiting for room now."""
        return len(self._waiting)

    async def admit(self, connection: str) -> Hold | None:
        """Room for one message of ``connection``'s (``reserve`` bytes), or None: refused."""
        if not self._waiting and self._fits(connection, self.reserve):
            self._add(connection, self.reserve)
            return Hold(connection, self.reserve)
        if len(self._waiting) >= self.max_waiting or self.wait <= 0:
            return self._refuse(connection)
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (connection, granted)
        self._waiting.append(entry)
        self._grant()
        try:
            await asyncio.wait((granted,), timeout=self.wait)
        except asyncio.CancelledError:
            self._abandon(entry)
            raise
        if granted.done():
            return Hold(connection, self.reserve)
        self._abandon(entry)
        return self._refuse(connection)

    def take(self, connection: str, count: int) -> Hold | None:
        """``count`` bytes for a message already read (a stream's next one), or None when they do not
        fit; never waits (a stream holds its read ahead of any wait)."""
        if not self._fits(connection, count):
            self._refuse(connection)
            return None
        self._add(connection, count)
        return Hold(connection, count)

    def settle(self, hold: Hold, count: int) -> None:
        """The message is read: ``hold`` now holds its ``count`` bytes instead of the reservation."""
        self._add(hold.connection, count - hold.held)
        hold.held = count
        self._grant()

    def release(self, hold: Hold) -> None:
        """The call is done with its message."""
        self._add(hold.connection, -hold.held)
        hold.held = 0
        self._grant()

    # -- internals --------------------------------------------------------------------------------

    def _fits(self, connection: str, count: int) -> bool:
        return (
            self.total + count <= self.limit
            and self._by_connection.get(connection, 0) + count <= self.per_connection
        )

    def _add(self, connection: str, count: int) -> None:
        now = self._by_connection.get(connection, 0) + count
        if now:
            self._by_connection[connection] = now
        else:
            self._by_connection.pop(connection, None)
        self.total += count

    def _grant(self) -> None:
        """Wake the waiting calls that fit now, in arrival order (one whose connection is full does
        not hold up the others). Stops as soon as the total has no room for one more message, so a
        release costs at most one pass over ``max_waiting`` entries."""
        if not self._waiting or self.total + self.reserve > self.limit:
            return
        still: deque[tuple[str, asyncio.Future[None]]] = deque()
        while self._waiting:
            entry = self._waiting.popleft()
            connection, granted = entry
            if granted.done():
                continue
            if self.total + self.reserve > self.limit:
                still.append(entry)
                still.extend(self._waiting)
                break
            if self._fits(connection, self.reserve):
                self._add(connection, self.reserve)
                granted.set_result(None)
            else:
                still.append(entry)
        self._waiting = still

    def _abandon(self, entry: tuple[str, asyncio.Future[None]]) -> None:
        """A waiting call gives up (timed out, or cancelled by its client): its place, or the room it
        was granted meanwhile, goes to the next."""
        connection, granted = entry
        if granted.done() and not granted.cancelled():
            self._add(connection, -self.reserve)
            self._grant()
            return
        granted.cancel()
        try:
            self._waiting.remove(entry)
        except ValueError:
            pass

    def _refuse(self, connection: str) -> None:
        self.refused += 1
        self._refusals.event(
            "gRPC requests refused with RESOURCE_EXHAUSTED: %d bytes of messages in flight (limit %d), "
            "%d on %s (limit %d), %d calls waiting",
            self.total,
            self.limit,
            self.held(connection),
            connection,
            self.per_connection,
            len(self._waiting),
        )
        return None
