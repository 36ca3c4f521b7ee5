"""One client connection: framing, dispatch, in-flight tracking, backpressure and idle timeout.

Built on ``asyncio.Protocol`` rather than streams because the hot path is ``data_received`` → decode
→ processor → ``writelines``, with no task per request: synchronous processors answer inline, in
arrival order, and only coroutine processors get a task (their answers may overtake earlier ones;
the opaque pairs them up, as Netty clients expect). Oneway requests run but are never answered.

Robustness is per connection: a malformed frame (bad length, unknown serialization, undecodable
header, over the frame limit, a header over ``max_header_length``) closes only this connection, with
one log line per burst (``ConnectionLogs``); requests that arrived whole before it in the same read
are still answered first (the connection stops reading, answers them, then closes). The bytes of an
unfinished frame count against a budget shared by all connections (``server.buffer_budget``); a
connection closed for it is treated the same way. When the peer stops
reading and our write buffer passes the high-water mark, both answering and reading stop for this
peer until the buffer drains (requests already received wait, decoded), so a slow reader throttles
only itself and costs bounded memory. A connection with no traffic for ``idle_timeout`` seconds is
closed, like the broker's all-idle handler (``serverChannelMaxIdleTimeSeconds``, 120 s): nothing
received, no processor running and no answer taken by the peer. A peer that stopped reading its
answers is thus cut off (aborted, since its buffer can never flush) instead of being held forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, cast

from protocol.command import RemotingCommand
from protocol.errors import FrameError
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_frame_parts
from server.buffer_budget import BufferBudget
from server.burst_log import BurstLog
from server.dispatch import Dispatcher
from server.peer import CURRENT_PEER

log = logging.getLogger(__name__)

#: Answers are written out at least every this many bytes while a received chunk is processed.
FLUSH_BYTES = 256 * 1024

#: The broker's default ``serverChannelMaxIdleTimeSeconds``.
DEFAULT_IDLE_TIMEOUT = 120.0

#: The longest request header accepted. Java has no such limit, but no request it sends comes near
#: (a SEND_MESSAGE's properties are capped at 32 KiB), and a decoded header costs ~9x its size in
#: Python objects: a 16 MiB header of tiny extFields would cost ~140 MB while it is decoded.
DEFAULT_MAX_HEADER_LENGTH = 256 * 1024


class ConnectionLogs:
    """The rate-limited log lines a client can cause per connection, shared by a server's connections
    (one line per burst across all of them, ``server.burst_log``)."""

    __slots__ = ("encode_failed", "idle", "malformed", "stalled")

    def __init__(self) -> None:
        self.malformed = BurstLog(log)
        self.encode_failed = BurstLog(log, level=logging.ERROR)
        self.idle = BurstLog(log, level=logging.INFO)
        self.stalled = BurstLog(log)


class RemotingConnection(asyncio.Protocol):
    """Serves RocketMQ remoting requests arriving on one transport."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_header_length: int = DEFAULT_MAX_HEADER_LENGTH,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        on_close: Callable[[RemotingConnection], None] | None = None,
        logs: ConnectionLogs | None = None,
        budget: BufferBudget | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame_length=max_frame_length, max_header_length=max_header_length)
        self._idle_timeout = idle_timeout
        self._on_close = on_close
        self._logs = logs or ConnectionLogs()
        self._budget = budget
        self._holding = False  # whether the budget counts a partial frame of ours
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._peer = "?"
        self._remote_host: str | None = None
        self._peer_address: tuple[str, int] | None = None
        self._tasks: set[asyncio.Task[RemotingCommand | None]] = set()
        self._last_activity = 0.0
        self._idle_handle: asyncio.TimerHandle | None = None
        self._checked_buffer = 0
        self._closing = False
        self._writing_paused = False
        self._draining = False
        self._frames_failed = False
        self._closer: asyncio.Task[None] | None = None
        self._batch: list[bytes | bytearray | memoryview] | None = None
        self._batch_bytes = 0
        self._pending: deque[RemotingCommand] = deque()
        self._drained_waiter: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = self._loop.create_future()

    # asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._remote_host = str(peer[0]) if isinstance(peer, tuple) else None
        self._peer_address = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self._last_activity = self._loop.time()
        if self._idle_timeout > 0:
            self._idle_handle = self._loop.call_at(self._last_activity + self._idle_timeout, self._check_idle)

    def data_received(self, data: bytes) -> None:
        if self._frames_failed:
            return  # after a malformed frame nothing more is read (a transport may still deliver)
        self._last_activity = self._loop.time()
        try:
            requests = self._decoder.feed(data)
        except FrameError as exc:
            requests = list(exc.decoded)
            self._logs.malformed.event(
                "closing connection from %s: malformed frame: %s%s",
                self._peer,
                exc,
                f" (answering the {len(requests)} request(s) before it first)" if requests else "",
            )
            self._report_held()
            if not requests:
                self.close()
                return
            self._stop_reading_then_close()
        if requests:
            if self._pending:
                self._pending.extend(requests)
            else:
                self._pending = deque(requests)
        # After queueing what arrived whole: if this drops our partial frame, those are answered first.
        self._report_held()
        if requests:
            self._process_pending()

    def _report_held(self) -> None:
        """Tell the shared budget how much of an unfinished frame we hold (``server.buffer_budget``)."""
        budget = self._budget
        if budget is None:
            return
        held = self._decoder.buffered
        if held or self._holding:
            self._holding = held > 0
            budget.update(self, held)

    def drop_partial_frame(self, reason: str) -> None:
        """Over the shared budget: drop the unfinished frame now, answer what arrived whole, close.

        Handled like a frame over the limit (``reason`` is for the budget's own log line).
        """
        self._holding = False
        self._decoder = FrameDecoder(
            max_frame_length=self._decoder.max_frame_length, max_header_length=self._decoder.max_header_length
        )
        if self._closing:
            return
        if self._tasks or self._pending:
            self._stop_reading_then_close()
        else:
            self._frames_failed = True
            self.close()

    def _process_pending(self) -> None:
        """Answer decoded requests in order until none are left or the peer stops reading.

        Answers go out together in one ``writelines`` (one writev rather than a send() per pipelined
        request), flushed every ``FLUSH_BYTES`` so that a peer which is not reading is noticed
        (``pause_writing``) before a chunk full of large queries is answered in memory: the rest
        waits, decoded, until the peer drains its answers (``resume_writing``). Memory per
        connection is thus bounded by one read chunk plus roughly one flush and one answer.
        """
        pending = self._pending
        batch: list[bytes | bytearray | memoryview] = []
        self._batch = batch
        self._batch_bytes = 0
        try:
            while pending and not self._writing_paused and not self._closing:
                self._handle(pending.popleft())
                if self._batch_bytes >= FLUSH_BYTES:
                    self._flush()  # may call pause_writing() right here
        finally:
            self._flush()
            self._batch = None
        if pending and self._writing_paused and not self._closing and self._transport is not None:
            self._transport.pause_reading()
        elif not pending and self._drained_waiter is not None and not self._drained_waiter.done():
            self._drained_waiter.set_result(None)

    def _flush(self) -> None:
        batch = self._batch
        if not batch:
            return
        if not self._closing and self._transport is not None:
            self._transport.writelines(batch)
        batch.clear()
        self._batch_bytes = 0

    def _stop_reading_then_close(self) -> None:
        """Read nothing more; close once what was already received has been answered."""
        self._frames_failed = True
        self._draining = True
        if self._transport is not None:
            self._transport.pause_reading()
        if self._closer is None:
            self._closer = self._loop.create_task(self._close_after_in_flight())

    def eof_received(self) -> bool:
        # The peer finished sending; answer what is in flight, then close (keep the write side open).
        if self._closer is not None:
            return True
        if self._tasks or self._pending:
            self._closer = self._loop.create_task(self._close_after_in_flight())
            return True
        return False

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._transport is not None and not self._closing:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._last_activity = self._loop.time()  # the peer is reading its answers: not idle
        if self._batch is not None:
            return  # called from inside _process_pending's own write: its loop carries on
        if self._pending and not self._closing:
            self._process_pending()
        if self._writing_paused or self._pending:
            return
        if self._transport is not None and not self._closing and not self._draining:
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._budget is not None:
            self._holding = False
            self._budget.release(self)
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        for task in self._tasks:
            task.cancel()
        if exc is not None:
            log.debug("connection from %s lost: %s", self._peer, exc)
        if not self.closed.done():
            self.closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    # requests ---------------------------------------------------------------------------------

    def _handle(self, request: RemotingCommand) -> None:
        if request.is_response:
            # This server never sends requests, so a response has nobody waiting for it.
            log.debug("ignoring a response frame (opaque %d) from %s", request.opaque, self._peer)
            return
        token = CURRENT_PEER.set(self._peer_address)
        try:
            result = self._dispatcher.dispatch(request, self._remote_host, self._peer)
            if result is None:
                return
            if isinstance(result, RemotingCommand):
                if not request.is_oneway:
                    self._send(result)
                return
            self._start(result, oneway=request.is_oneway)
        finally:
            CURRENT_PEER.reset(token)

    def _start(self, coro: Coroutine[Any, Any, RemotingCommand | None], *, oneway: bool) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)

        def finished(done: asyncio.Task[RemotingCommand | None]) -> None:
            self._tasks.discard(done)
            if done.cancelled():
                return
            response = done.result()  # the dispatcher turns processor errors into responses
            if response is not None and not oneway:
                self._send(response)

        task.add_done_callback(finished)

    def _send(self, response: RemotingCommand) -> None:
        transport = self._transport
        if transport is None or self._closing or transport.is_closing():
            return
        try:
            head, body = encode_frame_parts(response)
        except Exception as exc:
            self._logs.encode_failed.event(
                "cannot encode the response to opaque %d for %s", response.opaque, self._peer, exc_info=exc
            )
            return
        batch = self._batch
        if batch is not None:
            batch.append(head)
            self._batch_bytes += len(head)
            if body:
                batch.append(body)
                self._batch_bytes += len(body)
        elif body:
            transport.writelines((head, body))
        else:
            transport.write(head)

    # lifecycle --------------------------------------------------------------------------------

    @property
    def peer(self) -> str:
        """``host:port`` of the client."""
        return self._peer

    @property
    def writing_paused(self) -> bool:
        """True while the peer is not reading fast enough (and so we are not reading from it)."""
        return self._writing_paused

    @property
    def write_buffer_size(self) -> int:
        """Bytes of answers queued in the transport, not yet taken by the socket."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an unfinished request frame held (what ``server.buffer_budget`` counts)."""
        return self._decoder.buffered

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered (decoded and waiting, or being processed)."""
        return len(self._tasks) + len(self._pending)

    def close(self) -> None:
        """Close now; what is already queued for writing is still flushed."""
        if self._closing:
            return
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def _check_idle(self) -> None:
        self._idle_handle = None
        if self._closing or self._transport is None:
            return
        now = self._loop.time()
        buffered = self._transport.get_write_buffer_size()
        # Answers left the buffer since the last check (only activity can add to it in between).
        draining = buffered < self._checked_buffer
        self._checked_buffer = buffered
        if self._tasks or draining:
            self._last_activity = now  # our own work in progress, or the peer taking its answers
        if now < self._last_activity + self._idle_timeout:
            self._idle_handle = self._loop.call_at(self._last_activity + self._idle_timeout, self._check_idle)
            return
        if buffered or self._pending:
            # The peer stopped reading: nothing it was sent moves, so close() could never flush.
            self._logs.stalled.event(
                "closing connection from %s: it read none of its answers for %.0f s (%d bytes and %d "
                "request(s) waiting)",
                self._peer,
                self._idle_timeout,
                buffered,
                len(self._pending),
            )
            self._closing = True
            self._transport.abort()
            return
        self._logs.idle.event(
            "closing idle connection from %s (%.0f s without traffic)", self._peer, self._idle_timeout
        )
        self.close()

    async def _wait_in_flight(self, timeout: float | None) -> None:
        """Until nothing received is left unanswered (decoded-but-waiting requests included)."""
        loop = self._loop
        deadline = None if timeout is None else loop.time() + timeout
        while (self._tasks or self._pending) and not self._closing:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return
            waiters: list[asyncio.Future[Any]] = list(self._tasks)
            if self._pending:
                self._drained_waiter = loop.create_future()
                waiters.append(self._drained_waiter)
            waiters.append(self.closed)
            await asyncio.wait(waiters, timeout=left, return_when=asyncio.FIRST_COMPLETED)

    async def _close_after_in_flight(self) -> None:
        await self._wait_in_flight(None)
        self.close()

    async def shutdown(self, timeout: float) -> None:
        """Stop reading, let in-flight requests finish and their answers flush, then close.

        After ``timeout`` seconds whatever is left is cut off (the transport is aborted).
        """
        transport = self._transport
        if transport is None or self.closed.done():
            return
        self._draining = True
        if not self._closing:
            transport.pause_reading()
        loop = self._loop
        deadline = loop.time() + timeout
        await self._wait_in_flight(max(0.0, deadline - loop.time()))
        self.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            log.warning("connection from %s did not drain in time; aborting it", self._peer)
            transport.abort()
