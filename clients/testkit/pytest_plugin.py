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
  ``query_by_unique_key``, ``view``, ``receive``).
- ``rmq_cluster``: a name server and two writable brokers (``broker-a``, ``broker-b``) in-process
  (``clients.testkit.cluster.RmqCluster``); ``NAMESRV_ADDR`` is set to its name server;
  ``rmq_cluster.set_faults("broker-a", down=True)`` / ``clear_faults`` make one broker fail.
- ``rmq_consumer``: makes consumers, ``rmq_consumer("Orders", group=..., tags="new")``, each pulling
  through the server's consume side from the moment it is made; ``.receive(count, timeout=...)``
  returns the next ``count`` messages or raises ``TimeoutError`` naming what came. Closed (offsets
  committed, group left) when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from clients.testkit.cluster import RmqCluster
    from clients.testkit.server import RmqClient, RmqConsumer, RmqServer, RmqWriter
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
def rmq_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RmqCluster]:
    """Two writable brokers and their name server, with faults on demand; ``NAMESRV_ADDR`` is set."""
    from clients.testkit.cluster import RmqCluster

    cluster = RmqCluster(tmp_path / "rmq-cluster", brokers=2, http=True)
    monkeypatch.setenv("NAMESRV_ADDR", cluster.namesrv_address)
    try:
        yield cluster
    finally:
        cluster.close()


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


@pytest.fixture
def rmq_consumer(rmq_server: RmqServer) -> Iterator[Callable[..., RmqConsumer]]:
    """``rmq_consumer(topic, group=None, tags="*")``: a blocking consumer of the running server,
    closed when the test ends (before the server stops)."""
    from clients.testkit.server import RmqConsumer

    made: list[RmqConsumer] = []

    def make(topic: str, *, group: str | None = None, tags: str = "*") -> RmqConsumer:
        consumer = RmqConsumer(rmq_server, topic, group=group, tags=tags)
        made.append(consumer)
        return consumer

    try:
        yield make
    finally:
        for consumer in made:
            consumer.close()
