"""pytest fixtures for tests that need RocketMQ: a fresh store, a writable server, a writer, a client.

Registered through the ``pytest11`` entry point, so installing this package makes the fixtures
available to every test suite in the environment. Importing this module is cheap on purpose (only
pytest and the standard library): the server, store and client modules load when a test first asks
for one of these fixtures, so suites that never use them pay nothing.

- ``rmq_store_config``: the ``StoreConfig`` of a fresh store under the test's ``tmp_path``, with a
  small geometry (override the fixture to change it).
- ``rmq_server``: ``serve --writable`` in-process on 127.0.0.1, a free port, on its own thread;
  ``rmq_server.address`` is ``host:port`` and ``NAMESRV_ADDR`` is set to it for the test. It is the
  name server and the broker: point any RocketMQ client at it.
- ``rmq_writer``: ``rmq_writer.add(topic, body, keys=..., tags=...)`` stores a message directly
  (the ``make-store`` JSONL fields), queryable at once; ``rmq_writer.create_topic(topic, queues)``.
- ``rmq_client``: a blocking Python client (``send``, ``send_batch``, ``query_by_key``,
  ``query_by_unique_key``, ``view``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from clients.testkit.server import RmqClient, RmqServer, RmqWriter
    from store.config.store_config import StoreConfig


@pytest.fixture
def rmq_store_config(tmp_path: Path) -> StoreConfig:
    """A fresh, empty store directory's config (small geometry, store host 127.0.0.1)."""
    from clients.testkit.server import kit_store_config

    return kit_store_config(tmp_path / "rmq-store")


@pytest.fixture
def rmq_server(rmq_store_config: StoreConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[RmqServer]:
    """A writable server over ``rmq_store_config``'s store; its address is also ``NAMESRV_ADDR``."""
    from clients.testkit.server import RmqServer

    server = RmqServer(rmq_store_config)
    monkeypatch.setenv("NAMESRV_ADDR", server.address)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def rmq_writer(rmq_server: RmqServer) -> RmqWriter:
    """Adds messages straight into the running server's store."""
    from clients.testkit.server import RmqWriter

    return RmqWriter(rmq_server)


@pytest.fixture
def rmq_client(rmq_server: RmqServer) -> RmqClient:
    """A blocking client of the running server: send and query."""
    from clients.testkit.server import RmqClient

    return RmqClient(rmq_server)
