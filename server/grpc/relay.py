"""The public gRPC port with TLS on: a relay that tells TLS from plaintext clients by their first bytes.

grpcio serves a port either with TLS or without, never both, while the 5.x Proxy's default
(``permissive``) takes both on one port. So with TLS on, grpcio listens on loopback only (a TLS
port and, in permissive mode, a plaintext one) and this relay owns the public port: it reads a new
connection's opening (``opening``: a whole TLS ClientHello record starting 0x16 0x03, or the HTTP/2
client preface), connects to the grpcio port that speaks it, forwards the bytes read so far, then
splices the two connections byte for byte. TLS is grpcio's own end to end (ALPN, client
certificates); the relay never sees a clear byte of a TLS connection.

Bounds, each ending in a close:

- opening: ``handshake_timeout`` seconds for the opening to arrive (a partial ClientHello that
  stalls is dropped), at most one TLS record (5 + 16 KiB) held; anything else is refused at once
  (one log line per burst, ``BurstLog``): bytes that are neither, plaintext under ``enforcing`` (the
  client sees its connection closed: an HTTP/2 GOAWAY saying why would only make grpc clients
  reconnect at once, over and over, until their deadline);
- connections: at most ``max_connections``; one more drops the oldest still in its opening, or is
  refused when all have opened;
- backpressure both ways: a side whose write buffer passes ``HIGH_WATER`` pauses reading on the
  other side until it drains, so the relay holds at most that much per direction; a side paused for
  ``stall_timeout`` (its reader never reads) has both connections aborted;
- closes: an end of input is passed on as a half close (``write_eof``); a side lost closes the
  other once its buffered bytes are written, or aborts it ``LINGER`` seconds later.

grpcio sees every relayed connection as coming from loopback; ``peer_of`` gives back the client's
own address for the relay's local port, which the service uses wherever it names a peer (ACL
address rules, a consumer's client address, a message's born host).
"""

from __future__ import annotations

import asyncio
import logging
from enum import Enum
from typing import cast

from server.burst_log import BurstLog

log = logging.getLogger(__name__)

#: What an HTTP/2 client sends first (RFC 9113 3.4); a gRPC plaintext client opens with it.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: A TLS record's header: content type (22 = handshake), version (3, x), length.
TLS_HANDSHAKE = 0x16
TLS_RECORD_HEADER = 5
#: The largest plaintext TLS record (RFC 8446 5.1); a ClientHello record is one.
MAX_TLS_RECORD = 1 << 14
#: The handshake message type of a ClientHello.
CLIENT_HELLO = 1
#: Bytes one side may have waiting to be written before the other side stops being read.
HIGH_WATER = 256 * 1024
#: Seconds a closing side gets to write what it holds once its partner is gone.
LINGER = 5.0


class Opening(Enum):
    TLS = "TLS"
    PLAINTEXT = "plaintext"
    NOT_GRPC = "not gRPC"


def opening(head: bytes | bytearray) -> Opening | None:
    """What the first bytes of a connection open; None while more are needed to tell.

    TLS: a whole first record, a handshake record (0x16 0x03) holding a ClientHello; plaintext: the
    whole HTTP/2 preface. Anything else (a record too long to be a ClientHello's, another protocol)
    is NOT_GRPC as soon as a byte says so."""
    if not head:
        return None
    if head[0] == TLS_HANDSHAKE:
        if len(head) >= 2 and head[1] != 0x03:
            return Opening.NOT_GRPC
        if len(head) < TLS_RECORD_HEADER:
            return None
        length = int.from_bytes(head[3:5], "big")
        if length == 0 or length > MAX_TLS_RECORD:
            return Opening.NOT_GRPC
        if len(head) > TLS_RECORD_HEADER and head[TLS_RECORD_HEADER] != CLIENT_HELLO:
            return Opening.NOT_GRPC
        return Opening.TLS if len(head) >= TLS_RECORD_HEADER + length else None
    shown = bytes(head[: len(HTTP2_PREFACE)])
    if not HTTP2_PREFACE.startswith(shown):
        return Opening.NOT_GRPC
    return Opening.PLAINTEXT if len(shown) == len(HTTP2_PREFACE) else None


