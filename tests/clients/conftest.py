"""Fixtures for the clients tests: a fake peer replaying real broker frames, the real server, UTC time.

The fake peer is a plain asyncio server on 127.0.0.1 (port 0). Its answers are the response frames a
real Java 4.9.7 name server and broker wrote in ``vectors/wire/<scenario>/`` (matched to a request by
its code), re-stamped with the request's opaque; route bodies are rewritten to point at the fake
itself so the client's second hop (to the "broker") comes back to it too.

The real server (``server.app.QueryServer``) serves a private copy of the Java-written store, either
on the test's own loop (library tests) or on a loop in a thread (CLI tests, which call asyncio.run).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, decode_frame, encode_frame
from protocol.opaque_matcher import OpaqueMatcher
from server.app import QueryServer
from tests.support.java_store import JAVA_STORE, open_java_store, server_settings

Handler = Callable[[RemotingCommand], "RemotingCommand | bytes | None"]


class FakePeer:
    """A remoting server whose every answer comes from ``handler`` (None = stay silent)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[RemotingCommand] = []
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.addr = ""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.addr = f"127.0.0.1:{port}"
        return self.addr

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for request in decoder.feed(data):
                    self.requests.append(request)
                    answer = self.handler(request)
                    if answer is None:
                        continue
                    if isinstance(answer, bytes):
                        writer.write(answer)
                    else:
                        answer.opaque = request.opaque
                        writer.write(encode_frame(answer))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)


def load_scenario(vectors_dir: Path, scenario: str) -> dict[int, list[RemotingCommand]]:
    """The real responses of a wire scenario, by the code of the request they answered."""
    folder = vectors_dir / "wire" / scenario
    frames = json.loads((folder / "frames.json").read_text(encoding="utf-8"))
    by_code: dict[int, list[RemotingCommand]] = {}
    waiting: dict[str, OpaqueMatcher[int]] = {}  # per connection (the requester's address)
    for frame in frames:
        header = frame["header"]
        if header["flag"] & 1 == 0:
            waiting.setdefault(frame["src"], OpaqueMatcher()).expect(header["opaque"], header["code"])
            continue
        requester = waiting.get(frame["dst"])
        code = requester.match(header["opaque"]) if requester is not None else None
        if code is not None:
            by_code.setdefault(code, []).append(decode_frame((folder / frame["file"]).read_bytes()))
    return by_code


def scenario_handler(
    vectors_dir: Path, scenario: str, addr_ref: list[str], broker_addr: str = "127.0.0.1:10911"
) -> Handler:
    """Answer each request with the scenario's real response to a request of the same code."""
    by_code = load_scenario(vectors_dir, scenario)

    def handle(request: RemotingCommand) -> RemotingCommand | None:
        answers = by_code.get(request.code)
        if not answers:
            return None
        answer = answers[-1]
        body = answer.body
        if request.code == 105 and body:
            body = bytes(body).replace(broker_addr.encode(), addr_ref[0].encode())
        return RemotingCommand(
            code=answer.code,
            language=answer.language,
            version=answer.version,
            flag=answer.flag,
            remark=answer.remark,
            ext_fields=dict(answer.ext_fields) if answer.ext_fields is not None else None,
            body=body,
            serialize_type=request.serialize_type,
        )

    return handle


@pytest.fixture
async def fake_peer() -> AsyncIterator[Callable[[Handler], asyncio.Future[FakePeer]]]:
    """``await fake_peer(handler)`` starts a FakePeer; all are stopped after the test."""
    peers: list[FakePeer] = []

    async def start(handler: Handler) -> FakePeer:
        peer = FakePeer(handler)
        await peer.start()
        peers.append(peer)
        return peer

    yield start  # type: ignore[misc]
    for peer in peers:
        await peer.stop()


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run in UTC, the zone the golden mqadmin output was printed in (Java prints local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class ThreadedPeer:
    """A FakePeer on its own event loop in a thread, for tests that run the (blocking) CLI."""

    def __init__(self, make_handler: Callable[[list[str]], Handler]) -> None:
        self._addr_ref: list[str] = [""]
        self._handler = make_handler(self._addr_ref)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.peer = FakePeer(self._handler)

    def start(self) -> str:
        self._thread.start()
        addr = asyncio.run_coroutine_threadsafe(self.peer.start(), self._loop).result(5)
        self._addr_ref[0] = addr
        return addr

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.peer.stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@pytest.fixture
def threaded_peer() -> Iterator[Callable[[Callable[[list[str]], Handler]], ThreadedPeer]]:
    """``threaded_peer(make_handler)`` starts a ThreadedPeer; ``make_handler`` gets its address ref."""
    peers: list[ThreadedPeer] = []

    def start(make_handler: Callable[[list[str]], Handler]) -> ThreadedPeer:
        peer = ThreadedPeer(make_handler)
        peer.start()
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.stop()


@pytest.fixture
def scenario_peer(fake_peer, vectors_dir: Path):
    """``await scenario_peer(name, wrap=None, route_to=None)``: a FakePeer replaying a wire scenario.

    ``wrap(real_handler)`` may return a handler that changes some answers; ``route_to`` overrides the
    broker address written into route answers (default: the peer itself).
    """

    async def start(scenario: str, wrap=None, route_to: str | None = None) -> FakePeer:
        ref = [route_to or ""]
        handler = scenario_handler(vectors_dir, scenario, ref)
        peer = await fake_peer(wrap(handler) if wrap else handler)
        if route_to is None:
            ref[0] = peer.addr
        return peer

    return start


@pytest.fixture
def replay(threaded_peer, vectors_dir: Path) -> Callable[..., str]:
    """``replay(scenario, wrap=None)``: the address of a threaded peer replaying that wire scenario.

    ``wrap(real_handler, addr_ref)`` may return a handler that changes some answers.
    """

    def start(scenario: str, wrap=None) -> str:
        def make(ref: list[str]) -> Handler:
            handler = scenario_handler(vectors_dir, scenario, ref)
            return wrap(handler, ref) if wrap else handler

        return threaded_peer(make).peer.addr

    return start


@pytest.fixture(scope="session")
def java_store_copy(stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the Java-written store (nothing may ever write under tests/golden)."""
    root = tmp_path_factory.mktemp("clients-java-store")
    shutil.copytree(stores_dir / JAVA_STORE, root / JAVA_STORE)
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", root / f"{JAVA_STORE}.broker.conf")
    return root / JAVA_STORE


@pytest.fixture(scope="session")
def java_expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{JAVA_STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture
async def java_server(java_store_copy: Path) -> AsyncIterator[QueryServer]:
    """The real QueryServer over the Java store, on this test's event loop (127.0.0.1, port 0)."""
    store = open_java_store(java_store_copy)
    server = QueryServer(store, server_settings(store))
    await server.start()
    yield server
    await server.stop()
    store.close()


class ThreadedServer:
    """The real QueryServer on its own event loop in a thread, for tests that run the blocking CLI."""

    def __init__(self, store_dir: Path) -> None:
        self._store = open_java_store(store_dir)
        self.server = QueryServer(self._store, server_settings(self._store))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> str:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._store.close()


@pytest.fixture(scope="module")
def served_java_store(java_store_copy: Path) -> Iterator[str]:
    """Address of a real QueryServer (threaded) serving the Java store, shared by a test module."""
    threaded = ThreadedServer(java_store_copy)
    addr = threaded.start()
    yield addr
    threaded.stop()
