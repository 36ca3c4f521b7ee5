"""The test kit's cluster: a name server and N writable brokers in this process, faults on demand.

``RmqCluster`` runs ``serve --writable --brokers N`` (``server.cluster``) on an event loop of its
own thread, each broker over a fresh store ``root/broker-a``, ``root/broker-b``, ... with the kit's
small geometry. Point any client at ``namesrv_address``; ``set_faults("broker-a", down=True)`` makes
one broker fail as a test needs (``server.faults``), ``clear_faults`` brings it back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from clients.testkit.server import RmqWriter, kit_store_config
from clients.topic_admin import TopicAdmin, TopicSpec
from server.app import ServerSettings
from server.broker.writable_store import WritableStore
from server.cluster import Cluster, broker_names
from server.faults import Comeback, Faults

T = TypeVar("T")


class RmqCluster:
    """A name server and ``brokers`` master brokers (``broker-a``, ...) of ``DefaultCluster``."""

    def __init__(self, root: Path, brokers: int = 2, *, http: bool = False) -> None:
        self.root = Path(root)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rmq-test-cluster", daemon=True)
        self._thread.start()
        self.stores: list[WritableStore] = []
        self.cluster: Cluster | None = None
        try:
            self.run(self._start(broker_names(brokers), http))
        except BaseException:
            self.close()
            raise
        assert self.cluster is not None
        #: ``host:port`` of the name server (``NAMESRV_ADDR``).
        self.namesrv_address = self.cluster.name_server_address
        #: Broker name → its ``host:port``.
        self.broker_addresses = self.cluster.broker_addresses()
        first = next(iter(self.cluster.brokers.values())).server
        #: ``http://host:port/`` of the HTTP API (the faults routes among it), "" without ``http``.
        self.http_url = first.http_url

    async def _start(self, names: list[str], http: bool) -> None:
        for name in names:
            self.stores.append(WritableStore(kit_store_config(self.root / name, broker_name=name)))
        cluster = Cluster(self.stores, ServerSettings(port=0, http_port=0 if http else None))
        await cluster.start()
        self.cluster = cluster

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the cluster's loop and wait for its result (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- faults --------------------------------------------------------------------------------

    def set_faults(
        self, broker: str, *, down: bool = False, busy: float = 0.0, delay_ms: int = 0, drop: float = 0.0
    ) -> Faults:
        """Put these faults in force on ``broker`` (the whole state: what is not named is off)."""
        faults = Faults.from_json({"down": down, "busy": busy, "delayMs": delay_ms, "drop": drop})
        assert self.cluster is not None
        return self.run(self.cluster.set_faults(broker, faults))

    def clear_faults(self, broker: str) -> Faults:
        """No fault on ``broker`` any more (a broker down listens and registers again, once the
        clients told its routes have seen it gone: at most ``comeback(broker).within_s`` from now)."""
        assert self.cluster is not None
        return self.run(self.cluster.set_faults(broker, Faults()))

    def comeback(self, broker: str) -> Comeback | None:
        """While ``broker`` is down: how long ``clear_faults`` would wait at most for its clients to
        see it gone (``within_s``), and who they are; None when it is not down."""
        assert self.cluster is not None
        cluster = self.cluster

        async def ask() -> Comeback | None:
            return cluster.comeback_of(broker)

        return self.run(ask())

    def faults(self, broker: str) -> Faults:
        assert self.cluster is not None
        return self.cluster.faults_of(broker)

    # -- admin ---------------------------------------------------------------------------------

    def create_topic(self, name: str, queues: int = 8, *, perm: int = 6) -> None:
        """``mqadmin updateTopic -c DefaultCluster``: the topic on every master, ``queues`` each."""

        async def create() -> None:
            async with TopicAdmin(self.namesrv_address) as admin:
                for address in (await admin.cluster_info()).master_addrs("DefaultCluster") or []:
                    await admin.create_topic(address, TopicSpec(name, queues, queues, perm))

        self.run(create())

    def writer(self, broker: str) -> RmqWriter:
        """``RmqWriter`` over ``broker``'s store: messages stored directly there, queryable at once."""
        assert self.cluster is not None
        store = self.cluster.broker(broker).store
        assert store is not None, f"{broker} is read-only"
        return RmqWriter(_BrokerStore(self, store))  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop every broker and the name server, close the stores and the thread."""
        if self._loop.is_closed():
            return

        async def stop() -> None:
            if self.cluster is not None:
                await self.cluster.stop()
            for store in self.stores:
                store.close()

        try:
            if self._thread.is_alive():
                self.run(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> RmqCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _BrokerStore:
    """What ``RmqWriter`` needs of a server (its store, config, and a way onto its loop), for one
    broker of the cluster."""

    def __init__(self, cluster: RmqCluster, store: WritableStore) -> None:
        self._cluster = cluster
        self.store = store
        self.config = store.config

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def wrapped() -> Any:
            return fn(*args, **kwargs)

        return self._cluster.run(wrapped())