class RelayPort:
    """The public port: accepts, reads openings, splices each connection to a grpcio port."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls_port: int,
        plaintext_port: int | None,
        handshake_timeout: float,
        max_connections: int,
        stall_timeout: float,
        backlog: int = 1024,
    ) -> None:
        self.host = host
        self.port = port
        #: grpcio's loopback ports: TLS, and plaintext (None: plaintext refused, ``enforcing``).
        self.targets = {Opening.TLS: tls_port, Opening.PLAINTEXT: plaintext_port}
        self.handshake_timeout = handshake_timeout
        self.max_connections = max_connections
        self.stall_timeout = stall_timeout
        self.backlog = backlog
        self._server: asyncio.AbstractServer | None = None
        #: Every open client connection; those still in their opening, oldest first.
        self._open: set[_Front] = set()
        self._opening: dict[_Front, None] = {}
        #: The relay's local port toward grpcio -> the client's (host, port).
        self._peers: dict[int, tuple[str, int]] = {}
        self._refusals = {
            "plaintext": BurstLog(log),
            "not gRPC": BurstLog(log),
            "timeout": BurstLog(log),
            "limit": BurstLog(log),
            "backend": BurstLog(log),
            "stalled": BurstLog(log),
        }

    async def start(self) -> int:
        """Listen; the bound port (the one picked for port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Front(self), self.host or None, self.port, backlog=self.backlog, reuse_port=False
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        """Stop accepting; connections already spliced go on until grpcio closes them."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def abort_all(self) -> None:
        """Drop every connection still open (the end of a stop)."""
        for front in list(self._open):
            front.abort()

    @property
    def connections(self) -> int:
        return len(self._open)

    def peer_of(self, address: tuple[str, int]) -> tuple[str, int]:
        """The client behind a connection grpcio sees from ``address`` (itself if not relayed)."""
        if address[0] == "127.0.0.1":
            return self._peers.get(address[1], address)
        return address

    # -- bookkeeping for _Front / _Back -----------------------------------------------------------

    def _admit(self, front: _Front) -> bool:
        if len(self._open) >= self.max_connections:
            if not self._opening:
                self._refuse(
                    "limit", "refused a gRPC connection from %s: %d connections open", front, len(self._open)
                )
                return False
            oldest = next(iter(self._opening))
            self._refuse(
                "limit",
                "dropped a gRPC connection from %s still in its opening: %d connections open",
                oldest,
                len(self._open),
            )
            self._forget(oldest)
            oldest.abort()
        self._open.add(front)
        self._opening[front] = None
        return True

    def _opened(self, front: _Front) -> None:
        self._opening.pop(front, None)

    def _forget(self, front: _Front) -> None:
        self._open.discard(front)
        self._opening.pop(front, None)

    def _refuse(self, kind: str, message: str, front: _Front, *more: object) -> None:
        """One log line per burst of ``kind``: ``message % (front's peer, *more)``."""
        self._refusals[kind].event(message, front.peer_text, *more)


class _Side(asyncio.Protocol):
    """What both ends of a splice share: the partner, backpressure, the stall timer."""

    transport: asyncio.Transport | None
    partner: _Side | None

    def __init__(self, relay: RelayPort) -> None:
        self.relay = relay
        self.transport = None
        self.partner = None
        self.lost = False
        self.ended = False  # the peer of this side ended its input
        self._stall: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not ``asyncio.Transport`` subclasses, but have its methods
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        partner = self.partner
        if partner is not None and partner.transport is not None and not partner.lost:
            partner.transport.write(data)

    def eof_received(self) -> bool:
        self.ended = True
        partner = self.partner
        if partner is None or partner.lost or partner.transport is None:
            return False
        if partner.ended or not partner.transport.can_write_eof():
            partner.close()
            return False
        partner.transport.write_eof()
        return True  # still open for what the partner sends back

    def pause_writing(self) -> None:
        # our peer is not reading what the partner sends: stop reading the partner
        partner = self.partner
        if partner is not None and partner.transport is not None and not partner.lost:
            partner.transport.pause_reading()
        if self._stall is None and self.relay.stall_timeout > 0:
            loop = asyncio.get_running_loop()
            self._stall = loop.call_later(self.relay.stall_timeout, self._stalled)

    def resume_writing(self) -> None:
        partner = self.partner
        if partner is not None and partner.transport is not None and not partner.lost:
            partner.transport.resume_reading()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _stalled(self) -> None:
        self._stall = None
        front = self if isinstance(self, _Front) else self.partner
        if isinstance(front, _Front):
            self.relay._refuse(
                "stalled", "dropped a gRPC connection from %s: no bytes read for the stall timeout", front
            )
        self.abort()
        if self.partner is not None:
            self.partner.abort()

    def close(self) -> None:
        """Close once what is buffered is written; abort if that takes longer than ``LINGER``."""
        if self.lost or self.transport is None:
            return
        self.transport.close()
        if self._linger is None and self.transport.get_write_buffer_size():
            self._linger = asyncio.get_running_loop().call_later(LINGER, self.abort)

    def abort(self) -> None:
        if not self.lost and self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        for timer in (self._stall, self._linger):
            if timer is not None:
                timer.cancel()
        self._stall = self._linger = None
        if self.partner is not None:
            self.partner.close()


class _Front(_Side):
    """A client's connection to the public port."""

    def __init__(self, relay: RelayPort) -> None:
        super().__init__(relay)
        self.head = bytearray()
        self.peer: tuple[str, int] = ("", 0)
        self._deadline: asyncio.TimerHandle | None = None
        self._connecting: asyncio.Task[None] | None = None

    @property
    def peer_text(self) -> str:
        return f"{self.peer[0]}:{self.peer[1]}"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        address = transport.get_extra_info("peername")
        if isinstance(address, tuple) and len(address) >= 2:
            self.peer = (str(address[0]), int(address[1]))
        if not self.relay._admit(self):
            self.abort()
            return
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self.relay.handshake_timeout, self._opening_timed_out)

    def data_received(self, data: bytes) -> None:
        if self.partner is not None and self.partner.transport is not None:
            super().data_received(data)
            return
        self.head += data
        if self._connecting is not None:
            return  # reading is paused; what was already on its way waits with the head
        kind = opening(self.head)
        if kind is None:
            return
        target = self.relay.targets.get(kind)
        if kind is Opening.NOT_GRPC:
            self.relay._refuse(
                "not gRPC", "refused a connection from %s to the gRPC port: neither TLS nor HTTP/2", self
            )
            self.abort()
        elif target is None:
            self.relay._refuse(
                "plaintext",
                "refused a plaintext gRPC connection from %s: --grpc-tls enforcing takes TLS clients only",
                self,
            )
            self.abort()
        else:
            assert self.transport is not None
            self.transport.pause_reading()
            self._connecting = asyncio.get_running_loop().create_task(self._connect(target))

    async def _connect(self, target: int) -> None:
        loop = asyncio.get_running_loop()
        back = _Back(self.relay, self)
        try:
            await loop.create_connection(lambda: back, "127.0.0.1", target)
        except OSError as exc:
            self.relay._refusals["backend"].event(
                "cannot relay a gRPC connection from %s to grpcio on 127.0.0.1:%d: %s",
                self.peer_text,
                target,
                exc,
            )
            self.abort()
            return
        if self.lost:
            back.close()
            return
        self.partner = back
        self.relay._opened(self)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        assert back.transport is not None and self.transport is not None
        back.transport.write(bytes(self.head))
        self.head = bytearray()
        if self.ended:  # the client ended its input while the relay connected
            if back.transport.can_write_eof():
                back.transport.write_eof()
        else:
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.partner is None:
            self.ended = True
            if self._connecting is None:
                return False  # ended before showing what it speaks
            return True
        return super().eof_received()

    def _opening_timed_out(self) -> None:
        self._deadline = None
        if self.partner is None and not self.lost:
            self.relay._refuse(
                "timeout",
                "dropped a gRPC connection from %s: no TLS ClientHello or HTTP/2 preface in the handshake "
                "timeout",
                self,
            )
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._connecting is not None and self.partner is None:
            self._connecting.cancel()  # no one left to relay for
        self.relay._forget(self)
        super().connection_lost(exc)


class _Back(_Side):
    """The relay's connection to a grpcio loopback port, on behalf of one client."""

    def __init__(self, relay: RelayPort, front: _Front) -> None:
        super().__init__(relay)
        self.partner = front
        self._local_port = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        local = transport.get_extra_info("sockname")
        front = self.partner
        if isinstance(local, tuple) and isinstance(front, _Front):
            self._local_port = int(local[1])
            self.relay._peers[self._local_port] = front.peer

    def connection_lost(self, exc: Exception | None) -> None:
        front = self.partner
        if self._local_port and isinstance(front, _Front):
            if self.relay._peers.get(self._local_port) == front.peer:
                del self.relay._peers[self._local_port]
        super().connection_lost(exc)
