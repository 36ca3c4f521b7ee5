"""A whole cluster in one process: a name server and N master brokers, each broker able to fail on demand.

``serve --writable --brokers N`` and the test kit's ``RmqCluster`` start this. Each broker is what
``serve --writable`` is alone (its ``WritableStore``, its ``BrokerController`` through the write path,
its two remoting ports), all on one event loop; they register with one ``NameRegistry`` served on a
port of its own (``server.namesrv``), so clients pointed at the name server see a real cluster's
answers: a topic created with ``-c`` on every master has queues on every broker, a topic
auto-created by one broker is routed to that broker, the cluster table lists them all.

Faults (``server.faults``) are set per broker. ``down`` is a broker process dying: the broker is
unregistered first (its routes go, as the name server's ``onChannelDestroy`` drops them), then stops
listening and ends its connections with a FIN, nothing more answered, as the real broker's end
(``QueryServer.suspend``). Clearing it is the broker started again: once the clients the name server
told its routes have seen it gone (``server.namesrv.route_watch``: three route answers each, at most
10 s after it went down, as a real restart takes seconds), it listens again on the same ports and
registers again. The store stays open meanwhile: nothing acknowledged is lost, and held state
(offsets, scheduled deliveries) carries on when the broker is back, as a restarted broker's would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from server.app import QueryServer, ServerSettings
from server.broker.controller import ConsumeSettings
from server.broker.writable_store import WritableStore
from server.faults import WAITING_SHOWN, BrokerFaults, Comeback, Faults, UnknownBrokerError
from server.namesrv.registry import BrokerRoutes, NameRegistry
from server.namesrv.server import NameServer
from server.remoting.processors.name_server import NameServerProcessor
from server.remoting.write_path import DeliveryTimer, WritePath, write_path
from server.store_api import StoreWithCommitLog

log = logging.getLogger(__name__)

#: With a fixed ``--port`` P, broker i (0-based) listens on P + BROKER_PORT_STEP * (i + 1) (and its
#: fast port 2 below): P + 10, + 20, ... leave room for each broker's fast port and HA port.
BROKER_PORT_STEP = 10

#: The most brokers one process runs (``broker-a`` ... ``broker-z``).
MAX_BROKERS = 26


def broker_names(count: int) -> list[str]:
    """``broker-a``, ``broker-b``, ... (``count`` of them, 1 to ``MAX_BROKERS``)."""
    if not 1 <= count <= MAX_BROKERS:
        raise ValueError(f"a cluster has 1 to {MAX_BROKERS} brokers, not {count}")
    return [f"broker-{chr(ord('a') + i)}" for i in range(count)]


def broker_port(name_server_port: int, index: int) -> int:
    """Broker ``index``'s listen port: free (0) when the name server's is, else a fixed step above."""
    return 0 if name_server_port == 0 else name_server_port + BROKER_PORT_STEP * (index + 1)


@dataclass(frozen=True, slots=True)
class ReadOnlyStore:
    """A store served read-only as broker ``name`` of ``cluster`` (``serve --store A --store B``)."""

    store: StoreWithCommitLog
    name: str
    cluster: str = "DefaultCluster"


@dataclass(slots=True)
class ClusterBroker:
    """One broker of the cluster: its store (None when read-only), server and write path, faults."""

    name: str
    store: WritableStore | None
    server: QueryServer
    path: WritePath | None
    faults: BrokerFaults


class Cluster:
    """The name server and a broker over each of ``stores``: a writable store is the broker its
    config's brokerName names, a ``ReadOnlyStore`` the broker it names, served read-only."""

    def __init__(
        self,
        stores: Sequence[WritableStore | ReadOnlyStore],
        settings: ServerSettings,
        *,
        consume: ConsumeSettings | None = None,
    ) -> None:
        """``settings``: the name server's host and port (``settings.port``) and what every broker
        shares; each broker listens on ``broker_port``, the HTTP port (if any) is the first broker's
        (its API and the faults of all), no broker opens a gRPC port."""
        if not stores:
            raise ValueError("a cluster needs at least one broker")
        names = [_identity_of(store)[0] for store in stores]
        if len(set(names)) != len(names):
            raise ValueError(f"broker names must differ: {', '.join(names)}")
        self.settings = settings
        self.registry = NameRegistry()
        self.name_server = NameServer(self.registry, settings.host, settings.port)
        self.brokers: dict[str, ClusterBroker] = {}
        for index, store in enumerate(stores):
            name, cluster = _identity_of(store)
            broker_settings = dataclasses.replace(
                settings,
                port=broker_port(settings.port, index),
                advertise=None,
                broker_name=name,
                cluster=cluster,
                grpc_port=None,
                http_port=settings.http_port if index == 0 else None,
            )
            faults = BrokerFaults()
            if isinstance(store, ReadOnlyStore):
                server = QueryServer(store.store, broker_settings, faults=faults)
                self.brokers[name] = ClusterBroker(name, None, server, None, faults)
                continue
            path = write_path(store, consume=consume, timer=DeliveryTimer(store))
            server = QueryServer(store.reader, broker_settings, configure=path, faults=faults)
            self.brokers[name] = ClusterBroker(name, store, server, path, faults)
        first = next(iter(self.brokers.values()))
        first.server.fault_control = self
        self._fault_lock = asyncio.Lock()

    @property
    def name_server_address(self) -> str:
        return f"{self._advertised_host()}:{self.name_server.port}"

    def _advertised_host(self) -> str:
        first = next(iter(self.brokers.values()))
        identity = first.server.identity
        return identity.address.rpartition(":")[0] if identity is not None else self.settings.host

    def broker_addresses(self) -> dict[str, str]:
        """Broker name → its advertised ``host:port`` (the listen port)."""
        return {
            name: broker.server.identity.address
            for name, broker in self.brokers.items()
            if broker.server.identity is not None
        }

    async def start(self) -> None:
        """The name server's port, then each broker's ports, each broker registered once it serves."""
        await self.name_server.start()
        started: list[QueryServer] = []
        try:
            for broker in self.brokers.values():
                await broker.server.start()
                started.append(broker.server)
                self._register(broker)
        except BaseException:
            for server in started:
                await server.stop()
            await self.name_server.stop()
            raise

    def _register(self, broker: ClusterBroker) -> None:
        identity = broker.server.identity
        assert identity is not None
        if broker.path is not None:
            routes: BrokerRoutes | None = broker.path.routes
        else:
            # a read-only broker registers what its store holds, as the read-only server routes it
            routes = NameServerProcessor(broker.server.store, identity)
        assert routes is not None
        self.registry.register(identity, routes)

    async def stop(self) -> None:
        for broker in self.brokers.values():
            await broker.server.stop()
        await self.name_server.stop()

    # faults -----------------------------------------------------------------------------------

    @property
    def broker_names(self) -> list[str]:
        return list(self.brokers)

    def broker(self, name: str) -> ClusterBroker:
        broker = self.brokers.get(name)
        if broker is None:
            raise UnknownBrokerError(name, list(self.brokers))
        return broker

    def faults_of(self, name: str) -> Faults:
        """The faults in force on broker ``name`` (``UnknownBrokerError`` if there is none)."""
        return self.broker(name).faults.state

    def comeback_of(self, name: str) -> Comeback | None:
        """While broker ``name`` is down: how long a clear asked now would wait at most for the
        clients told its routes to see it gone, and who they are (``UnknownBrokerError`` if there
        is no such broker); None when it is not down."""
        broker = self.broker(name)
        if not broker.faults.state.down:
            return None
        watch = self.name_server.route_watch
        within = watch.back_within(name)
        if within is None:
            return None
        if within <= 0:
            return Comeback(within, 0, ())
        shown = tuple(f"{peer} {topic}" for peer, topic in watch.waiting_for(name, WAITING_SHOWN))
        return Comeback(within, watch.waiting_count(name), shown)

    async def set_faults(self, name: str, faults: Faults) -> Faults:
        """Put ``faults`` in force on broker ``name`` (the whole state: what is left out is off)."""
        broker = self.broker(name)
        async with self._fault_lock:  # one change at a time: a down and a clear never interleave
            return await self._set_faults(broker, faults)

    async def _set_faults(self, broker: ClusterBroker, faults: Faults) -> Faults:
        name = broker.name
        before = broker.faults.state
        if faults.down and not before.down:
            self.registry.unregister(name)
            self.name_server.route_watch.broker_left(name)
            broker.faults.state = faults
            await broker.server.suspend()
        elif before.down and not faults.down:
            # Back only once its clients saw it gone, as after a real broker's restart: a 4.9.7 push
            # consumer that never saw it go keeps pulls the broker's end left waiting for 30 s.
            watch = self.name_server.route_watch
            if not await watch.seen_gone(name):
                log.warning(
                    "broker %s: back before these clients saw it gone: %s", name, watch.waiting_for(name, 10)
                )
            await broker.server.resume()  # raises, the broker staying down, if its port was taken
            broker.faults.state = faults
            watch.broker_back(name)
            self._register(broker)
        else:
            broker.faults.state = faults
        log.warning("broker %s: faults now %s", name, faults.to_json())
        return faults


def _identity_of(store: WritableStore | ReadOnlyStore) -> tuple[str, str]:
    """(broker name, cluster name) a store is served as."""
    if isinstance(store, ReadOnlyStore):
        return store.name, store.cluster
    return store.config.broker_name, store.config.broker_cluster_name
