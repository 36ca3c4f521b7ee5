"""The async remoting client: one connection per address, many requests in flight on each.

RocketMQ matches a response to its request by ``opaque`` alone, so a connection can carry any number
of concurrent requests and answers may come back in any order. ``RemotingConnection`` owns one TCP
connection (an ``asyncio.Protocol``: no per-read task, the frame decoder is fed straight from the
event loop), numbers its requests, and resolves each caller's future when the matching response
arrives or its deadline passes (the book of who waits is ``protocol.opaque_matcher.OpaqueMatcher``,
shared with the tests; one timer per connection, at the earliest deadline). ``RemotingClient`` keeps
one connection per ``host:port`` and opens it on first use, as the Java client's
``NettyRemotingClient`` does.

Failures are typed (``clients.errors``): no connection is ``ConnectError``, no answer in time is
``RequestTimeoutError``, a connection lost or poisoned by an undecodable frame fails every request
in flight on it with ``ConnectionClosedError``. A late answer to a timed-out request is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import cast

from clients.errors import ConnectError, ConnectionClosedError, RequestTimeoutError
from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, LanguageCode, SerializeType
from protocol.command import Body, RemotingCommand
from protocol.errors import FrameError
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_frame_parts
from protocol.opaque_matcher import OpaqueMatcher

#: ``MQVersion.CURRENT_VERSION`` of RocketMQ 4.9.7, the release whose behaviour this client mirrors.
DEFAULT_VERSION = 407
DEFAULT_CONNECT_TIMEOUT = 3.0
#: MQAdminImpl's timeout for view/query calls, in seconds.
DEFAULT_TIMEOUT = 6.0


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` or a bare v6 address with the port after the last colon)."""
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConnectError(addr, "bad address (expected host:port)")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ConnectError(addr, "bad port")
    return host.strip("[]"), port


