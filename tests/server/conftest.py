"""Fixtures for the server tests: a copy of the Java-written store, a live server, a raw client.

The Java store is copied once per session (nothing may write under tests/golden) and opened read-only;
each test gets its own server on 127.0.0.1 with port 0, stopped at the end, and raw clients to it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import Connect, RawClient, StartServer
from tests.support.java_scenarios import JavaKit
from tests.support.java_store import JAVA_STORE, settings_for

#: Test modules whose every test also runs on uvloop, the loop ``serve`` uses when it is installed.
BOTH_LOOPS = {"test_connection.py", "test_relay.py"}


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    if item.path.name in BOTH_LOOPS:
        import uvloop

        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> JavaKit:
    """The 4.9.7 prebuilt copied and ``Scenarios.java`` compiled, once per session (the 4.x consumer
    scenarios and the 5.x mixing tests share it)."""
    return JavaKit(tmp_path_factory.mktemp("java-scenarios"))


@pytest.fixture(scope="session")
def java_store_dir(stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the Java-written store and its broker.conf."""
    root = tmp_path_factory.mktemp("java-store")
    shutil.copytree(stores_dir / JAVA_STORE, root / JAVA_STORE)
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", root / f"{JAVA_STORE}.broker.conf")
    return root / JAVA_STORE


@pytest.fixture(scope="session")
def java_store_config(java_store_dir: Path) -> StoreConfig:
    return StoreConfig.load(java_store_dir.parent / f"{JAVA_STORE}.broker.conf")


@pytest.fixture(scope="session")
def java_store(java_store_config: StoreConfig) -> Iterator[MessageStore]:
    store = MessageStore.open(java_store_config)
    yield store
    store.close()


@pytest.fixture(scope="session")
def java_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / f"{JAVA_STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture
async def start_server(
    java_store: MessageStore, java_store_config: StoreConfig
) -> AsyncIterator[StartServer]:
    """Start a server over the Java store (settings overridable); every one started is stopped."""
    started: list[QueryServer] = []

    async def start(**overrides: Any) -> QueryServer:
        server = QueryServer(java_store, settings_for(java_store_config, **overrides))
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


@pytest.fixture
async def server(start_server: StartServer) -> QueryServer:
    return await start_server()


@pytest.fixture
async def connect(server: QueryServer) -> AsyncIterator[Connect]:
    """Open raw connections to the test server (main port unless told); all closed afterwards."""
    clients: list[RawClient] = []

    async def open_client(port: int | None = None, target: QueryServer | None = None) -> RawClient:
        srv = target or server
        client = await RawClient.connect("127.0.0.1", port or srv.port)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        await client.close()


@pytest.fixture
async def writable_server(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritableStore]]:
    """``serve --writable`` in process over an empty store (64 KiB CommitLog files, 4 KiB messages,
    broker ``b1``), on 127.0.0.1 port 0, and its store."""
    config = StoreConfig.for_store(
        tmp_path / "store", mapped_file_size_commit_log=64 * 1024, max_message_size=4096, broker_name="b1"
    )
    store = WritableStore(config)
    srv = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store))
    await srv.start()
    try:
        yield srv, store
    finally:
        await srv.stop()
        store.close()
