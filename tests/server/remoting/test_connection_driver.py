"""RemotingConnection driven by hand over a recording transport: the paths through its state machine
that a real socket makes hard to reach on purpose (the peer stops reading exactly before a malformed
frame, EOF with and without work in flight, a refused event), checked call by call.

The behaviour over real sockets is in test_connection.py; the state machine alone in
tests/protocol/test_connection_state.py.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from protocol.codes import RPC_ONEWAY, ResponseCode
from protocol.command import RemotingCommand
from protocol.connection_state import State
from protocol.errors import ConnectionStateError
from protocol.frame import FrameDecoder, encode_frame
from server.remoting.connection import RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.peer import CURRENT_PEER
from tests.support.request_path import Recorder as RecordingTransport

ECHO, SLOW = 9001, 9002
GARBAGE = struct.pack(">i", -5) + b"\0" * 8


class Recorder(RecordingTransport):
    """The transport calls a connection makes, in order, each write among them (answers decoded back
    into commands)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[RemotingCommand] = []
        self._decoder = FrameDecoder()
        self._decoded = 0

    def _wrote(self) -> None:
        super()._wrote()
        self.calls.append("write")
        self.answers.extend(self._decoder.feed(bytes(self.data[self._decoded :])))
        self._decoded = len(self.data)


def request(code: int, opaque: int, flag: int = 0) -> RemotingCommand:
    return RemotingCommand(code=code, opaque=opaque, flag=flag)


def make() -> tuple[RemotingConnection, Recorder, asyncio.Event, list[object]]:
    release = asyncio.Event()
    peers: list[object] = []
    dispatcher = Dispatcher()

    def echo(req: RemotingCommand) -> RemotingCommand:
        peers.append(CURRENT_PEER.get())
        return req.make_response(ResponseCode.SUCCESS, remark=str(req.opaque))

    async def slow(req: RemotingCommand) -> RemotingCommand:
        await release.wait()
        peers.append(CURRENT_PEER.get())  # the task copied the context it was created in
        return req.make_response(ResponseCode.SUCCESS, remark="slow")

    dispatcher.register(ECHO, echo)
    dispatcher.register(SLOW, slow)
    connection = RemotingConnection(dispatcher, idle_timeout=0)
    transport = Recorder()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport, release, peers


async def test_a_batch_is_answered_in_one_write_with_the_peer_set_for_each_processor() -> None:
    connection, transport, _, peers = make()
    frames = [request(ECHO, 1), request(ECHO, 2, flag=RPC_ONEWAY), request(ECHO, 3)]
    connection.data_received(b"".join(encode_frame(f) for f in frames))
    assert transport.calls == ["write"]
    assert [a.opaque for a in transport.answers] == [1, 3]  # the oneway one ran, unanswered
    assert peers == [("10.0.0.7", 40001)] * 3
    assert CURRENT_PEER.get() is None  # reset after the batch
    assert connection.state is State.OPEN


async def test_a_malformed_frame_while_the_peer_is_not_reading_is_answered_once_it_reads() -> None:
    connection, transport, _, _ = make()
    connection.pause_writing()
    assert transport.calls == ["pause_reading"] and connection.writing_paused
    connection.data_received(encode_frame(request(ECHO, 1)) + encode_frame(request(ECHO, 2)) + GARBAGE)
    assert connection.state is State.DRAINING_PEER_NOT_READING
    assert transport.answers == [] and connection.in_flight == 2
    connection.data_received(encode_frame(request(ECHO, 3)))  # nothing more is read
    assert connection.in_flight == 2
    connection.resume_writing()
    assert [a.opaque for a in transport.answers] == [1, 2]
    assert transport.calls == ["pause_reading", "write", "close"]  # never resumed reading
    assert connection.state is State.CLOSING


async def test_the_peer_reading_again_answers_the_backlog_then_resumes_reading() -> None:
    connection, transport, _, _ = make()
    connection.pause_writing()
    connection.data_received(encode_frame(request(ECHO, 1)))
    assert transport.answers == []
    connection.resume_writing()
    assert [a.opaque for a in transport.answers] == [1]
    assert transport.calls == ["pause_reading", "write", "resume_reading"]
    assert connection.state is State.OPEN


async def test_eof_with_work_in_flight_answers_it_then_closes_and_without_lets_the_transport_close() -> None:
    connection, transport, release, peers = make()
    connection.data_received(encode_frame(request(SLOW, 1)))
    assert connection.eof_received() is True  # keep the write side open for the answer
    assert connection.state is State.DRAINING
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert [a.remark for a in transport.answers] == ["slow"]
    assert peers == [("10.0.0.7", 40001)]
    assert transport.calls == ["write", "close"]

    idle, idle_transport, _, _ = make()
    assert idle.eof_received() is False  # nothing to answer: the transport closes itself
    assert idle.state is State.CLOSING and idle_transport.calls == []


async def test_shutdown_with_nothing_in_flight_closes_at_once() -> None:
    connection, transport, _, _ = make()
    stopping = asyncio.ensure_future(connection.shutdown(5))
    await asyncio.sleep(0)
    assert transport.calls == ["pause_reading", "close"]
    connection.connection_lost(None)
    await asyncio.wait_for(stopping, 1)
    assert connection.state is State.CLOSED


async def test_an_answer_finishing_after_the_close_is_not_written() -> None:
    connection, transport, release, _ = make()
    connection.data_received(encode_frame(request(SLOW, 1)))
    connection.close()
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert transport.calls == ["close"]


async def test_an_event_the_state_does_not_allow_is_refused() -> None:
    connection, transport, _, _ = make()
    with pytest.raises(ConnectionStateError, match="'connected' is not allowed in state 'open'"):
        connection.connection_made(transport)  # type: ignore[arg-type]
    with pytest.raises(ConnectionStateError, match="'peer reading' is not allowed in state 'open'"):
        connection.resume_writing()
    connection.connection_lost(None)
    with pytest.raises(ConnectionStateError, match="'lost' is not allowed in state 'closed'"):
        connection.connection_lost(None)
