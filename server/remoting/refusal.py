"""Refusing connections over ``--max-connections``: answer SYSTEM_BUSY to the first request, then close.

Why answer instead of closing at once: a Java client (4.9.x) whose channel is closed under a pending
request does not fail that request until its timeout (5-18 s for mqadmin), and then reports a bare
timeout or "connect failed". An answer is immediate and says what happened: the client raises
``MQClientException``/``MQBrokerException`` with code 2 (SYSTEM_BUSY, which RocketMQ clients already
treat as "try again later") and the remark below, worded like the broker's own
``[REJECTREQUEST]system busy, start flow control for a while``.

A refused connection costs little and briefly: its first frame is read with small limits (64 KiB),
it gets one answer and is closed; one that sends nothing is closed after ``REFUSAL_GRACE`` seconds;
once ``max_waiting`` refused connections are already waiting, further ones are closed at once. The
refusals are logged as one line per burst (``server.burst_log``), not one line per connection.

Before refusing, the limit keeps room for clients that finish their requests (``IncompleteRequests``):
a connection that has not completed a request since it connected, or is in the middle of one, for at
least ``EVICTABLE_AFTER`` seconds is closed, oldest first, to make room for the new one. Without
this, 10,000 connections sending a byte a second (each byte reset the idle timeout) held every slot
and every real client got SYSTEM_BUSY for the whole attack; a real client sends a whole request at
once, so it is in that list for microseconds, while a slow sender stays at its front.

When none is, the connection idle the longest goes (``IdleConnections``), if it has been idle at
least ``EVICTABLE_AFTER`` seconds, has nothing in flight and is not a live client's: 200 connections
that each made one request and then stayed silent held ``--max-connections 200`` for the whole idle
timeout (120 s), and could renew. A live client is one that heart-beat within
``LIVE_CLIENT_WINDOW`` (the broker's 120 s channel expiry): a producer's or consumer's connection,
whose loss would cost it its group membership and rebalance, is kept however quiet it is. Only when
neither list has anyone to give is the new connection refused with SYSTEM_BUSY.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, cast

from protocol.codes import ResponseCode
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, encode_frame
from server.burst_log import BurstLog

log = logging.getLogger(__name__)

#: Seconds a refused connection has to send the request it will be answered SYSTEM_BUSY to.
REFUSAL_GRACE = 5.0

#: Refusals are summarised in one log line at most this often (seconds).
LOG_EVERY = 10.0

#: The largest first frame a refused connection may send (a query or heartbeat is far smaller).
REFUSED_FRAME_LIMIT = 64 * 1024


#: Seconds a connection must have been without a completed request before it may be evicted for a
#: new one: a real client sends its first request at once, so only a silent or slow peer is this old.
EVICTABLE_AFTER = 1.0


class Incomplete(Protocol):
    """A connection as the eviction list sees it."""

    def evict(self, limit: int) -> None: ...


class IncompleteRequests:
    """Connections without a completed request since they connected or since their current request
    began, in the order they became so (an ordered dict: O(1) to add, remove and find the oldest)."""

    __slots__ = ("_since", "evicted")

    def __init__(self) -> None:
        self._since: dict[Incomplete, float] = {}
        #: Connections evicted to make room (a counter, for tests and reports).
        self.evicted = 0

    def begin(self, connection: Incomplete, now: float) -> None:
        """``connection`` started a request (or connected) at ``now`` and has not finished it."""
        self._since.pop(connection, None)
        self._since[connection] = now

    def end(self, connection: Incomplete) -> None:
        """``connection`` completed its request (or is gone)."""
        self._since.pop(connection, None)

    def __len__(self) -> int:
        return len(self._since)

    def evict_oldest(self, now: float, limit: int, min_age: float = EVICTABLE_AFTER) -> Incomplete | None:
        """Evict the connection incomplete the longest if it has been so ``min_age`` seconds; return it."""
        for connection, since in self._since.items():
            if now - since < min_age:
                return None
            del self._since[connection]
            self.evicted += 1
            connection.evict(limit)
            return connection
        return None


#: Seconds after its last heartbeat a connection still counts as a live client's (never evicted for
#: being idle): ``ClientHousekeepingService``'s channel expiry (``channelExpiredTimeout``, 120 s).
LIVE_CLIENT_WINDOW = 120.0

#: Connections ``IdleConnections.evict_idlest`` looks at, at most, for one new connection.
MAX_LOOK = 16


class Idle(Protocol):
    """A connection as the idle order sees it."""

    @property
    def last_activity(self) -> float: ...

    def evictable(self, now: float, live_window: float) -> bool | None: ...

    def evict_idle(self, limit: int, idle_for: float) -> None: ...


class IdleConnections:
    """Every served connection, the one longest without traffic first (an ordered dict: O(1) to touch
    on a read, to remove, and to find the idlest).

    The order is kept by ``touch`` on each read of a connection that is no live client's; a
    heartbeat takes its connection out (``remove``), and its reads keep it out while it is live.
    Other things keep a connection from being idle without a read (a request of its still in a
    processor, answers the peer is still taking), so the connection at the front is checked when a
    slot is needed: a live client's or a closing one still there leaves the order; one busy, or
    active less than ``min_idle`` ago (more recently than its place says, or everyone is), goes to
    the back. At most ``MAX_LOOK`` such steps are taken per new connection, so finding a victim never
    walks the list; and a connection taken out stays out until its next read, so the next new
    connection looks further.
    """

    __slots__ = ("_order", "evicted", "move_known")

    def __init__(self) -> None:
        self._order: OrderedDict[Idle, None] = OrderedDict()
        #: Connections evicted for being idle (a counter, for tests and ``/metrics``).
        self.evicted = 0
        #: ``touch`` for a connection already in the order (KeyError when it is not: ``touch`` it
        #: then): the ordered dict's own call, without a Python frame, for the read path.
        self.move_known: Callable[[Idle], None] = self._order.move_to_end

    def touch(self, connection: Idle) -> None:
        """``connection`` was active now: to the back of the order."""
        try:
            self._order.move_to_end(connection)
        except KeyError:
            self._order[connection] = None

    def remove(self, connection: Idle) -> None:
        """``connection`` is gone."""
        self._order.pop(connection, None)

    def __len__(self) -> int:
        return len(self._order)

    def evict_idlest(
        self,
        now: float,
        limit: int,
        min_idle: float = EVICTABLE_AFTER,
        live_window: float = LIVE_CLIENT_WINDOW,
    ) -> Idle | None:
        """Evict the connection idle the longest, if it has been ``min_idle`` seconds, has nothing in
        flight and is no live client's; return it (None: nobody could go)."""
        order = self._order
        for _ in range(MAX_LOOK):
            if not order:
                return None
            connection = next(iter(order))
            verdict = connection.evictable(now, live_window)
            if verdict is None:  # a live client's, or closing: out until its next read
                del order[connection]
                continue
            idle_for = now - connection.last_activity
            if not verdict or idle_for < min_idle:
                order.move_to_end(connection)  # busy, or active since it took its place
                continue
            del order[connection]
            self.evicted += 1
            connection.evict_idle(limit, idle_for)
            return connection
        return None


