"""The bytes of gRPC requests in flight, per connection and in total, with the calls waiting for room.

grpcio reads a unary call's whole message before a handler sees it, and does not say how long the
message is until it has it. So a call is given room before its message is read (``admission``):
``reserve`` bytes, the largest message grpc accepts, held while the message arrives; once read, the
reservation becomes the message's own size, held until the call ends. A call that finds no room
(the total, or its own connection's share) waits its turn, first come first served, for at most
``wait`` seconds; it is refused past that, or at once when ``max_waiting`` calls already wait. A
waiting call holds no message: with the transport's bandwidth probe off (``server.grpc.server``)
grpc takes no more of a stream's bytes than its flow-control window until the message is asked for.

Room given is room a peer could keep: a call whose message does not come (sent a byte a second, or
never) holds its reservation until the request timeout (30 s), and four such calls would fill the
default 64 MiB. So while calls wait and the total is what keeps them out, the call reading its
message the longest, once it has read for ``read_grace`` seconds, is made to give its room up
(RESOURCE_EXHAUSTED), one per call left waiting: a real client's message arrives in one go, well
within it.

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
from collections import OrderedDict, deque

from server.burst_log import BurstLog
from server.grpc.defaults import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION

log = logging.getLogger(__name__)

#: Seconds a call may wait for room before RESOURCE_EXHAUSTED.
DEFAULT_ADMISSION_WAIT = 2.0
#: Calls that may wait for room at once; one more is refused at once.
DEFAULT_MAX_WAITING = 1024
#: Seconds a call may take to receive its message while others wait for room, before it gives its
#: room up (a client on loopback or a LAN sends 16 MiB in well under a second).
DEFAULT_READ_GRACE = 1.0


class Hold:
    """The bytes one call holds in the budget, and whether it must give its room up."""

    __slots__ = ("connection", "evicted", "held", "started")

    def __init__(self, connection: str, held: int) -> None:
        self.connection = connection
        self.held = held
        #: Loop time its message began to be read (room granted).
        self.started = 0.0
        #: Done when the call must stop reading and give its room to those waiting.
        self.evicted: asyncio.Future[None] | None = None


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
        read_grace: float = DEFAULT_READ_GRACE,
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
        self.read_grace = read_grace
        #: Bytes held by all calls now.
        self.total = 0
        #: Calls refused for want of room (a counter, for tests and reports).
        self.refused = 0
        #: Calls made to give their room up, their message too slow to come (a counter).
        self.evicted = 0
        #: Bytes of evicted calls not let go yet: room already on its way back.
        self._freeing = 0
        self._by_connection: dict[str, int] = {}
        self._waiting: deque[tuple[Hold, asyncio.Future[None]]] = deque()
        #: Calls reading their message, the longest reading first.
        self._reading: OrderedDict[Hold, None] = OrderedDict()
        self._refusals = BurstLog(log)
        self._evictions = BurstLog(log)

    def held(self, connection: str) -> int:
        """Bytes the calls of ``connection`` hold now."""
        return self._by_connection.get(connection, 0)

    @property
    def waiting(self) -> int:
        """Calls waiting for room now."""
        return len(self._waiting)

    @property
    def reading(self) -> int:
        """Calls reading their message now."""
        return len(self._reading)

    async def admit(self, connection: str) -> Hold | None:
        """Room for one message of ``connection``'s (``reserve`` bytes), or None: refused.

        While it waits, a call whose message has taken ``read_grace`` seconds to come so far, when
        the total is what keeps this one out, is made to give its room up (its ``evicted``), the
        longest reading first: a peer that opens calls and trickles their messages, or never sends
        them, cannot hold the room for the request timeout while every other call is refused."""
        loop = asyncio.get_running_loop()
        hold = Hold(connection, self.reserve)
        if not self._waiting and self._fits(connection, self.reserve):
            self._grant(hold, loop.time())
            return hold
        if len(self._waiting) >= self.max_waiting or self.wait <= 0:
            return self._refuse(connection)
        granted: asyncio.Future[None] = loop.create_future()
        entry = (hold, granted)
        self._waiting.append(entry)
        self._wake()
        deadline = loop.time() + self.wait
        try:
            while not granted.done():
                now = loop.time()
                if now >= deadline:
                    break
                pause = deadline - now
                if self._reading and self.total - self._freeing + self.reserve > self.limit:
                    oldest = next(iter(self._reading))
                    if now - oldest.started >= self.read_grace:
                        self._evict(oldest, now)
                        pause = min(pause, 0.01)  # its room comes back once its call has let go
                    else:
                        pause = min(pause, oldest.started + self.read_grace - now)
                await asyncio.wait((granted,), timeout=max(pause, 0.001))
        except asyncio.CancelledError:
            self._abandon(entry)
            raise
        if granted.done():
            return hold
        self._abandon(entry)
        return self._refuse(connection)

    def take(self, connection: str, count: int, *, always: bool = False) -> Hold | None:
        """``count`` bytes for a message already read (a stream's next one), or None when they do not
        fit (unless ``always``: counted even past the limits); never waits (a stream holds its read
        ahead of any wait)."""
        if not always and not self._fits(connection, count):
            self._refuse(connection)
            return None
        self._add(connection, count)
        return Hold(connection, count)

    def settle(self, hold: Hold, count: int) -> None:
        """The message is read: ``hold`` now holds its ``count`` bytes instead of the reservation."""
        self._reading.pop(hold, None)
        self._let_go(hold)
        self._add(hold.connection, count - hold.held)
        hold.held = count
        self._wake()

    def release(self, hold: Hold) -> None:
        """The call is done with its message."""
        self._reading.pop(hold, None)
        self._let_go(hold)
        self._add(hold.connection, -hold.held)
        hold.held = 0
        self._wake()

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

    def _grant(self, hold: Hold, now: float) -> None:
        """``hold`` has its room: its message is read from now."""
        self._add(hold.connection, hold.held)
        hold.started = now
        hold.evicted = asyncio.get_running_loop().create_future()
        self._reading[hold] = None

    def _wake(self) -> None:
        """Give room to the waiting calls that fit now, in arrival order (one whose connection is full
        does not hold up the others). Stops as soon as the total has no room for one more message, so
        a release costs at most one pass over ``max_waiting`` entries."""
        if not self._waiting or self.total + self.reserve > self.limit:
            return
        now = asyncio.get_running_loop().time()
        still: deque[tuple[Hold, asyncio.Future[None]]] = deque()
        while self._waiting:
            entry = self._waiting.popleft()
            hold, granted = entry
            if granted.done():
                continue
            if self.total + self.reserve > self.limit:
                still.append(entry)
                still.extend(self._waiting)
                break
            if self._fits(hold.connection, self.reserve):
                self._grant(hold, now)
                granted.set_result(None)
            else:
                still.append(entry)
        self._waiting = still

    def _evict(self, hold: Hold, now: float) -> None:
        """``hold``'s call must stop reading: its room is wanted (it goes once the call lets go)."""
        del self._reading[hold]
        self.evicted += 1
        self._freeing += hold.held
        if hold.evicted is not None and not hold.evicted.done():
            hold.evicted.set_result(None)
        self._evictions.event(
            "gRPC request budget full: a call from %s still reading its message after %.1f s gives its "
            "room to %d waiting",
            hold.connection,
            now - hold.started,
            len(self._waiting),
        )

    def _let_go(self, hold: Hold) -> None:
        """An evicted ``hold``'s room is no longer on its way back once it is settled or released."""
        if hold.evicted is not None and hold.evicted.done() and hold.held:
            self._freeing -= hold.held
            hold.evicted = None

    def _abandon(self, entry: tuple[Hold, asyncio.Future[None]]) -> None:
        """A waiting call gives up (timed out, or cancelled by its client): its place, or the room it
        was granted meanwhile, goes to the next."""
        hold, granted = entry
        if granted.done() and not granted.cancelled():
            self.release(hold)
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
