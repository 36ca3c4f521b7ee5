"""The TLS relay in front of grpcio (``server.grpc.relay``), against stand-in backends on loopback.

What a connection opens with decides where it goes (a whole ClientHello record to the TLS port, the
HTTP/2 preface to the plaintext one, anything else nowhere); the bytes are spliced unchanged both
ways with half closes passed on; grpcio's side learns the client's own address. And the bounds: a
partial ClientHello that stalls is dropped after the handshake timeout, idle connections are
bounded (the oldest still opening dropped first), a peer that never reads is cut off once its side
stays stalled, and the relay stops reading the other side meanwhile. Every test runs on asyncio's
loop and on uvloop (``BOTH_LOOPS`` in tests/server/conftest.py).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest

from server.grpc.relay import HTTP2_PREFACE, Opening, RelayPort, opening

#: A TLS handshake record holding a (made-up) ClientHello of 40 bytes.
HELLO_BODY = b"\x01" + bytes(range(39))
CLIENT_HELLO = b"\x16\x03\x01" + len(HELLO_BODY).to_bytes(2, "big") + HELLO_BODY


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"", None),
        (b"\x16", None),
        (b"\x16\x03\x01\x00", None),
        (CLIENT_HELLO[:-1], None),
        (CLIENT_HELLO, Opening.TLS),
        (CLIENT_HELLO + b"more", Opening.TLS),
        (b"\x16\x02", Opening.NOT_GRPC),  # not TLS 1.x / SSL 3
        (b"\x16\x03\x01\x00\x00", Opening.NOT_GRPC),  # an empty record
        (b"\x16\x03\x01\x40\x01", Opening.NOT_GRPC),  # longer than a plaintext record may be
        (b"\x16\x03\x01\x00\x28\x02", Opening.NOT_GRPC),  # a ServerHello
        (b"PRI * HTTP/2.0", None),
        (HTTP2_PREFACE, Opening.PLAINTEXT),
        (HTTP2_PREFACE + b"\x00\x00", Opening.PLAINTEXT),
        (b"GET / HTTP/1.1\r\n", Opening.NOT_GRPC),
        (b"PRX", Opening.NOT_GRPC),
        (b"\x00\x00\x00\x10", Opening.NOT_GRPC),  # a remoting frame
    ],
)
def test_what_the_first_bytes_open(head: bytes, expected: Opening | None) -> None:
    assert opening(head) is expected


class Backend:
    """A stand-in for one grpcio loopback port: echoes (or floods), records what it saw."""

    def __init__(self, flood: bool = False) -> None:
        self.flood = flood
        self.peers: list[tuple[str, int]] = []
        self.received = bytearray()
        self.ended = asyncio.Event()
        self.lost = asyncio.Event()
        self.paused_by_relay = False
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.peers.append(writer.get_extra_info("peername")[:2])
        try:
            if self.flood:
                chunk = b"x" * 65536
                while True:
                    writer.write(chunk)
                    started = time.monotonic()
                    try:
                        await writer.drain()
                    finally:
                        if time.monotonic() - started > 0.3:
                            self.paused_by_relay = True  # the relay stopped reading us for a while
            while data := await reader.read(65536):
                self.received += data
                writer.write(data)
                await writer.drain()
            self.ended.set()
            writer.write(b"bye")
            await writer.drain()
            writer.close()
        except ConnectionError:
            pass
        finally:
            self.lost.set()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def backends() -> AsyncIterator[tuple[Backend, Backend]]:
    tls, plaintext = Backend(), Backend()
    await tls.start()
    await plaintext.start()
    yield tls, plaintext
    tls.close()
    plaintext.close()


async def relay_for(
    tls: Backend,
    plaintext: Backend | None,
    *,
    handshake_timeout: float = 30.0,
    max_connections: int = 100,
    stall_timeout: float = 30.0,
) -> RelayPort:
    assert tls.server is not None
    relay = RelayPort(
        "127.0.0.1",
        0,
        tls_port=tls.server.sockets[0].getsockname()[1],
        plaintext_port=plaintext.server.sockets[0].getsockname()[1]
        if plaintext is not None and plaintext.server
        else None,
        handshake_timeout=handshake_timeout,
        max_connections=max_connections,
        stall_timeout=stall_timeout,
    )
    await relay.start()
    return relay


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the relay still sends before closing the connection; fails if it stays open."""
    try:
        return await asyncio.wait_for(reader.read(), seconds)
    except ConnectionError:
        return b""