def busy_remark(limit: int) -> str:
    """The SYSTEM_BUSY remark a refused connection is answered with."""
    return f"[OVERLOAD]system busy, connection limit {limit} reached, try again later"


class Refuser:
    """Makes the protocol objects for refused connections and logs the refusals in bursts."""

    def __init__(self, limit: int, max_waiting: int) -> None:
        self.limit = limit
        self.max_waiting = max_waiting
        self.refused = 0
        self._waiting: set[RefusedConnection] = set()
        self._log = BurstLog(log, LOG_EVERY)

    def connection(self) -> asyncio.Protocol:
        """The protocol for one connection over the limit."""
        self.refused += 1
        self._log.event(
            "connection limit %d reached: refusing connections (answered SYSTEM_BUSY, then closed)",
            self.limit,
        )
        return RefusedConnection(self, answer=len(self._waiting) < self.max_waiting)

    def track(self, connection: RefusedConnection) -> None:
        self._waiting.add(connection)

    def untrack(self, connection: RefusedConnection) -> None:
        self._waiting.discard(connection)

    @property
    def waiting(self) -> int:
        """Refused connections not yet closed."""
        return len(self._waiting)

    def close_all(self) -> None:
        """Close every refused connection still waiting (server stop)."""
        for connection in list(self._waiting):
            connection.close()


class RefusedConnection(asyncio.Protocol):
    """One refused connection: SYSTEM_BUSY to its first request, then closed."""

    def __init__(self, refuser: Refuser, *, answer: bool) -> None:
        self._refuser = refuser
        self._answer = answer
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(
            max_frame_length=REFUSED_FRAME_LIMIT, max_header_length=REFUSED_FRAME_LIMIT
        )
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        if not self._answer:
            self._transport.close()
            return
        self._refuser.track(self)
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_GRACE, self.close)

    def data_received(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        try:
            commands = self._decoder.feed(data)
        except FrameError:
            self.close()
            return
        for command in commands:
            if command.is_response or command.is_oneway:
                continue
            busy = command.make_response(ResponseCode.SYSTEM_BUSY, remark=busy_remark(self._refuser.limit))
            self._transport.write(encode_frame(busy))
            self.close()
            return

    def eof_received(self) -> bool:
        return False

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._refuser.untrack(self)


class DownConnection(asyncio.Protocol):
    """A connection the kernel accepted as the broker went ``down``: ended at once (a FIN), as
    ``suspend`` ended the others. asyncio makes a connection's protocol one loop turn after the
    accept, so a connection accepted just before the listening sockets closed would otherwise be
    served by a broker that is down."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).abort()


def reset_transport(transport: asyncio.Transport) -> None:
    """Close ``transport`` with an RST (linger 0, then abort), nothing queued sent: a network fault's
    end (``RemotingConnection.reset``)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass  # aborted all the same, with a FIN
    transport.abort()
