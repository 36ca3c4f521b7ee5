"""RemotingClient: opaque multiplexing, one connection per address, timeouts and typed failures."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from clients.client import RemotingClient, RemotingConnection, parse_addr
from clients.errors import ConnectError, ConnectionClosedError, RequestTimeoutError
from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.frame import FrameDecoder, encode_frame


def _echo(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(0, remark=(request.ext_fields or {}).get("n"))


async def test_requests_are_matched_by_opaque_when_answered_in_reverse_order() -> None:
    count = 20
    seen: list[RemotingCommand] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while len(seen) < count:
            seen.extend(decoder.feed(await reader.read(65536)))
        for request in reversed(seen):
            writer.write(encode_frame(_echo(request)))
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with RemotingClient() as client:
        answers = await asyncio.gather(*(client.invoke(addr, 12, {"n": str(i)}) for i in range(count)))
    server.close()
    assert [a.remark for a in answers] == [str(i) for i in range(count)]
    assert len({r.opaque for r in seen}) == count
    assert all(r.language == LanguageCode.PYTHON and r.version == 407 for r in seen)


async def test_one_connection_per_address_even_for_concurrent_first_use(fake_peer) -> None:
    peer = await fake_peer(_echo)
    async with RemotingClient() as client:
        await asyncio.gather(*(client.invoke(peer.addr, 33, {"n": "x"}) for _ in range(10)))
        await client.invoke(peer.addr, 33)
    assert peer.connections == 1
    assert len(peer.requests) == 11


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_requests_travel_in_the_chosen_serialization(fake_peer, serialize: SerializeType) -> None:
    peer = await fake_peer(_echo)
    async with RemotingClient(serialize_type=serialize) as client:
        answer = await client.invoke(peer.addr, 12, {"topic": "T", "n": "ключ"}, body=b"\x00\x01")
    request = peer.requests[0]
    assert request.serialize_type == serialize
    assert request.ext_fields == {"topic": "T", "n": "ключ"}
    assert bytes(request.body or b"") == b"\x00\x01"
    assert answer.remark == "ключ" and answer.is_response


async def test_silent_server_times_out_and_late_answers_are_dropped(fake_peer) -> None:
    calls = 0

    def first_silent(request: RemotingCommand) -> RemotingCommand | None:
        nonlocal calls
        calls += 1
        return None if calls == 1 else _echo(request)

    peer = await fake_peer(first_silent)
    async with RemotingClient() as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await client.invoke(peer.addr, 12, timeout=0.2)
        assert time.monotonic() - started < 2
        conn = await client.connection(peer.addr)
        assert conn.in_flight == 0
        assert (await client.invoke(peer.addr, 12, {"n": "2"})).remark == "2"


async def test_refused_connection_is_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with RemotingClient(connect_timeout=2) as client:
        with pytest.raises(ConnectError) as info:
            await client.invoke(f"127.0.0.1:{port}", 12)
    assert info.value.addr == f"127.0.0.1:{port}"


async def test_connection_lost_fails_every_request_in_flight_and_reconnects(fake_peer) -> None:
    drop = True

    def handler(request: RemotingCommand) -> RemotingCommand | bytes | None:
        if drop and (request.ext_fields or {}).get("n") == "close":
            raise ConnectionResetError  # the fake closes the socket
        return None if drop else _echo(request)

    peer = await fake_peer(handler)
    async with RemotingClient() as client:
        waiting = [asyncio.ensure_future(client.invoke(peer.addr, 12, {"n": str(i)})) for i in range(3)]
        await asyncio.sleep(0.05)
        closer = asyncio.ensure_future(client.invoke(peer.addr, 12, {"n": "close"}))
        results = await asyncio.wait_for(asyncio.gather(*waiting, closer, return_exceptions=True), 5)
        assert all(isinstance(r, ConnectionClosedError) for r in results)
        drop = False
        assert (await client.invoke(peer.addr, 12, {"n": "again"})).remark == "again"
    assert peer.connections == 2


async def test_undecodable_frame_closes_the_connection(fake_peer) -> None:
    peer = await fake_peer(lambda request: struct.pack(">i", -5) + b"junk")
    async with RemotingClient() as client:
        with pytest.raises(ConnectionClosedError) as info:
            await asyncio.wait_for(client.invoke(peer.addr, 12), 5)
    assert "undecodable frame" in str(info.value)


async def test_server_initiated_requests_are_ignored(fake_peer) -> None:
    def handler(request: RemotingCommand) -> bytes:
        push = RemotingCommand(code=40, opaque=request.opaque)  # same opaque, but a request
        return encode_frame(push) + encode_frame(_echo(request))

    peer = await fake_peer(handler)
    async with RemotingClient() as client:
        answer = await client.invoke(peer.addr, 12, {"n": "ok"})
    assert answer.code == 0 and answer.remark == "ok"


async def test_oneway_sets_the_flag_and_expects_nothing(fake_peer) -> None:
    peer = await fake_peer(lambda request: None)
    async with RemotingClient() as client:
        await client.invoke_oneway(peer.addr, 35, {"clientID": "c"})
        for _ in range(100):
            if peer.requests:
                break
            await asyncio.sleep(0.01)
    assert peer.requests[0].is_oneway


async def test_closing_the_client_fails_requests_in_flight(fake_peer) -> None:
    peer = await fake_peer(lambda request: None)
    client = RemotingClient()
    pending = asyncio.ensure_future(client.invoke(peer.addr, 12))
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(pending, 5)


async def test_a_closed_connection_refuses_new_requests(fake_peer) -> None:
    peer = await fake_peer(_echo)
    conn = await RemotingConnection.open(peer.addr)
    conn.close()
    with pytest.raises(ConnectionClosedError):
        await conn.request(RemotingCommand(code=12))


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        ("127.0.0.1:10911", ("127.0.0.1", 10911)),
        ("[::1]:10911", ("::1", 10911)),
        ("fd00::1:9876", ("fd00::1", 9876)),
        (" host.example:1 ", ("host.example", 1)),
    ],
)
def test_parse_addr(addr: str, expected: tuple[str, int]) -> None:
    assert parse_addr(addr) == expected


@pytest.mark.parametrize("addr", ["", "127.0.0.1", "127.0.0.1:", ":10911", "h:port", "h:0", "h:70000"])
def test_parse_addr_rejects_bad_addresses(addr: str) -> None:
    with pytest.raises(ConnectError):
        parse_addr(addr)


class _RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True


async def test_frames_queued_in_one_iteration_leave_in_one_write_and_answers_may_trickle() -> None:
    conn = RemotingConnection("127.0.0.1:1")
    transport = _RecordingTransport()
    conn.connection_made(transport)
    calls = [asyncio.ensure_future(conn.request(RemotingCommand(code=33), 5)) for _ in range(5)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(transport.writes) == 1
    requests = FrameDecoder().feed(transport.writes[0])
    assert len(requests) == 5 and len({r.opaque for r in requests}) == 5
    answers = b"".join(encode_frame(_echo_opaque(r)) for r in reversed(requests))
    for i in range(len(answers)):  # one byte at a time
        conn.data_received(answers[i : i + 1])
    results = await asyncio.gather(*calls)
    assert [r.remark for r in results] == [str(r.opaque) for r in requests]
    assert conn.in_flight == 0


def _echo_opaque(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(0, remark=str(request.opaque))


async def test_requests_wait_while_the_transport_is_paused() -> None:
    conn = RemotingConnection("127.0.0.1:1")
    transport = _RecordingTransport()
    conn.connection_made(transport)
    conn.pause_writing()
    call = asyncio.ensure_future(conn.request(RemotingCommand(code=33), 5))
    for _ in range(3):
        await asyncio.sleep(0)
    assert transport.writes == [] and not call.done()
    conn.resume_writing()
    for _ in range(3):
        await asyncio.sleep(0)
    (request,) = FrameDecoder().feed(transport.writes[0])
    conn.data_received(encode_frame(_echo_opaque(request)))
    assert (await call).remark == str(request.opaque)


async def test_connection_lost_while_paused_fails_the_waiting_request() -> None:
    conn = RemotingConnection("127.0.0.1:1")
    conn.connection_made(_RecordingTransport())
    conn.pause_writing()
    call = asyncio.ensure_future(conn.request(RemotingCommand(code=33), 5))
    await asyncio.sleep(0)
    conn.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(ConnectionClosedError, match="reset"):
        await call


async def test_a_request_that_cannot_be_encoded_leaves_nothing_behind() -> None:
    conn = RemotingConnection("127.0.0.1:1")
    transport = _RecordingTransport()
    conn.connection_made(transport)
    too_long = RemotingCommand(code=12, remark="x" * (1 << 24))  # header length beyond 24 bits
    with pytest.raises(ProtocolError):
        await conn.request(too_long, 0.05)
    assert conn.in_flight == 0
    await asyncio.sleep(0.1)
    assert transport.writes == []


async def test_a_shorter_timeout_after_a_longer_one_expires_first_and_alone() -> None:
    """One timer per connection: a later request with a shorter timeout moves it earlier, and the
    expiry of one request leaves the others waiting (and answerable)."""
    conn = RemotingConnection("127.0.0.1:1")
    transport = _RecordingTransport()
    conn.connection_made(transport)
    patient = asyncio.ensure_future(conn.request(RemotingCommand(code=33), 30))
    await asyncio.sleep(0)
    hasty = asyncio.ensure_future(conn.request(RemotingCommand(code=33), 0.05))
    with pytest.raises(RequestTimeoutError, match=r"no response within 0\.05s"):
        await asyncio.wait_for(hasty, 2)
    assert not patient.done() and conn.in_flight == 1
    first = FrameDecoder().feed(b"".join(transport.writes))[0]
    conn.data_received(encode_frame(_echo_opaque(first)))
    assert (await patient).remark == str(first.opaque)
    assert conn.in_flight == 0
    conn.close()