async def test_each_opening_goes_to_its_port_spliced_both_ways(backends: tuple[Backend, Backend]) -> None:
    tls, plaintext = backends
    relay = await relay_for(tls, plaintext)
    try:
        for backend, first in ((plaintext, HTTP2_PREFACE), (tls, CLIENT_HELLO)):
            reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
            # sent in pieces: the opening is read whole before anything is forwarded
            for i in range(0, len(first), 7):
                writer.write(first[i : i + 7])
                await writer.drain()
            writer.write(b"after")
            assert await asyncio.wait_for(reader.readexactly(len(first) + 5), 5) == first + b"after"
            # grpcio's side sees the relay's loopback address; peer_of gives back the client's
            (seen,) = backend.peers
            assert relay.peer_of(seen) == writer.get_extra_info("sockname")[:2]
            assert seen != writer.get_extra_info("sockname")[:2]
            writer.write_eof()  # a half close reaches the backend, whose answer still comes back
            await asyncio.wait_for(backend.ended.wait(), 5)
            assert await asyncio.wait_for(reader.read(), 5) == b"bye"
            assert bytes(backend.received) == first + b"after"
            await asyncio.sleep(0.05)
            assert relay.peer_of(seen) == seen  # forgotten with its connection
            assert relay.connections == 0
            writer.close()
        assert relay.peer_of(("10.1.2.3", 4000)) == ("10.1.2.3", 4000)
    finally:
        relay.close()
        relay.abort_all()


async def test_a_partial_client_hello_that_stalls_is_dropped_after_the_handshake_timeout(
    backends: tuple[Backend, Backend],
) -> None:
    tls, plaintext = backends
    relay = await relay_for(tls, plaintext, handshake_timeout=0.5)
    try:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(CLIENT_HELLO[:20])
        await writer.drain()
        assert await closed_within(reader, 5) == b""
        assert 0.4 <= time.monotonic() - started < 3
        assert tls.peers == [] and plaintext.peers == []  # nothing was forwarded
        await asyncio.sleep(0.05)
        assert relay.connections == 0
        writer.close()
    finally:
        relay.close()
        relay.abort_all()


async def test_bytes_that_are_neither_and_plaintext_under_enforcing_are_refused_at_once(
    backends: tuple[Backend, Backend], caplog: pytest.LogCaptureFixture
) -> None:
    tls, _ = backends
    relay = await relay_for(tls, None)  # enforcing: no plaintext port
    try:
        for first in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", HTTP2_PREFACE):
            started = time.monotonic()
            reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
            writer.write(first)
            assert await closed_within(reader, 5) == b""
            assert time.monotonic() - started < 2  # not the 30 s handshake timeout
            writer.close()
        assert tls.peers == []
        said = [r.getMessage() for r in caplog.records if r.name == "server.grpc.relay"]
        assert len(said) == 2, said
        assert "neither TLS nor HTTP/2" in said[0]
        assert "--grpc-tls enforcing takes TLS clients only" in said[1]
    finally:
        relay.close()
        relay.abort_all()


async def test_idle_connections_are_bounded_the_oldest_opening_dropped_first(
    backends: tuple[Backend, Backend],
) -> None:
    tls, plaintext = backends
    relay = await relay_for(tls, plaintext, max_connections=3)
    idle = []
    try:
        for _ in range(6):
            idle.append(await asyncio.open_connection("127.0.0.1", relay.port))
            await asyncio.sleep(0.05)
            assert relay.connections <= 3
        # the first three were dropped to make room, the last three wait for their opening
        for reader, _ in idle[:3]:
            assert await closed_within(reader, 5) == b""
        assert relay.connections == 3
        # the waiting three open and are spliced: now a fourth is refused, they go on
        for reader, writer in idle[3:]:
            writer.write(HTTP2_PREFACE)
            assert await asyncio.wait_for(reader.readexactly(len(HTTP2_PREFACE)), 5) == HTTP2_PREFACE
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        assert await closed_within(reader, 5) == b""
        writer.close()
        for reader, writer in idle[3:]:
            writer.write(b"still")
            assert await asyncio.wait_for(reader.readexactly(5), 5) == b"still"
    finally:
        for _, writer in idle:
            writer.close()
        relay.close()
        relay.abort_all()


async def test_a_peer_that_never_reads_is_cut_off_and_its_backend_not_read_meanwhile() -> None:
    flood = Backend(flood=True)
    await flood.start()
    relay = await relay_for(flood, flood, stall_timeout=1.0)
    try:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.setblocking(False)
        await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", relay.port))
        await asyncio.get_running_loop().sock_sendall(client, HTTP2_PREFACE)
        # never read: the relay's buffer toward us fills, it stops reading the backend, whose own
        # buffer grows; after the stall timeout both connections are aborted
        await asyncio.wait_for(flood.lost.wait(), 10)
        assert flood.paused_by_relay
        await asyncio.sleep(0.05)
        assert relay.connections == 0
        client.close()
    finally:
        flood.close()
        relay.close()
        relay.abort_all()