class RemotingConnection(asyncio.Protocol):
    """One TCP connection carrying pipelined requests, matched to responses by ``opaque``."""

    def __init__(self, addr: str, *, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.addr = addr
        self._decoder = FrameDecoder(max_frame_length=max_frame_length)
        self._transport: asyncio.Transport | None = None
        self._waiting: OpaqueMatcher[asyncio.Future[RemotingCommand]] = OpaqueMatcher()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._closed_reason: str | None = None
        self._write_ready: asyncio.Future[None] | None = None
        self._outbox: list[bytes | bytearray | memoryview] = []
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(
        cls,
        addr: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
    ) -> RemotingConnection:
        """Connect to ``addr`` (``host:port``) or raise ``ConnectError``."""
        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                _, protocol = await loop.create_connection(
                    lambda: cls(addr, max_frame_length=max_frame_length), host, port
                )
        except TimeoutError as exc:
            raise ConnectError(addr, f"connect timed out after {connect_timeout:g}s") from exc
        except OSError as exc:
            raise ConnectError(addr, f"connect failed: {exc.strerror or exc}") from exc
        return protocol

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it: no isinstance check.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self._shutdown(f"undecodable frame from server: {exc}")
            return
        match = self._waiting.match
        for cmd in commands:
            if not cmd.flag & RPC_TYPE_RESPONSE:
                continue  # a server-initiated request: this client serves nothing
            future = match(cmd.opaque)
            if future is None:
                continue  # the caller already timed out
            if not future.done():
                future.set_result(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        self._shutdown(f"connection closed: {exc}" if exc else "connection closed by peer")

    def pause_writing(self) -> None:
        if self._write_ready is None:
            self._write_ready = self._loop.create_future()

    def resume_writing(self) -> None:
        waiter, self._write_ready = self._write_ready, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- requests ---------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    async def request(self, cmd: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Send ``cmd`` (its ``opaque`` is assigned here) and wait for the matching response."""
        if self._write_ready is not None:
            await asyncio.shield(self._write_ready)
        if self._closed_reason is not None or self._transport is None:
            raise ConnectionClosedError(self.addr, self._closed_reason or "not connected")
        opaque = self._waiting.next_opaque()
        cmd.opaque = opaque
        parts = encode_frame_parts(cmd)  # before anything is registered: encoding may raise
        loop = self._loop
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        deadline = self._waiting.expect(opaque, future, timeout, loop.time())
        if deadline is not None and deadline < self._timer_at:
            self._arm_timer(deadline)
        self._enqueue(parts)
        try:
            return await future
        except asyncio.CancelledError:
            self._waiting.forget(opaque)
            raise

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send ``cmd`` with the oneway flag; no response is expected or awaited."""
        if self._closed_reason is not None or self._transport is None:
            raise ConnectionClosedError(self.addr, self._closed_reason or "not connected")
        cmd.opaque = self._waiting.next_opaque()
        cmd.flag |= RPC_ONEWAY
        self._enqueue(encode_frame_parts(cmd))

    def _enqueue(self, parts: tuple[bytes, Body | None]) -> None:
        """Queue the frame; everything queued during one loop iteration goes out in one write.

        Pipelined callers wake up together (their answers arrive in one read), so coalescing their
        requests saves a send() system call per request, which dominates the client's cost.
        """
        head, body = parts
        outbox = self._outbox
        if not outbox:
            self._loop.call_soon(self._flush)
        outbox.append(head)
        if body:
            outbox.append(body)

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        if self._transport is not None and self._closed_reason is None and outbox:
            self._transport.write(b"".join(outbox) if len(outbox) > 1 else outbox[0])

    def _arm_timer(self, deadline: float) -> None:
        """One timer per connection, at the earliest deadline of a request still waiting."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        # Everything due by the time this timer was set for (a loop may fire a timer a hair early).
        due = max(self._loop.time(), self._timer_at)
        self._timer = None
        self._timer_at = float("inf")
        for _, future, timeout in self._waiting.expire(due):
            if not future.done():
                future.set_exception(RequestTimeoutError(self.addr, f"no response within {timeout:g}s"))
        deadline = self._waiting.next_deadline()
        if deadline is not None:
            self._arm_timer(deadline)

    def _shutdown(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        if self._transport is not None:
            self._transport.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = float("inf")
        for future in self._waiting.drain():
            if not future.done():
                future.set_exception(ConnectionClosedError(self.addr, reason))
        self.resume_writing()

    def close(self) -> None:
        """Close the connection; requests still in flight fail with ``ConnectionClosedError``."""
        self._shutdown("connection closed by client")


class RemotingClient:
    """Requests to any number of servers, one lazily opened connection per address."""

    def __init__(
        self,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        rpc_hook: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self.serialize_type = serialize_type
        self.rpc_hook = rpc_hook
        self.language = language
        self.version = version
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_frame_length = max_frame_length
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Task[RemotingConnection]] = {}

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def make_request(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """A request command carrying this client's language, version and serialization.

        The ``rpc_hook`` (e.g. ``clients.acl.AclSigner``) sees it last, as Java's ``doBeforeRequest``.
        """
        request = RemotingCommand(
            code=int(code),
            language=self.language,
            version=self.version,
            opaque=0,
            flag=0,
            remark=None,
            ext_fields=dict(ext_fields) if ext_fields is not None else None,
            body=body,
            serialize_type=self.serialize_type,
        )
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        return request

    async def connection(self, addr: str) -> RemotingConnection:
        """The open connection to ``addr``, connecting (once, even if many callers ask) if needed."""
        conn = self._connections.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.ensure_future(self._open(addr))
            self._connecting[addr] = task
        return await asyncio.shield(task)

    async def _open(self, addr: str) -> RemotingConnection:
        try:
            conn = await RemotingConnection.open(
                addr, connect_timeout=self.connect_timeout, max_frame_length=self.max_frame_length
            )
            self._connections[addr] = conn
            return conn
        finally:
            self._connecting.pop(addr, None)

    async def invoke(
        self,
        addr: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        timeout: float | None = None,
    ) -> RemotingCommand:
        """Send one request to ``addr`` and return the server's response (any response code)."""
        conn = await self.connection(addr)
        request = self.make_request(code, ext_fields, body)
        return await conn.request(request, self.timeout if timeout is None else timeout)

    async def invoke_oneway(
        self, addr: str, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> None:
        """Send one oneway request to ``addr`` (never answered)."""
        conn = await self.connection(addr)
        conn.send_oneway(self.make_request(code, ext_fields, body))

    async def close(self) -> None:
        """Close every connection (requests in flight fail with ``ConnectionClosedError``)."""
        for task in list(self._connecting.values()):
            task.cancel()
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            conn.close()
        await asyncio.sleep(0)
