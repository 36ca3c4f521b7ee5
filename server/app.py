"""QueryServer: the broker's two ports (listen port and the fast "VIP" port − 2) over one store.

The real broker serves QUERY_MESSAGE and VIEW_MESSAGE_BY_ID on both its listen port and the fast
port (``listenPort − 2``); the dashboard uses the fast port by default. Both ports here share one
dispatcher, which also plays the name server, so a client can use this server as ``-n`` and as the
broker it is routed to. Binding with port 0 (tests) picks a free pair P and P − 2 so that the fast
port rule still holds. ``stop()`` stops accepting, lets in-flight requests finish and flush, then
closes every connection.

With ``grpc_port`` set (``serve --grpc-port``; ``serve --writable`` opens it by default on the
listen port + 3), a third port serves RocketMQ 5 clients over gRPC (``server.grpc``) on the same
event loop and store; it is bound before the remoting ports start serving, so a port in use fails
the start as a whole (``server.port_errors``), unless ``optional_front_doors`` says its port was
only a default: then the server starts without it and says so.

With ``http_port`` set (``serve --http``, the listen port + 2 by default there), one more port serves
the HTTP JSON API, its OpenAPI description and Prometheus ``/metrics`` (``server.http``), also on
the same loop and store, bound like the gRPC port before the remoting ports serve.

At most ``max_connections`` connections (both ports together, per process) are served; at the limit
the connection longest without a completed request, else the one idle the longest that is no live
client's, is closed to make room, and only when there is neither is one more accepted only to be
answered SYSTEM_BUSY and closed (``server.remoting.refusal``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.codes import RequestCode
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from server.acl.config import AclConfig
from server.acl.validator import AccessValidator
from server.faults import BrokerFaults, FaultControl
from server.file_budget import LISTEN_BACKLOG, max_waiting_for
from server.grpc.defaults import (
    DEFAULT_MAX_CONCURRENT_RPCS,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
)
from server.grpc.tls import GrpcTls
from server.http import DEFAULT_MAX_SERIES
from server.identity import DEFAULT_QUEUE_NUMS, BrokerIdentity
from server.loop_slice import request_slice
from server.loop_watchdog import LoopWatchdog
from server.port_errors import PortUnusableError
from server.query_pool import DEFAULT_QUERY_BUDGET, DEFAULT_QUERY_THREADS, QueryPool
from server.remoting.buffer_budget import DEFAULT_MAX_BUFFERED_BYTES, BufferBudget
from server.remoting.connection import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_HEADER_LENGTH,
    DEFAULT_REQUEST_TIMEOUT,
    ConnectionLogs,
    RemotingConnection,
)
from server.remoting.dispatch import Dispatcher, java_remote_address
from server.remoting.fault_gate import FaultGate
from server.remoting.processors import client_manage
from server.remoting.processors.consumer_manage import ConsumerManageProcessor
from server.remoting.processors.name_server import NameServerProcessor
from server.remoting.processors.pull_message import (
    DEFAULT_MAX_HELD_PULLS,
    DEFAULT_MAX_HELD_PULLS_PER_CONNECTION,
    HoldLimits,
    PullMessageProcessor,
)
from server.remoting.processors.query_message import DEFAULT_QUERY_MAX_NUM, QueryMessageProcessor
from server.remoting.processors.queue_offsets import QueueOffsetProcessor
from server.remoting.processors.runtime_info import RuntimeInfoProcessor
from server.remoting.refusal import DownConnection, IdleConnections, IncompleteRequests, Refuser
from server.remoting.request_path import RequestPath
from server.remoting.write_budget import (
    DEFAULT_MAX_QUEUED_BYTES,
    DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION,
    WriteBudget,
)
from server.request_stats import RequestStats, report_forever
from server.runtime_stats import PullStats
from server.store_api import StoreWithCommitLog
from server.store_changes import StoreChanges
from server.topic_table import TopicTable

if TYPE_CHECKING:
    # The gRPC and HTTP front doors are imported when their ports start (``start_front_doors``):
    # grpcio, protobuf and aiohttp cost ~0.3 s to import, which the remoting port need not wait for.
    from server.grpc.receiving import GrpcConsumers
    from server.grpc.sending import GrpcWriter
    from server.grpc.server import GrpcServer
    from server.grpc.topics import GrpcTopics
    from server.http.groups import OffsetSource
    from server.http.server import HttpServer

log = logging.getLogger(__name__)

#: The broker's default ``listenPort``.
DEFAULT_PORT = 10911

#: The fast (VIP) port is the listen port minus this, as in ``BrokerController``.
FAST_PORT_OFFSET = 2

_PAIR_ATTEMPTS = 50

#: Seconds gRPC calls in flight get to finish when the server stops.
GRPC_STOP_GRACE = 2.0

#: Default ``--max-connections``: far above what query clients need (each Java client keeps one
#: connection per broker); ``serve`` lowers it to what the open-file limit allows
#: (``server.file_budget``), and unfinished frames share one byte budget (``server.remoting.buffer_budget``).
DEFAULT_MAX_CONNECTIONS = 10_000


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where and how to listen, and who to say we are."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    advertise: str | None = None
    #: For a wildcard bind without ``advertise``: the host put into routes (broker.conf's brokerIP1,
    #: as the broker registers itself); None = this machine's address.
    advertise_host: str | None = None
    cluster: str = "DefaultCluster"
    broker_name: str = "broker-a"
    queue_nums: int = DEFAULT_QUEUE_NUMS
    default_query_max_num: int = DEFAULT_QUERY_MAX_NUM
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
    max_header_length: int = DEFAULT_MAX_HEADER_LENGTH
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    #: Seconds a request may take to arrive whole from its first byte; 0 = no deadline
    #: (``server.remoting.connection``).
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    shutdown_timeout: float = 10.0
    #: The event loop thread's scheduling slice (µs) asked of the kernel at start; 0 = the kernel's
    #: default (``server.loop_slice``).
    loop_slice_us: int = 0
    reuse_port: bool = False
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Refused connections that may wait for their SYSTEM_BUSY answer at once; None = a tenth of
    #: ``max_connections``, at least 16 (``server.file_budget``).
    max_waiting: int | None = None
    #: Bytes all connections together may hold in unfinished request frames
    #: (``server.remoting.buffer_budget``).
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    #: ``plain_acl.yml`` in force; None (the default, like the broker's ``aclEnable=false``) = no checks.
    acl: AclConfig | None = None
    #: Threads for key queries too expensive for the event loop (``server.query_pool``).
    query_threads: int = DEFAULT_QUERY_THREADS
    #: Index entries one key query may visit (``server.query_pool``).
    query_budget: int = DEFAULT_QUERY_BUDGET
    #: Long-polling pulls held at once, in total and per connection; one more is answered
    #: SYSTEM_BUSY (``server.remoting.processors.pull_message``).
    max_held_pulls: int = DEFAULT_MAX_HELD_PULLS
    max_held_pulls_per_connection: int = DEFAULT_MAX_HELD_PULLS_PER_CONNECTION
    #: Bytes of answers queued for peers that are not reading them, in total and per connection;
    #: past either the largest are cut off (``server.remoting.write_budget``).
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES
    max_queued_bytes_per_connection: int = DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION
    #: The gRPC port for RocketMQ 5 clients (``server.grpc``); 0 picks one; None (the default for
    #: a server built in code) = none. ``serve --writable`` defaults to the listen port + 3.
    grpc_port: int | None = None
    #: Streams one gRPC connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
    grpc_max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
    #: gRPC calls in flight on all connections together; past it grpc answers RESOURCE_EXHAUSTED.
    grpc_max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_RPCS
    #: The gRPC port's TLS (``server.grpc.tls``): permissive by default, as the Proxy's, with a
    #: self-signed certificate made at start.
    grpc_tls: GrpcTls = field(default_factory=GrpcTls)
    #: Bytes of gRPC request messages in flight, in total and per connection; a call finding no
    #: room within 2 s is answered RESOURCE_EXHAUSTED before its message is read
    #: (``server.grpc.request_budget``).
    grpc_max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    grpc_max_request_bytes_per_connection: int = DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION
    #: The HTTP port (``server.http``: JSON API, OpenAPI, ``/metrics``); 0 picks one; None (the
    #: default for a server built in code) = none. ``serve`` defaults to the listen port + 2.
    http_port: int | None = None
    #: The most per-topic and per-group series one ``/metrics`` scrape carries (the rest counted).
    metrics_max_series: int = DEFAULT_MAX_SERIES
    #: Names the HTTP port answers to besides loopback, IP addresses, the bound and advertised host
    #: and this machine's name (``serve --http-allow-host``; ``server.http.host_check``).
    http_allowed_hosts: tuple[str, ...] = ()
    #: Front doors (``"grpc"``, ``"http"``) whose port is a default rather than one the operator
    #: named: when it cannot be bound the door stays closed with a warning, the server starts.
    optional_front_doors: frozenset[str] = frozenset()
    #: A worker process of ``serve --workers``: where it sends snapshots of its request counters
    #: (a multiprocessing queue of ``server.workers.WorkerStats``), so that the first process's
    #: ``/metrics`` counts every process's requests. None: not a worker.
    stats_queue: Any = None


def build_dispatcher(
    store: StoreWithCommitLog,
    identity: BrokerIdentity,
    settings: ServerSettings,
    pool: QueryPool | None = None,
    changes: StoreChanges | None = None,
    holds: HoldLimits | None = None,
    stats: PullStats | None = None,
) -> Dispatcher:
    """Every processor, registered under the request codes the broker and name server answer.

    ``pool`` runs key queries off the event loop (``server.query_pool``); ``changes`` wakes held
    long-polling pulls when the store grows (``server.store_changes``); ``holds`` bounds how many
    are held (default: from ``settings``).
    """
    dispatcher = Dispatcher(AccessValidator(settings.acl) if settings.acl is not None else None)
    query = QueryMessageProcessor(
        store,
        default_query_max_num=settings.default_query_max_num,
        max_frame_length=settings.max_frame_length,
        pool=pool,
        budget=settings.query_budget,
    )
    dispatcher.register(RequestCode.QUERY_MESSAGE, query.query_message)
    dispatcher.register(RequestCode.VIEW_MESSAGE_BY_ID, query.view_message_by_id)
    topics = TopicTable(store)
    names = NameServerProcessor(store, identity, topics)
    dispatcher.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, names.get_route_info_by_topic)
    dispatcher.register(RequestCode.GET_BROKER_CLUSTER_INFO, names.get_broker_cluster_info)
    dispatcher.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, names.get_all_topic_list)
    offsets = QueueOffsetProcessor(store, identity.broker_name)
    dispatcher.register(RequestCode.GET_MIN_OFFSET, offsets.get_min_offset)
    dispatcher.register(RequestCode.GET_MAX_OFFSET, offsets.get_max_offset)
    dispatcher.register(RequestCode.GET_EARLIEST_MSG_STORETIME, offsets.get_earliest_msg_storetime)
    dispatcher.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, offsets.search_offset_by_timestamp)
    dispatcher.register(RequestCode.GET_TOPIC_STATS_INFO, offsets.get_topic_stats_info)
    if stats is None:
        stats = PullStats()
    if holds is None:
        holds = HoldLimits(settings.max_held_pulls, settings.max_held_pulls_per_connection)
    pull = PullMessageProcessor(
        store, changes if changes is not None else StoreChanges(), stats, topics, holds
    )
    dispatcher.register(RequestCode.PULL_MESSAGE, pull.process)
    runtime = RuntimeInfoProcessor(store, stats)
    dispatcher.register(RequestCode.GET_BROKER_RUNTIME_INFO, runtime.get_broker_runtime_info)
    consumers = ConsumerManageProcessor(store)
    dispatcher.register(RequestCode.QUERY_CONSUMER_OFFSET, consumers.query_consumer_offset)
    dispatcher.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumers.get_consumer_list_by_group)
    dispatcher.register(RequestCode.HEART_BEAT, client_manage.heart_beat)
    dispatcher.register(RequestCode.UNREGISTER_CLIENT, client_manage.unregister_client)
    dispatcher.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, client_manage.query_topic_consume_by_who)
    if not dispatcher.checks_access and RequestPath.usable(store):
        # The compiled request path answers plain VIEWs, QUERYs and the offset family as these
        # processors would (set last: registering a code it answers drops it).
        dispatcher.fast_path = RequestPath(
            store,  # type: ignore[arg-type]
            query.view_max_size,
            dispatcher,
            query,
            offsets=RequestPath.answers_offsets(store),
        )
    return dispatcher


#: Bind addresses that mean "every interface": no use to a client as an address to dial.
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def default_advertise_host(bind_host: str) -> str:
    """The host clients should dial: the bind host, or this machine's address for a wildcard bind."""
    if bind_host in WILDCARD_HOSTS:
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"
    return bind_host


