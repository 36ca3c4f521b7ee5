"""One client connection: framing, dispatch, in-flight tracking, backpressure and idle timeout.

Built on ``asyncio.Protocol`` rather than streams because the hot path is ``data_received`` → decode
→ processor → ``writelines``, with no task per request: synchronous processors answer inline, in
arrival order, and only coroutine processors get a task (their answers may overtake earlier ones;
the opaque pairs them up, as Netty clients expect). Oneway requests run but are never answered.

Robustness is per connection: a malformed frame (bad length, unknown serialization, undecodable
header, over the frame limit, a header over ``max_header_length``) closes only this connection, with
one log line per burst (``ConnectionLogs``); requests that arrived whole before it in the same read
are still answered first (the connection stops reading, answers them, then closes). The bytes of an
unfinished frame count against a budget shared by all connections (``server.remoting.buffer_budget``); a
connection closed for it is treated the same way. When the peer stops
reading and our write buffer passes the high-water mark, both answering and reading stop for this
peer until the buffer drains (requests already received wait, decoded), so a slow reader throttles
only itself and costs bounded memory. A connection with no traffic for ``idle_timeout`` seconds is
closed, like the broker's all-idle handler (``serverChannelMaxIdleTimeSeconds``, 120 s): nothing
received, no processor running and no answer taken by the peer. A peer that stopped reading its
answers is thus cut off (aborted, since its buffer can never flush) instead of being held forever.

A request must arrive whole within ``request_timeout`` seconds of the read its first byte came in
(30 s): the idle timeout alone let a peer sending one byte a second hold its connection forever, as
every byte counts as traffic. Past the deadline the unfinished frame is dropped like a frame over the
limit (what arrived whole before is answered, then the connection closes). While it has a request
unfinished, or none completed since it connected, the connection is listed in
``server.remoting.refusal.IncompleteRequests``, from which the connection limit evicts the oldest.
Every connection also has its place in ``server.remoting.refusal.IdleConnections``, moved to the back
by each read, from which the connection limit evicts the one idle the longest when no request is
unfinished anywhere (never a live client's: one that heart-beat within the last 120 s).
Answers queued for a peer that does not read them count against ``server.remoting.write_budget``.

All of this is one explicit state machine, ``protocol.connection_state`` (open, peer not reading,
draining = answer what arrived then close, closing, closed): each transport callback and each
decision above is an event, and the transport is driven from the state it lands in, never from
flags. A draining connection closes as soon as its last answer is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, cast

from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, RequestCode
from protocol.command import Body, RemotingCommand
from protocol.connection_state import ConnectionState, Event, State
from protocol.errors import FrameError
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_frame_parts
from server.burst_log import BurstLog
from server.remoting.buffer_budget import BufferBudget
from server.remoting.channel import CURRENT_CHANNEL, RemotingChannel
from server.remoting.dispatch import Dispatcher, FastPath
from server.remoting.peer import CURRENT_PEER
from server.remoting.refusal import LIVE_CLIENT_WINDOW, IdleConnections, IncompleteRequests, reset_transport
from server.remoting.reply import Answered
from server.remoting.write_budget import WriteBudget
from server.store_changes import StoreChanges

log = logging.getLogger(__name__)

#: Answers are written out at least every this many bytes while a received chunk is processed.
FLUSH_BYTES = 256 * 1024

#: The broker's default ``serverChannelMaxIdleTimeSeconds``.
DEFAULT_IDLE_TIMEOUT = 120.0

#: The longest request header accepted. Java has no such limit, but no request it sends comes near
#: (a SEND_MESSAGE's properties are capped at 32 KiB), and a decoded header costs ~9x its size in
#: Python objects: a 16 MiB header of tiny extFields would cost ~140 MB while it is decoded.
DEFAULT_MAX_HEADER_LENGTH = 256 * 1024

#: Seconds a request frame may take to arrive whole, from the read its first byte came in. Clients
#: write a request at once; a 16 MiB frame at 1 MB/s takes 16 s, and Java's request timeouts
#: (3 s for a SEND, up to 18 s for mqadmin) are over long before this.
DEFAULT_REQUEST_TIMEOUT = 30.0


class ConnectionLogs:
    """The rate-limited log lines a client can cause per connection, shared by a server's connections
    (one line per burst across all of them, ``server.burst_log``)."""

    __slots__ = ("encode_failed", "evicted", "evicted_idle", "idle", "malformed", "stalled", "timed_out")

    def __init__(self) -> None:
        self.malformed = BurstLog(log)
        self.encode_failed = BurstLog(log, level=logging.ERROR)
        self.idle = BurstLog(log, level=logging.INFO)
        self.stalled = BurstLog(log)
        self.timed_out = BurstLog(log)
        self.evicted = BurstLog(log)
        self.evicted_idle = BurstLog(log)


class RemotingConnection(asyncio.Protocol):
    """Serves RocketMQ remoting requests arriving on one transport.

    Its lifecycle is one ``protocol.connection_state.ConnectionState``: each transport callback and
    each decision here (stop reading, close) is an event, and the transport is driven from the state
    it lands in (module docstring of ``protocol.connection_state`` for the states and events).
    """

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
        on_input_ended: Callable[[str], None] | None = None,
        write_budget: WriteBudget | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        incomplete: IncompleteRequests | None = None,
        idle: IdleConnections | None = None,
        woken: StoreChanges | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        #: Whose held pulls a SEND of ours may wake: run (``StoreChanges.run_woken``) right after the
        #: read's answers are written, so a woken pull answers in the SEND's own turn of the loop.
        self._woken = woken
        self._decoder = FrameDecoder(max_frame_length=max_frame_length, max_header_length=max_header_length)
        self._idle_timeout = idle_timeout
        self._on_close = on_close
        #: Called with the peer's ``host:port`` at its EOF while requests are in flight (held pulls
        #: then answer now: ``server.remoting.processors.pull_message.HoldLimits.end``).
        self._on_input_ended = on_input_ended
        self._logs = logs or ConnectionLogs()
        self._budget = budget
        self._holding = False  # whether the budget counts a partial frame of ours (bookkeeping only)
        self._write_budget = write_budget
        self._queuing = False  # whether the write budget counts queued answers of ours (bookkeeping only)
        self._request_timeout = request_timeout
        self._frame_deadline = 0.0  # when the unfinished frame must be whole; 0 = none unfinished
        self._frame_timer: asyncio.TimerHandle | None = None
        self._incomplete = incomplete
        self._listed = False  # whether ``incomplete`` lists us (bookkeeping only)
        self._idle = idle
        self._state = ConnectionState()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._peer = "?"
        self._remote_host: str | None = None
        self._peer_address: tuple[str, int] | None = None
        self._tasks: set[asyncio.Task[RemotingCommand | None]] = set()
        #: A heartbeat answered in a task (``server.loop_budget``: it waits for its turn, or is
        #: registered in slices): the requests after it on this connection wait for it, as they
        #: did when every heartbeat was registered at once (a pull after it finds the client).
        self._held_by: asyncio.Task[RemotingCommand | None] | None = None
        self._last_activity = 0.0
        self._idle_handle: asyncio.TimerHandle | None = None
        self._checked_buffer = 0
        self._answering_now = False  # inside _process_pending (a transport callback may re-enter)
        self._pending: deque[RemotingCommand] = deque()
        self.closed: asyncio.Future[None] = self._loop.create_future()
        #: The broker's handle on this connection (``server.remoting.channel``).
        self.channel = RemotingChannel("?", self._send_request, self.close)
        self.channel.write_frame = self._write_frame

    # asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._state.handle(Event.CONNECTED)
        # uvloop's transports implement the Transport interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._remote_host = str(peer[0]) if isinstance(peer, tuple) else None
        self._peer_address = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self.channel.client_address = self._peer
        self._last_activity = self._loop.time()
        if self._idle_timeout > 0:
            self._idle_handle = self._loop.call_at(self._last_activity + self._idle_timeout, self._check_idle)
        if self._incomplete is not None:
            self._incomplete.begin(self, self._last_activity)  # no request completed yet
            self._listed = True
        if self._idle is not None:
            self._idle.touch(self)
            self.channel.on_heart_beat = self._heart_beat

    def data_received(self, data: bytes) -> None:
        if not self._state.takes_input:
            return  # draining or closing: nothing more is read (a transport may still deliver)
        self._last_activity = now = self._loop.time()
        idle = self._idle
        if idle is not None:
            if self.channel.heartbeat_at > now - LIVE_CLIENT_WINDOW:
                idle.remove(self)  # a live client's: not in the idle order
            else:
                try:
                    idle.move_known(self)  # touch, without its Python call, for the usual case
                except KeyError:
                    idle.touch(self)
        answered = 0
        fast = self._dispatcher.fast_path
        if fast is not None and not self._pending and self._state.answering and self._held_by is None:
            decoder = self._decoder
            held = decoder.buffered
            if held:
                # A read that completes the frame an earlier read began is the compiled path's too
                # (joined): otherwise one cut frame sent every later read of the stream to the decoder.
                joined = decoder.completing(data)
                if joined is not None:
                    data = joined
                held = decoder.buffered
            if not held:
                answered, data = self._answer_fast(fast, data)
                if not data:
                    # The compiled path took the whole read (the usual case for VIEWs, QUERYs, SENDs):
                    # what the rest would do with nothing to decode and no frame held, without its
                    # calls (a read of one VIEW is a few microseconds; each call is a visible share).
                    if self._holding:
                        self._report_held()
                    if answered:
                        if self._listed or self._frame_deadline:
                            self._frame_done()
                        self._close_if_drained()
                    woken = self._woken
                    if woken is not None and woken.woken:
                        woken.run_woken()  # the pulls the read's SENDs woke, after their answers
                    return
        try:
            requests = self._decoder.feed(data) if data else []
        except FrameError as exc:
            requests = list(exc.decoded)
            before = len(requests) + answered
            self._logs.malformed.event(
                "closing connection from %s: malformed frame: %s%s",
                self._peer,
                exc,
                f" (answering the {before} request(s) before it first)" if before else "",
            )
            self._report_held()
            if not before:
                self.close()
                return
            self._end_input()
        if requests:
            if self._pending:
                self._pending.extend(requests)
            else:
                self._pending = deque(requests)
        # After queueing what arrived whole: if this drops our partial frame, those are answered first.
        self._report_held()
        if requests or answered:
            if self._decoder.buffered:
                self._frame_begun(now)  # the next frame began in this read
            elif self._listed or self._frame_deadline:
                self._frame_done()
            if requests:
                self._process_pending()
            else:
                self._close_if_drained()  # the compiled path answered all, and a bad frame followed
            woken = self._woken
            if woken is not None and woken.woken:
                woken.run_woken()  # the pulls the read's SENDs woke, after their answers
        elif not self._frame_deadline and self._decoder.buffered and self._state.takes_input:
            self._frame_begun(now)  # the first bytes of a frame

    def _answer_fast(self, fast: FastPath, data: bytes) -> tuple[int, bytes | memoryview]:
        """Answer the frames at the start of ``data`` the compiled request path is sure of
        (``server.remoting.request_path``) and return how many, and the rest of ``data`` for the
        decoder. Their answers are written as ``_process_pending`` writes its batches: in arrival
        order before anything after them, at least every ``FLUSH_BYTES``, and no further once the
        peer stops reading (the rest is then decoded and waits, as on the Python path). The peer's
        address is handed to the path (a SEND's born host) rather than set in ``CURRENT_PEER``,
        which every read under ``serve --writable`` set and reset, lookups too; ``CURRENT_CHANNEL``
        is not set either: no request the compiled path answers reads it (a pull names its peer
        only in refusals, which the Python path answers; ``_request_path_pull.h``)."""
        decoder = self._decoder
        stats = self._dispatcher.stats
        pos = answered = 0
        end = len(data)
        while True:
            out, pos, count = fast.answer(
                data,
                pos,
                decoder.max_frame_length,
                decoder.max_header_length,
                FLUSH_BYTES,
                stats,
                self._start_answer,
                self._peer_address,
            )
            answered += count
            if out is None:
                break
            self._write([out])  # may call pause_writing() right here
            if pos >= end or len(out) < FLUSH_BYTES or not self._state.answering:
                break
        if not pos:
            return answered, data
        return answered, memoryview(data)[pos:] if pos < end else b""

    def _report_held(self) -> None:
        """Tell the shared budget how much of an unfinished frame we hold
        (``server.remoting.buffer_budget``)."""
        budget = self._budget
        if budget is None:
            return
        held = self._decoder.buffered
        if held or self._holding:
            self._holding = held > 0
            budget.update(self, held)

    def _frame_begun(self, now: float) -> None:
        """A frame began in the read at ``now``: it must be whole by the deadline."""
        if self._request_timeout > 0:
            self._frame_deadline = now + self._request_timeout
            if self._frame_timer is None:
                self._frame_timer = self._loop.call_at(self._frame_deadline, self._check_frame)
        if self._incomplete is not None:
            self._incomplete.begin(self, now)
            self._listed = True

    def _frame_done(self) -> None:
        """Every frame that began arrived whole (the timer, if any, finds nothing to do)."""
        self._frame_deadline = 0.0
        if self._listed:
            self._listed = False
            self._incomplete.end(self)  # type: ignore[union-attr]

    def _check_frame(self) -> None:
        self._frame_timer = None
        if self._state.closing or not self._frame_deadline:
            return
        if self._loop.time() < self._frame_deadline:  # a later frame began: its own deadline
            self._frame_timer = self._loop.call_at(self._frame_deadline, self._check_frame)
            return
        self._logs.timed_out.event(
            "closing connection from %s: a request did not arrive whole within %g s of its first byte "
            "(%d bytes of it received)",
            self._peer,
            self._request_timeout,
            self._decoder.buffered,
        )
        self._abandon_frame("request timeout")

    def evict(self, limit: int) -> None:
        """The connection limit needs our slot for a client with a request to make: we have completed
        none since connecting, or have one unfinished, for longer than anyone else
        (``server.remoting.refusal.IncompleteRequests``)."""
        self._listed = False
        self._logs.evicted.event(
            "connection limit %d reached: closing the connection from %s, the longest without a "
            "completed request (%d bytes of one received), to make room",
            limit,
            self._peer,
            self._decoder.buffered,
        )
        self._abandon_frame("evicted")

    @property
    def last_activity(self) -> float:
        """Loop time of the last traffic (a read, answers taken, a request of ours in progress)."""
        return self._last_activity

    def evictable(self, now: float, live_window: float) -> bool | None:
        """For ``server.remoting.refusal.IdleConnections``: None if this is a live client's connection
        (a heartbeat within ``live_window`` seconds) or closing; False while anything is in flight (a
        request unanswered, answers not taken, part of a frame); True if only idle."""
        if self._state.closing or self.channel.heartbeat_at > now - live_window:
            return None
        if self._tasks or self._pending or self._decoder.buffered or self.write_buffer_size:
            return False
        return True

    def _heart_beat(self) -> None:
        """Our client heart-beat: a live client's connection leaves the idle order (it comes back at
        its first read once the heartbeats stop for ``LIVE_CLIENT_WINDOW``)."""
        self._idle.remove(self)  # type: ignore[union-attr]

    def evict_idle(self, limit: int, idle_for: float) -> None:
        """The connection limit needs our slot for a new client: we are the connection idle the
        longest, with nothing in flight, and no live client's (``server.remoting.refusal``)."""
        self._logs.evicted_idle.event(
            "connection limit %d reached: closing the connection from %s, idle for %.1f s and not a "
            "heart-beating client's, to make room",
            limit,
            self._peer,
            idle_for,
        )
        self.close()

    def _abandon_frame(self, reason: str) -> None:
        """Drop the unfinished frame as the shared buffer budget does, answer what came whole, close."""
        self._frame_deadline = 0.0
        if self._budget is not None:
            self._budget.release(self)
        if self._listed:
            self._listed = False
            self._incomplete.end(self)  # type: ignore[union-attr]
        self.drop_partial_frame(reason)

    def drop_partial_frame(self, reason: str) -> None:
        """Over the shared budget: drop the unfinished frame now, answer what arrived whole, close.

        Handled like a frame over the limit (``reason`` is for the budget's own log line).
        """
        self._holding = False
        self._decoder = FrameDecoder(
            max_frame_length=self._decoder.max_frame_length, max_header_length=self._decoder.max_header_length
        )
        if self._state.closing:
            return
        if self._tasks or self._pending:
            self._end_input()
        else:
            self.close()

    def _process_pending(self) -> None:
        """Answer decoded requests in order until none are left or the peer stops reading.

        Answers go out together in one ``writelines`` (one writev rather than a send() per pipelined
        request), flushed every ``FLUSH_BYTES`` so that a peer which is not reading is noticed
        (``pause_writing``) before a chunk full of large queries is answered in memory: the rest
        waits, decoded, until the peer drains its answers (``resume_writing``). Memory per
        connection is thus bounded by one read chunk plus roughly one flush and one answer.

        The hot path of the server: the peer is set once per batch (processors read it through
        ``server.remoting.peer.CURRENT_PEER``; a coroutine processor's task copies it when created), flags
        are tested inline, and whether the transport still takes writes is asked once per flush.
        """
        pending = self._pending
        state = self._state
        if not state.answering or self._held_by is not None:
            return
        dispatch = self._dispatcher.dispatch
        host = self._remote_host
        peer = self._peer
        batch: list[Body] = []
        size = 0
        self._answering_now = True
        token = CURRENT_PEER.set(self._peer_address)
        channel_token = CURRENT_CHANNEL.set(self.channel)
        try:
            # The state can only stop answering inside a write (pause_writing): it is tested before
            # the loop and after each flush rather than per request.
            while pending:
                request = pending.popleft()
                flag = request.flag
                if flag & RPC_TYPE_RESPONSE:
                    # The answer to a request the broker sent this client (``server.remoting.channel``).
                    if not self.channel.answered(request):
                        log.debug("ignoring a response frame (opaque %d) from %s", request.opaque, peer)
                    continue
                result = dispatch(request, host, peer)
                if result is None:
                    continue
                if isinstance(result, RemotingCommand):
                    if flag & RPC_ONEWAY:
                        continue
                    try:
                        head, body = encode_frame_parts(result)
                    except Exception as exc:
                        self._encode_failed(result, exc)
                        continue
                    batch.append(head)
                    size += len(head)
                    if body:
                        batch.append(body)
                        size += len(body)
                    if size >= FLUSH_BYTES:
                        self._write(batch)  # may call pause_writing() right here
                        size = 0
                        if not state.answering:
                            break
                    continue
                task = self._start(result, oneway=bool(flag & RPC_ONEWAY))
                if request.code == RequestCode.HEART_BEAT:
                    self._held_by = task  # what follows waits for the registration
                    break
        finally:
            CURRENT_CHANNEL.reset(channel_token)
            CURRENT_PEER.reset(token)
            self._answering_now = False
            if batch:
                self._write(batch)
        if not pending and state.draining and not self._tasks:
            self.close()  # draining, and everything that arrived is answered

    def _write(self, batch: list[Body]) -> None:
        """Hand ``batch`` to the transport (unless it stopped taking writes) and empty it."""
        transport = self._transport
        if self._state.writable and transport is not None and not transport.is_closing():
            transport.writelines(batch)
            if self._write_budget is not None:
                self._report_queued(transport)
        batch.clear()

    def _report_queued(self, transport: asyncio.Transport) -> None:
        """Tell the write budget how many bytes of answers our transport holds
        (``server.remoting.write_budget``): after each write and when the peer drains them."""
        queued = transport.get_write_buffer_size()
        if queued or self._queuing:
            self._queuing = queued > 0
            self._write_budget.update(self, queued)  # type: ignore[union-attr]

    def cut_off(self, reason: str) -> None:
        """Past the write budget: abort now (what is queued is not being read, so it could never
        flush); the budget logs ``reason``. Like a stalled reader at the idle timeout."""
        self._queuing = False
        if self._state.closing:
            return
        self._state.handle(Event.CLOSE)
        if self._transport is not None:
            self._transport.abort()

    def _end_input(self, *, pause_reading: bool = True) -> None:
        """Read nothing more; close once what was already received has been answered."""
        state = self._state
        was_reading = state.state is State.OPEN
        state.handle(Event.INPUT_ENDED)
        if pause_reading and was_reading and self._transport is not None:
            self._transport.pause_reading()

    def _close_if_drained(self) -> None:
        if self._state.draining and not self._tasks and not self._pending:
            self.close()

    def eof_received(self) -> bool:
        # The peer finished sending; answer what is in flight, then close (keep the write side open).
        state = self._state
        if state.draining:
            return True  # closes once what arrived is answered
        if state.closing:
            return False
        if self._tasks or self._pending:
            self._end_input(pause_reading=False)  # the transport stops reading at EOF itself
            if self._tasks and self._on_input_ended is not None:
                self._on_input_ended(self._peer)
            return True
        state.handle(Event.CLOSE)  # nothing to answer: the transport closes itself
        return False

    def pause_writing(self) -> None:
        state = self._state
        was_reading = state.state is State.OPEN
        state.handle(Event.PEER_NOT_READING)
        if was_reading and self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        state = self._state
        state.handle(Event.PEER_READING)
        self._last_activity = self._loop.time()  # the peer is reading its answers: not idle
        if self._write_budget is not None and self._transport is not None:
            self._report_queued(self._transport)
        if self._answering_now:
            return  # called from inside _process_pending's own write: its loop carries on
        if self._pending and state.answering:
            self._process_pending()
        if state.state is State.OPEN and not self._pending and self._transport is not None:
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._state.handle(Event.LOST)
        if self._budget is not None:
            self._holding = False
            self._budget.release(self)
        if self._write_budget is not None:
            self._queuing = False
            self._write_budget.release(self)
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        if self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None
        if self._listed:
            self._listed = False
            self._incomplete.end(self)  # type: ignore[union-attr]
        if self._idle is not None:
            self._idle.remove(self)
        for task in self._tasks:
            task.cancel()
        if exc is not None:
            log.debug("connection from %s lost: %s", self._peer, exc)
        if not self.closed.done():
            self.closed.set_result(None)
        self.channel.closed()
        if self._on_close is not None:
            self._on_close(self)

    # requests ---------------------------------------------------------------------------------

    def _start_answer(self, coro: Coroutine[Any, Any, RemotingCommand | None]) -> None:
        """A coroutine for the compiled request path's answer (a query handed to the pool)."""
        self._start(coro, oneway=False)

    def _start(
        self, coro: Coroutine[Any, Any, RemotingCommand | None], *, oneway: bool
    ) -> asyncio.Task[RemotingCommand | None]:
        task = self._loop.create_task(coro)
        self._tasks.add(task)

        def finished(done: asyncio.Task[RemotingCommand | None]) -> None:
            self._tasks.discard(done)
            if done.cancelled():
                return
            response = done.result()  # the dispatcher turns processor errors into responses
            if response is not None and not oneway and type(response) is not Answered:
                self._send(response)
            if self._held_by is done:
                self._held_by = None
                if self._pending:
                    self._process_pending()  # the requests that waited for it
                    return
            self._close_if_drained()

        task.add_done_callback(finished)
        return task

    def _send(self, response: RemotingCommand) -> None:
        """Write one answer that finished outside ``_process_pending`` (a coroutine processor's)."""
        self._send_request(response)

    def _send_request(self, request: RemotingCommand) -> bool:
        """Write one frame (an answer, or a request of the broker's); False if no writes are taken."""
        transport = self._transport
        if not self._state.writable or transport is None or transport.is_closing():
            return False
        try:
            head, body = encode_frame_parts(request)
        except Exception as exc:
            self._encode_failed(request, exc)
            return False
        if body:
            transport.writelines((head, body))
        else:
            transport.write(head)
        if self._write_budget is not None:
            self._report_queued(transport)
        return True

    def _write_frame(self, frame: bytes) -> bool:
        """Write one encoded frame (``RemotingChannel.write_frame``); False if no writes are taken."""
        transport = self._transport
        if not self._state.writable or transport is None or transport.is_closing():
            return False
        transport.write(frame)
        if self._write_budget is not None:
            self._report_queued(transport)
        return True

    def _encode_failed(self, response: RemotingCommand, exc: Exception) -> None:
        self._logs.encode_failed.event(
            "cannot encode the response to opaque %d for %s", response.opaque, self._peer, exc_info=exc
        )

    # lifecycle --------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        """Where this connection is in its life (``protocol.connection_state``)."""
        return self._state.state

    @property
    def peer(self) -> str:
        """``host:port`` of the client."""
        return self._peer

    @property
    def writing_paused(self) -> bool:
        """True while the peer is not reading fast enough (and so we are not reading from it)."""
        return self._state.peer_not_reading

    @property
    def write_buffer_size(self) -> int:
        """Bytes of answers queued in the transport, not yet taken by the socket."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an unfinished request frame held (what ``server.remoting.buffer_budget`` counts)."""
        return self._decoder.buffered

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered (decoded and waiting, or being processed)."""
        return len(self._tasks) + len(self._pending)

    def close(self) -> None:
        """Close now; what is already queued for writing is still flushed."""
        state = self._state
        if state.closing:
            return
        state.handle(Event.CLOSE)
        if self._transport is not None:
            self._transport.close()

    def reset(self) -> None:
        """Reset the connection now (RST: linger 0, then abort), as a network fault or a middlebox
        does; nothing queued is sent (``server.faults``' ``drop``)."""
        state = self._state
        if state.closing or self._transport is None:
            return
        state.handle(Event.CLOSE)
        reset_transport(self._transport)

    def end(self) -> None:
        """End the connection now as a broker process that stops or dies does (``down``): the
        kernel's FIN, nothing queued or held answered (``golden/broker_close_4.9.7.json``)."""
        state = self._state
        if state.closing or self._transport is None:
            return
        state.handle(Event.CLOSE)
        self._transport.abort()

    def _check_idle(self) -> None:
        self._idle_handle = None
        if self._state.closing or self._transport is None:
            return
        now = self._loop.time()
        buffered = self._transport.get_write_buffer_size()
        if self._write_budget is not None and (buffered or self._queuing):
            self._queuing = buffered > 0
            self._write_budget.update(self, buffered)
            if self._state.closing:
                return
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
            self._state.handle(Event.CLOSE)
            self._transport.abort()
            return
        self._logs.idle.event(
            "closing idle connection from %s (%.0f s without traffic)", self._peer, self._idle_timeout
        )
        self.close()

    async def shutdown(self, timeout: float) -> None:
        """Stop reading, let in-flight requests finish and their answers flush, then close.

        After ``timeout`` seconds whatever is left is cut off (the transport is aborted).
        """
        transport = self._transport
        if transport is None or self.closed.done():
            return
        if not self._state.closing:
            self._end_input()
            self._close_if_drained()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout=max(0.0, timeout))
        except TimeoutError:
            log.warning("connection from %s did not drain in time; aborting it", self._peer)
            self.close()
            transport.abort()