def advertised_address(settings: ServerSettings, port: int) -> str:
    """The ``host:port`` routes and cluster info name: ``advertise``, else the bound address (for a
    wildcard bind, ``advertise_host`` or this machine's address) with the listen port."""
    if settings.advertise is not None:
        return settings.advertise
    host = settings.host
    wildcard_host = settings.advertise_host if host in WILDCARD_HOSTS else None
    return f"{wildcard_host or default_advertise_host(host)}:{port}"


def _listen_now(sock: Any) -> None:
    """``listen()`` on a server's bound socket now, not at ``start_serving``: Linux lets two sockets
    with SO_REUSEADDR bind one port while neither listens, so a port another process had bound (and
    was about to listen on) looked free, and this server's start failed later, in ``start_serving``,
    with EADDRINUSE (a port-0 pair under four test workers). Listening at once makes such a port
    fail here, where the port-0 search tries another pair. The loops' server sockets refuse
    ``listen`` themselves; a duplicate of the descriptor listens for the socket they share."""
    dup = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
    try:
        dup.listen(LISTEN_BACKLOG)
    finally:
        dup.close()


class QueryServer:
    """Both listening ports, their connections and the dispatcher they share."""

    def __init__(
        self,
        store: StoreWithCommitLog,
        settings: ServerSettings | None = None,
        *,
        configure: Callable[[QueryServer], None] | None = None,
        grpc_writer: GrpcWriter | None = None,
        faults: BrokerFaults | None = None,
    ) -> None:
        self.store = store
        #: Faults on demand (``server.faults``; a broker of ``server.cluster``): each connection then
        #: reaches the dispatcher through a ``FaultGate``. None: no gate, no cost.
        self.faults = faults
        #: Whether the remoting ports are closed by the ``down`` fault (``suspend``/``resume``).
        self.suspended = False
        #: The cluster's faults, served on this server's HTTP port (``/api/brokers/{name}/faults``).
        self.fault_control: FaultControl | None = None
        #: SendMessage's way into the writable store (``serve --writable``); None: read-only gRPC.
        self._grpc_writer = grpc_writer
        self._grpc: GrpcServer | None = None
        #: The bound gRPC port (0 while there is none).
        self.grpc_port = 0
        self._http: HttpServer | None = None
        #: The bound HTTP port (0 while there is none).
        self.http_port = 0
        #: Remoting requests counted by code for ``/metrics`` (only while the HTTP port is on).
        self.request_stats = RequestStats()
        #: ``serve --workers``: the worker processes' counters (``server.workers.WorkerStats``).
        self.worker_requests: Callable[[], list[RequestStats]] = list
        #: How long the event loop was held, and by what (``server.loop_watchdog``).
        self.watchdog = LoopWatchdog()
        #: Pulsed after each store refresh (``refresh_forever(on_refresh=...)``): wakes held pulls.
        self.changes = StoreChanges()
        self.settings = settings or ServerSettings()
        #: Called with this server once its dispatcher is built, before it serves (the write path
        #: registers its processors here, and its background work).
        self._configure = configure
        self.dispatcher: Dispatcher | None = None
        self.identity: BrokerIdentity | None = None
        self._servers: list[asyncio.Server] = []
        self._connections: set[RemotingConnection] = set()
        self._connection_logs = ConnectionLogs()
        self._background: list[asyncio.Task[None]] = []
        self.port = 0
        self.fast_port = 0
        self._stopped = False
        self.query_pool: QueryPool | None = None
        limit = self.settings.max_connections
        if limit < 1:
            raise ValueError(f"max_connections must be at least 1, got {limit}")
        waiting = self.settings.max_waiting
        self.refuser = Refuser(limit, max_waiting=max_waiting_for(limit) if waiting is None else waiting)
        self.buffer_budget = BufferBudget(self.settings.max_buffered_bytes)
        #: Connections without a completed request, oldest first: evicted for new ones at the limit.
        self.incomplete = IncompleteRequests()
        #: Every connection, the one idle the longest first: evicted next, unless a live client's.
        self.idle = IdleConnections()
        self.write_budget = WriteBudget(
            self.settings.max_queued_bytes, self.settings.max_queued_bytes_per_connection
        )
        #: What pulls found, for GET_BROKER_RUNTIME_INFO (shared by every pull processor).
        self.pull_stats = PullStats()
        #: Long-polling pulls held now and their bounds (``server.remoting.processors.pull_message``).
        self.held_pulls = HoldLimits(
            self.settings.max_held_pulls, self.settings.max_held_pulls_per_connection
        )

    # ports ------------------------------------------------------------------------------------

    def _protocol(self) -> asyncio.Protocol:
        assert self.dispatcher is not None
        if self.suspended:
            return DownConnection()  # accepted just before ``suspend`` closed the ports
        if len(self._connections) >= self.refuser.limit:
            loop = asyncio.get_running_loop()
            now = loop.time()
            victim = self.incomplete.evict_oldest(now, self.refuser.limit) or self.idle.evict_idlest(
                now, self.refuser.limit
            )
            if victim is None:
                return self.refuser.connection()
            self._connections.discard(victim)  # type: ignore[arg-type]
        gate = FaultGate(self.dispatcher, self.faults) if self.faults is not None else None
        connection = RemotingConnection(
            gate or self.dispatcher,  # type: ignore[arg-type]
            max_frame_length=self.settings.max_frame_length,
            max_header_length=self.settings.max_header_length,
            idle_timeout=self.settings.idle_timeout,
            on_close=self._connections.discard,
            logs=self._connection_logs,
            budget=self.buffer_budget,
            on_input_ended=self._input_ended,
            write_budget=self.write_budget,
            request_timeout=self.settings.request_timeout,
            incomplete=self.incomplete,
            idle=self.idle,
            woken=self.changes,
        )
        if gate is not None:
            gate.connection = connection
        self._connections.add(connection)
        return connection

    def _input_ended(self, peer: str) -> None:
        """A peer sent EOF with requests in flight: its held pulls answer now, not at their timeout."""
        if self.held_pulls.end(java_remote_address(peer)):
            self.changes.pulse()

    async def _listen(self, port: int) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            self._protocol,
            self.settings.host,
            port,
            reuse_port=self.settings.reuse_port or None,
            backlog=LISTEN_BACKLOG,
            start_serving=False,
        )
        try:
            for sock in server.sockets:
                _listen_now(sock)
        except OSError:
            server.close()
            raise
        return server

    async def _bind_pair(self) -> tuple[asyncio.Server, asyncio.Server]:
        if self.settings.port != 0:
            if not FAST_PORT_OFFSET < self.settings.port <= 65535:
                raise ValueError(
                    f"port {self.settings.port} unusable: it and its fast port (port - 2) must be in 1-65535"
                )
            host, port = self.settings.host, self.settings.port
            try:
                main = await self._listen(port)
            except OSError as exc:
                raise PortUnusableError.from_os_error("listen", host, port, exc) from None
            try:
                fast = await self._listen(port - FAST_PORT_OFFSET)
            except OSError as exc:
                main.close()
                raise PortUnusableError.from_os_error("fast", host, port - FAST_PORT_OFFSET, exc) from None
            return main, fast
        # Port 0: find a free P whose P - 2 is free too, so the VIP-port rule holds in tests as well.
        for _ in range(_PAIR_ATTEMPTS):
            main = await self._listen(0)
            port = _bound_port(main)
            if port - FAST_PORT_OFFSET > 0:
                try:
                    fast = await self._listen(port - FAST_PORT_OFFSET)
                except OSError:
                    pass
                else:
                    return main, fast
            main.close()
        raise OSError("could not find a free pair of ports P and P - 2")

    # lifecycle --------------------------------------------------------------------------------

    async def start(self, *, defer_front_doors: bool = False) -> None:
        """Bind both remoting ports and start serving; the HTTP and gRPC ports too, unless
        ``defer_front_doors`` leaves them to ``start_front_doors``."""
        main, fast = await self._bind_pair()
        self._servers = [main, fast]
        self.watchdog.start(asyncio.get_running_loop())
        if self.settings.loop_slice_us:
            request_slice(self.settings.loop_slice_us)
        self._audit_once_per_turn(asyncio.get_running_loop())
        self.port = _bound_port(main)
        self.fast_port = _bound_port(fast)
        advertise = advertised_address(self.settings, self.port)
        self.identity = BrokerIdentity(
            cluster=self.settings.cluster,
            broker_name=self.settings.broker_name,
            address=advertise,
            queue_nums=self.settings.queue_nums,
        )
        self.query_pool = QueryPool(self.settings.query_threads)
        self.dispatcher = build_dispatcher(
            self.store,
            self.identity,
            self.settings,
            self.query_pool,
            self.changes,
            self.held_pulls,
            self.pull_stats,
        )
        if self._configure is not None:
            self._configure(self)
        if self.settings.http_port is not None or self.settings.stats_queue is not None:
            self.dispatcher.stats = self.request_stats
        if self.settings.stats_queue is not None:
            queue, stats, pid = self.settings.stats_queue, self.request_stats, os.getpid()

            def send(snapshot: RequestStats) -> None:
                queue.put_nowait((pid, snapshot))

            self.run_in_background(lambda: report_forever(stats, send))
        if not defer_front_doors:
            try:
                await self.start_front_doors()
            except BaseException:
                for server in self._servers:
                    server.close()
                self._servers = []
                self.query_pool.close()
                raise
        for server in self._servers:
            await server.start_serving()
        if not defer_front_doors:
            self._announce()

    def _audit_once_per_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """A writable store's settles do their fixed checks that only watch (the index audit, the
        look at resident memory) once per turn of the loop, not once per put
        (``MessageStore.once_per_turn``): the first settle of a turn does them and asks for
        ``next_turn`` at the next turn. A callback is scheduled only in a turn that did them, so
        an idle loop still sleeps; the audit is also at most every ``AUDIT_EVERY`` and the look
        every ``RSS_CHECK_EVERY_DISPATCHED`` records, so a turn of one batch rarely does either."""
        store = self.store
        if hasattr(store, "next_turn"):
            store.once_per_turn = lambda: loop.call_soon(store.next_turn)  # type: ignore[attr-defined]

    def _announce(self) -> None:
        """The start-up line: every port this server serves."""
        assert self.identity is not None
        log.info(
            "serving on %s:%d and fast port %s:%d%s, advertised as %s (cluster %s, broker %s)",
            self.settings.host,
            self.port,
            self.settings.host,
            self.fast_port,
            self._front_doors_text(),
            self.identity.address,
            self.identity.cluster,
            self.identity.broker_name,
        )

    async def start_front_doors(self, grpc_writer: GrpcWriter | None = None) -> None:
        """Bind the HTTP and gRPC ports (when their settings ask for them) and serve them.

        ``start(defer_front_doors=True)`` leaves them to this call, so that ``serve`` can announce
        its remoting port before their libraries are even imported; ``grpc_writer`` (SendMessage's
        way into a writable store) may be given here then. A port that cannot be bound raises;
        whatever of the two was started is stopped first.
        """
        assert self.identity is not None
        if grpc_writer is not None:
            self._grpc_writer = grpc_writer
        started_before = self._http is not None or self._grpc is not None
        try:
            if self.settings.http_port is not None and self._http is None:
                await self._open_front_door("http", self._start_http(self.identity))
            if self.settings.grpc_port is not None and self._grpc is None:
                await self._open_front_door("grpc", self._start_grpc(self.identity))
        except BaseException:
            if self._http is not None:
                await self._http.stop()
                self._http = None
            raise
        if self._servers and not started_before:
            self._announce()  # deferred by ``start``: the line names every port

    async def _open_front_door(self, name: str, start: Awaitable[None]) -> None:
        """Run ``start``; a port it cannot bind fails the start, unless ``name`` is one of
        ``settings.optional_front_doors`` (its port only a default): then that door stays closed."""
        try:
            await start
        except PortUnusableError as exc:
            if name not in self.settings.optional_front_doors:
                raise
            log.warning("%s: serving without %s (the port was a default, not one asked for)", exc, exc.role)

    def _front_doors_text(self) -> str:
        return (f", gRPC on {self.settings.host}:{self.grpc_port}" if self._grpc is not None else "") + (
            f", HTTP on {self.http_url}" if self._http is not None else ""
        )

    @property
    def http_url(self) -> str:
        """``http://host:port/`` of the HTTP port (empty while there is none)."""
        if self._http is None:
            return ""
        from server.http.server import url_host

        return f"http://{url_host(self.settings.host)}:{self.http_port}/"

    @property
    def http_app(self) -> HttpServer | None:
        """The HTTP port's server (None while there is none)."""
        return self._http

    def offset_source(self) -> OffsetSource:
        """Committed offsets for the HTTP side: the write path's live table under ``--writable``,
        else ``config/consumerOffset.json`` (re-read when a broker beside us rewrites it)."""
        from server.http.groups import FileOffsets, LiveOffsets

        broker = getattr(self._configure, "broker", None)
        if broker is not None:
            return LiveOffsets(broker)
        root = Path(self.store.config.store_path_root_dir)  # type: ignore[attr-defined]
        return FileOffsets(root / "config" / "consumerOffset.json")

    async def _start_http(self, identity: BrokerIdentity) -> None:
        """Bind the HTTP port: the JSON API and ``/metrics`` over this server's store and counters."""
        from server.http.app import HttpApi
        from server.http.metrics import HttpStats, ServerState, StoreCollector
        from server.http.server import HttpServer

        assert self.settings.http_port is not None and self.query_pool is not None
        pool = self.query_pool
        offsets = self.offset_source()
        http_stats = HttpStats()
        state = ServerState(
            connections=lambda: len(self._connections),
            max_connections=lambda: self.max_connections,
            held_pulls=lambda: self.held_pulls.held,
            query_pool_pending=lambda: pool.pending,
            last_refresh=lambda: self.changes.last_pulse,
            requests=self.request_stats,
            worker_requests=lambda: self.worker_requests(),
            watchdog=self.watchdog,
            grpc_calls=lambda: self._grpc.admission.calls if self._grpc is not None else {},
            connection_limit=lambda: {
                "incomplete": self.incomplete.evicted,
                "idle": self.idle.evicted,
                "refused": self.refuser.refused,
            },
        )
        collector = StoreCollector(
            self.store,  # type: ignore[arg-type]
            cluster=identity.cluster,
            broker=identity.broker_name,
            address=lambda: identity.address,
            runtime_info=RuntimeInfoProcessor(self.store, self.pull_stats).runtime_info,
            offsets=offsets,
            state=state,
            http=http_stats,
            max_series=self.settings.metrics_max_series,
        )
        from server.broker.topic_validator import startup_system_topics
        from server.http.host_check import AllowedHosts
        from server.http.resend import Resender

        # under --writable the write path's SEND processor is registered by now (``start`` runs the
        # configure hook before the front doors): the page's resend goes through it
        sends = getattr(self._configure, "sends", None)
        api = HttpApi(
            self.store,
            offsets=offsets,
            run=pool.run,
            collector=collector,
            http_stats=http_stats,
            acl=self.settings.acl,
            resender=Resender(sends.process) if sends is not None else None,
            faults=self.fault_control,
            system_topics=startup_system_topics(identity.cluster, identity.broker_name),
            allowed_hosts=AllowedHosts(
                (
                    self.settings.host,
                    identity.address.rpartition(":")[0].strip("[]"),
                    socket.gethostname(),
                    *self.settings.http_allowed_hosts,
                )
            ),
        )
        http = HttpServer(api.application(), self.settings.host, self.settings.http_port)
        self.http_port = await http.start()
        self._http = http

    async def _start_grpc(self, identity: BrokerIdentity) -> None:
        """Bind the gRPC port; clients are routed to the advertised host with the bound port."""
        from server.grpc.access import GrpcAccess
        from server.grpc.server import GrpcServer
        from server.grpc.service import MessagingService
        from server.grpc.topics import GrpcTopics

        writer = self._grpc_writer
        topics = GrpcTopics(self.store, identity.perm, writer.store if writer is not None else None)  # type: ignore[arg-type]
        host = identity.address.rpartition(":")[0].strip("[]")
        consumers = self._grpc_consumers(topics, identity)
        service = MessagingService(
            topics,
            broker_name=identity.broker_name,
            endpoint=lambda: (host, self.grpc_port),
            writer=writer,
            access=GrpcAccess(self.settings.acl) if self.settings.acl is not None else None,
            consumers=consumers,
        )
        assert self.settings.grpc_port is not None
        grpc_server = GrpcServer(
            service,
            self.settings.host,
            self.settings.grpc_port,
            max_message_length=self.settings.max_frame_length,
            max_concurrent_streams=self.settings.grpc_max_concurrent_streams,
            max_concurrent_rpcs=self.settings.grpc_max_concurrent_calls,
            idle_timeout=self.settings.idle_timeout,
            tls=self.settings.grpc_tls,
            advertised_host=host,
            max_request_bytes=self.settings.grpc_max_request_bytes,
            max_request_bytes_per_connection=self.settings.grpc_max_request_bytes_per_connection,
            read_timeout=self.settings.request_timeout,
        )
        self.grpc_port = await grpc_server.start()
        self._grpc = grpc_server
        if consumers is not None:
            self.run_in_background(consumers.renew_forever)  # once bound: a port refused renews nothing

    def _grpc_consumers(self, topics: GrpcTopics, identity: BrokerIdentity) -> GrpcConsumers | None:
        """SimpleConsumer calls over the remoting port's consume side, when there is one to share."""
        from server.broker.receive_store import store_leases
        from server.grpc.receiving import GrpcConsumers

        writer = self._grpc_writer
        if writer is None or writer.broker is None:
            return None
        leases = store_leases(writer.broker, identity.broker_name)
        host = identity.address.rpartition(":")[0]
        return GrpcConsumers(
            writer.broker, leases, topics, self.changes, clock=writer.broker.clock, host=host
        )

    def run_in_background(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` while serving (e.g. the index builder); it is cancelled by ``stop()``."""
        self._background.append(asyncio.get_running_loop().create_task(work()))

    async def suspend(self) -> None:
        """The ``down`` fault: stop listening on both remoting ports and end every connection with
        a FIN, nothing more answered, as the real broker's end under SIGTERM and SIGKILL
        (``golden/broker_close_4.9.7.json``); the HTTP and gRPC ports, if any, stay. ``resume``
        undoes it.

        The 4.9.7 Java client leaves a pull the broker held on such a connection waiting for its
        30 s timeout (an RST does not always spare it either); what frees the queue is the
        consumer's rebalance once it sees the broker gone, so a cluster brings a broker back only
        then (``server.namesrv.route_watch``)."""
        if self.suspended or not self._servers:
            return
        self.suspended = True
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for connection in list(self._connections):
            connection.end()
        for server in servers:
            await server.wait_closed()

    async def resume(self) -> None:
        """Listen again on the same two ports (``PortUnusableError`` if another process took one)."""
        if not self.suspended:
            return
        host = self.settings.host
        try:
            main = await self._listen(self.port)
        except OSError as exc:
            raise PortUnusableError.from_os_error("listen", host, self.port, exc) from None
        try:
            fast = await self._listen(self.fast_port)
        except OSError as exc:
            main.close()
            raise PortUnusableError.from_os_error("fast", host, self.fast_port, exc) from None
        self._servers = [main, fast]
        for server in self._servers:
            await server.start_serving()
        self.suspended = False

    @property
    def max_connections(self) -> int:
        """Connections served at once now (``settings.max_connections``, or lower: see below)."""
        return self.refuser.limit

    def set_max_connections(self, limit: int) -> None:
        """Serve at most ``limit`` connections from now on (at least 1); connections already open
        over it are not closed, new ones are refused until they fit (``server.file_budget``)."""
        self.refuser.limit = max(1, limit)

    @property
    def connections(self) -> frozenset[RemotingConnection]:
        """The open client connections."""
        return frozenset(self._connections)

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, flush answers and close every connection."""
        if self._stopped or (not self._servers and not self.suspended):
            return
        self._stopped = True
        self.watchdog.stop()
        self.changes.close()  # held pulls answer now instead of at their timeout
        for server in self._servers:
            server.close()
        if self._grpc is not None:
            # Unary calls finish at once; Telemetry streams stay open as long as their clients do,
            # so they get a short grace, not the whole shutdown timeout.
            await self._grpc.stop(min(self.settings.shutdown_timeout, GRPC_STOP_GRACE))
            self._grpc = None
        if self._http is not None:
            await self._http.stop()
            self._http = None
        self.refuser.close_all()
        if hasattr(self.store, "next_turn"):
            self.store.once_per_turn = None  # type: ignore[attr-defined]
            self.store.next_turn()
        for task in self._background:
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
            self._background.clear()
        connections = list(self._connections)
        if connections:
            await asyncio.gather(*(c.shutdown(self.settings.shutdown_timeout) for c in connections))
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        if self.query_pool is not None:
            self.query_pool.close()
        log.info("stopped (%d connection(s) closed)", len(connections))

    async def __aenter__(self) -> QueryServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def _bound_port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])
