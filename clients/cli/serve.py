"""``rmq-query serve``: answer RocketMQ message queries from a store directory over TCP.

Defaults follow the broker: the store is ``~/store``, the port 10911 plus the fast port 10909, and
the identity (cluster, broker name, maxNum defaults) comes from ``--config broker.conf`` when given.
The HTTP and gRPC ports derive from the listen port (``clients.cli.serve_ports``).
Only loopback is bound unless ``--host`` says otherwise. SIGINT/SIGTERM stop accepting, let
in-flight requests finish, and close cleanly. uvloop is used when installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import multiprocessing.process
import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from clients.cli.arg_types import (
    host_port,
    http_host_name,
    non_negative_int,
    port_number,
    port_or_off,
    positive_int,
    seconds_or_off,
)
from clients.cli.serve_extras import FrontDoorNotInstalled, drop_uninstalled_doors
from clients.cli.serve_ports import (
    EXIT_PORT_UNUSABLE,
    GRPC_PORT_OFFSET,
    HTTP_PORT_OFFSET,
    door_left_closed,
    grpc_port_of,
    http_port_of,
    optional_front_doors,
    unusable_port_message,
)
from clients.cli.store_options import add_store_arguments, config_file
from clients.cli.store_options import config_from_args as load_config
from server.acl.config import AclConfig, load_acl_config
from server.acl.errors import AclConfigError
from server.app import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PORT,
    WILDCARD_HOSTS,
    QueryServer,
    ServerSettings,
    default_advertise_host,
)
from server.broker.controller import ConsumeSettings
from server.broker.creation_limits import (
    DEFAULT_MAX_GROUPS,
    DEFAULT_MAX_PER_CONNECTION,
    DEFAULT_MAX_TOPICS,
    CreationLimits,
)
from server.broker.transactions import (
    DEFAULT_CHECK_INTERVAL_MS,
    DEFAULT_CHECK_MAX,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    TransactionSettings,
)
from server.broker.writable_store import WritableStore
from server.file_budget import FileBudget, FileWatch, plan_connections
from server.grpc.defaults import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION
from server.grpc.tls import DISABLED, PERMISSIVE, TLS_MODES, GrpcTls, TlsConfigError, load_files
from server.http import DEFAULT_MAX_SERIES
from server.loop_slice import DEFAULT_SLICE_US, MAX_SLICE_US, MIN_SLICE_US
from server.port_errors import PortUnusableError
from server.query_pool import DEFAULT_QUERY_BUDGET, DEFAULT_QUERY_THREADS
from server.refresh import DEFAULT_REFRESH_INTERVAL, refresh_forever
from server.remoting.buffer_budget import DEFAULT_MAX_BUFFERED_BYTES
from server.remoting.connection import DEFAULT_REQUEST_TIMEOUT
from server.remoting.processors.pull_message import (
    DEFAULT_MAX_HELD_PULLS,
    DEFAULT_MAX_HELD_PULLS_PER_CONNECTION,
)
from server.remoting.write_budget import DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION
from server.remoting.write_path import DeliveryTimer, WritePath, write_path
from server.workers import WorkerStats, start_workers, stop_workers
from store.config.store_config import ConfigError, StoreConfig
from store.message_store import MessageStore
from store.write.writer import WriterLockedError

if TYPE_CHECKING:
    from server.grpc.sending import GrpcWriter

#: Exit status when ``--writable`` finds the store's ``lock`` held (a running broker or another
#: writer): nothing was read or written. 2 stays "cannot open" (configuration, unreadable files).
EXIT_STORE_IN_USE = 3

#: ``--log-level`` values (any case); anything else used to fall back to INFO without a word.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

HELP = "serve queryMsgByKey / queryMsgById / queryMsgByUniqueKey from a RocketMQ store over TCP"

log = logging.getLogger("server")


def consume_settings(args: argparse.Namespace, config: StoreConfig | None = None) -> ConsumeSettings:
    """The broker options of ``--writable``'s consume side from the command line (and broker.conf's
    ``autoCreateSubscriptionGroup`` and ``enablePropertyFilter``)."""
    property_filter = args.enable_property_filter
    if property_filter is None:
        # broker.conf's when it says; else on, unlike the broker (whose default is off): a test
        # server should serve the SQL92 consumers a test brings.
        configured = None if config is None else config.enable_property_filter
        property_filter = True if configured is None else configured
    return ConsumeSettings(
        auto_create_subscription_group=True if config is None else config.auto_create_subscription_group,
        enable_property_filter=property_filter,
        creation=CreationLimits(
            max_topics=args.max_topics,
            max_groups=args.max_groups,
            per_connection=args.max_auto_create_per_connection,
        ),
        transactions=TransactionSettings(
            check_interval_ms=args.transaction_check_interval_ms,
            timeout_ms=args.transaction_timeout_ms,
            check_max=args.transaction_check_max,
        ),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(
        parser,
        store_required=False,
        store_help="store root directory (default: broker.conf's, else ~/store); given more than once, "
        "each store is served read-only as one broker of a cluster under one name server on --port "
        "(docs/cluster.md)",
        repeatable=True,
    )
    parser.add_argument(
        "--broker-name",
        action="append",
        metavar="NAME",
        help="with several --store: the broker name of each store, in order (default: each store's "
        "broker.conf brokerName)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=port_number,
        help=f"listen port (default broker.conf's listenPort, else {DEFAULT_PORT}); +fast port-2",
    )
    parser.add_argument(
        "--grpc-port",
        type=port_or_off,
        metavar="PORT",
        help="gRPC port for RocketMQ 5 clients (the Proxy's MessagingService): with --writable on by "
        f"default on the listen port + {GRPC_PORT_OFFSET} (0 with --port 0); a read-only server opens it "
        "only when given; 0 picks a free one, printed on the start-up line; off turns it off",
    )
    parser.add_argument(
        "--grpc-tls",
        choices=TLS_MODES,
        default=PERMISSIVE,
        help="TLS on the gRPC port, as the 5.x Proxy's tls.server.mode: permissive (default) takes TLS "
        "and plaintext clients on the one port (the Go and Java clients dial TLS by default, the Python "
        "and Node clients plaintext), enforcing TLS clients only, disabled plaintext only",
    )
    parser.add_argument(
        "--grpc-tls-cert",
        type=Path,
        metavar="PEM",
        help="the gRPC port's certificate (chain), PEM; with --grpc-tls-key (default: a self-signed "
        "certificate made at start for the advertised host, this machine's name and loopback; its "
        "SHA-256 fingerprint is logged)",
    )
    parser.add_argument(
        "--grpc-tls-key", type=Path, metavar="PEM", help="the private key of --grpc-tls-cert, PEM"
    )
    parser.add_argument(
        "--grpc-tls-client-ca",
        type=Path,
        metavar="PEM",
        help="CA certificate(s), PEM: TLS clients must show a certificate one of them signed "
        "(the Proxy's tlsServerNeedClientAuth)",
    )
    parser.add_argument(
        "--http",
        type=port_or_off,
        metavar="PORT",
        help=f"HTTP port: JSON API, /openapi.json and Prometheus /metrics (default: the listen port + "
        f"{HTTP_PORT_OFFSET}, beside the fast port (-2), the broker's HA port (+1) and gRPC (+"
        f"{GRPC_PORT_OFFSET}); 0 with --port 0); 0 picks a free one; off turns it off; bound on --host "
        "like the broker port; the start-up line prints its URL",
    )
    parser.add_argument(
        "--http-allow-host",
        type=http_host_name,
        action="append",
        default=[],
        metavar="NAME",
        help="a name the HTTP port answers to (repeatable): besides localhost, IP addresses, --host, the "
        "advertised host and this machine's name, a request whose Host header names anything else is "
        "refused (421), so a web page cannot reach the API through a name it points at this server "
        "(DNS rebinding); give the names a reverse proxy or DNS alias serves it under",
    )
    parser.add_argument(
        "--metrics-max-series",
        type=positive_int,
        default=DEFAULT_MAX_SERIES,
        metavar="N",
        help=f"the most per-topic and per-group series one /metrics scrape carries (default "
        f"{DEFAULT_MAX_SERIES}; topics, then groups, in name order); what it leaves out is counted "
        "in rmq_query_metrics_series_dropped_last and _total",
    )
    parser.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        type=host_port,
        help="address put in routes (default HOST:PORT bound)",
    )
    parser.add_argument(
        "--build-index",
        action="store_true",
        help="index the CommitLog ourselves and keep indexing as it grows (writes under the store's index/)",
    )
    parser.add_argument(
        "--writable",
        action="store_true",
        help="accept SEND_MESSAGE/SEND_MESSAGE_V2/SEND_BATCH_MESSAGE and append to the store like a broker "
        "(creates the store if missing; indexes as it writes; prints NAMESRV_ADDR=HOST:PORT on stdout)",
    )
    parser.add_argument(
        "--brokers",
        type=positive_int,
        metavar="N",
        help="with --writable: a whole cluster in this process, a name server on --port and N master "
        "brokers broker-a, broker-b, ... (DefaultCluster), each over its own store STORE/broker-a, ... "
        "and its own ports (printed: NAMESRV_ADDR=, one BROKER_ADDR=name=host:port per broker); faults "
        "on demand at /api/brokers/{brokerName}/faults on the HTTP port (docs/cluster.md)",
    )
    parser.add_argument(
        "--auto-create-topics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --writable: create unknown topics on their first SEND from TBW102 "
        "(default: broker.conf's autoCreateTopicEnable, else on)",
    )
    parser.add_argument(
        "--enable-property-filter",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --writable: serve consumers that filter by SQL92 (the broker's enablePropertyFilter; "
        "default: broker.conf's enablePropertyFilter when it sets it, else on)",
    )
    parser.add_argument(
        "--max-topics",
        type=positive_int,
        default=DEFAULT_MAX_TOPICS,
        metavar="N",
        help="with --writable: past N topics, none is created by a client (a SEND to an unknown topic gets "
        "TOPIC_NOT_EXIST, a heartbeat's %%RETRY%% topic is skipped); an operator's updateTopic still "
        "creates (default %(default)s)",
    )
    parser.add_argument(
        "--max-groups",
        type=positive_int,
        default=DEFAULT_MAX_GROUPS,
        metavar="N",
        help="with --writable: past N subscription groups (or N groups with offsets), none is created by "
        "a client's heartbeat or offset update (SUBSCRIPTION_GROUP_NOT_EXIST); default %(default)s",
    )
    parser.add_argument(
        "--max-auto-create-per-connection",
        type=positive_int,
        default=DEFAULT_MAX_PER_CONNECTION,
        metavar="N",
        help="with --writable: the most topics and groups one connection's heartbeats and offset updates "
        "may create (default %(default)s)",
    )
    parser.add_argument(
        "--transaction-check-interval-ms",
        type=positive_int,
        default=DEFAULT_CHECK_INTERVAL_MS,
        help="with --writable: how often undecided half (transactional) messages are checked back with "
        "their producer (the broker's transactionCheckInterval; default %(default)s)",
    )
    parser.add_argument(
        "--transaction-timeout-ms",
        type=non_negative_int,
        default=DEFAULT_TRANSACTION_TIMEOUT_MS,
        help="with --writable: a half message younger than this is not checked back yet "
        "(transactionTimeOut; default %(default)s)",
    )
    parser.add_argument(
        "--transaction-check-max",
        type=positive_int,
        default=DEFAULT_CHECK_MAX,
        help="with --writable: check-backs of one half message before it is discarded to "
        "TRANS_CHECK_MAX_TIME_TOPIC (transactionCheckMax; default %(default)s)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="serve a freshly generated demo store (written to --store, else to a temporary directory)",
    )
    parser.add_argument(
        "--refresh-interval",
        type=seconds_or_off,
        default=DEFAULT_REFRESH_INTERVAL,
        help="seconds between picking up new CommitLog/index data; 0 turns it off (default %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=seconds_or_off,
        default=120.0,
        help="close connections idle this many seconds; 0 never does (default %(default)s)",
    )
    parser.add_argument(
        "--request-timeout",
        type=seconds_or_off,
        default=DEFAULT_REQUEST_TIMEOUT,
        help="seconds a request may take to arrive whole from its first byte; past it the connection is "
        "closed (a byte a second no longer holds it past --idle-timeout); 0 never does (default %(default)s)",
    )
    parser.add_argument(
        "--loop-slice-us",
        type=loop_slice_us,
        default=DEFAULT_SLICE_US,
        help="the scheduling slice (µs, 100-100000) asked of Linux for the event loop's thread, so that a "
        "request arriving while another process runs on its core gets the core back sooner; 0 keeps the "
        "kernel's default (default %(default)s; server/loop_slice.py)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="server processes sharing the ports via SO_REUSEPORT (default 1; 2 uses both cores of 2)",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        default=None,
        metavar="N",
        help="connections served at once per process; one more is answered SYSTEM_BUSY (code 2) and "
        f"closed (default {DEFAULT_MAX_CONNECTIONS}, lowered to what the open-file limit allows after "
        "keeping descriptors for the store's files; an explicit N above that is lowered too, with a "
        "warning)",
    )
    parser.add_argument(
        "--max-buffered-mib",
        type=positive_int,
        default=DEFAULT_MAX_BUFFERED_BYTES // (1024 * 1024),
        metavar="MIB",
        help="MiB all connections together may hold in unfinished request frames; past it the "
        "connections holding the most are closed (default %(default)s)",
    )
    parser.add_argument(
        "--max-queued-mib",
        type=positive_int,
        default=DEFAULT_MAX_QUEUED_BYTES // (1024 * 1024),
        metavar="MIB",
        help="MiB of answers all connections together may have queued for peers not reading them; past "
        "it the connections with the most queued are cut off (default %(default)s)",
    )
    parser.add_argument(
        "--max-queued-mib-per-connection",
        type=positive_int,
        default=DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION // (1024 * 1024),
        metavar="MIB",
        help="MiB of answers one connection may have queued and not read; past it the connection is cut "
        "off (default %(default)s)",
    )
    parser.add_argument(
        "--grpc-max-request-mib",
        type=positive_int,
        default=DEFAULT_MAX_REQUEST_BYTES // (1024 * 1024),
        metavar="MIB",
        help="MiB of request messages all gRPC calls together may hold; a call is let in with room for "
        "the largest message before it is read, waits up to 2 s for it, then gets RESOURCE_EXHAUSTED "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--grpc-max-request-mib-per-connection",
        type=positive_int,
        default=DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION // (1024 * 1024),
        metavar="MIB",
        help="the same for the calls of one gRPC connection (default %(default)s); both are raised to one "
        "message of the largest size if lower",
    )
    parser.add_argument(
        "--max-held-pulls",
        type=positive_int,
        default=DEFAULT_MAX_HELD_PULLS,
        metavar="N",
        help="long-polling pulls held at once per process; one more is answered SYSTEM_BUSY (code 2), "
        "as the broker answers a pull its thread pool cannot take (default %(default)s)",
    )
    parser.add_argument(
        "--max-held-pulls-per-connection",
        type=positive_int,
        default=DEFAULT_MAX_HELD_PULLS_PER_CONNECTION,
        metavar="N",
        help="long-polling pulls one connection may have held at once; one more is answered "
        "SYSTEM_BUSY (default %(default)s)",
    )
    parser.add_argument(
        "--acl",
        type=Path,
        metavar="FILE",
        help="check RocketMQ ACL signatures and permissions against this plain_acl.yml (default: off, "
        "like the broker); denied requests get NO_PERMISSION (16)",
    )
    parser.add_argument(
        "--query-threads",
        type=positive_int,
        default=DEFAULT_QUERY_THREADS,
        metavar="N",
        help="threads per process for key queries too long for the event loop (default %(default)s: "
        "8 + CPUs, the broker's queryMessageThreadPoolNums)",
    )
    parser.add_argument(
        "--query-budget",
        type=positive_int,
        default=DEFAULT_QUERY_BUDGET,
        metavar="N",
        help="index entries one key query may visit; a walk cut short answers what it found "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        help="logging level (default INFO)",
    )


def check_arguments(args: argparse.Namespace) -> str | None:
    """``--demo`` writes and serves its own store: the flags that describe another store would be
    ignored; the gRPC TLS files go together and need TLS on."""
    tls_files = [
        flag
        for flag, value in (
            ("--grpc-tls-cert", args.grpc_tls_cert),
            ("--grpc-tls-key", args.grpc_tls_key),
            ("--grpc-tls-client-ca", args.grpc_tls_client_ca),
        )
        if value is not None
    ]
    if tls_files and args.grpc_tls == DISABLED:
        ignored = ", ".join(tls_files)
        return f"argument --grpc-tls disabled: the gRPC port is plaintext only, so {ignored} would be ignored"
    if (args.grpc_tls_cert is None) != (args.grpc_tls_key is None):
        return "arguments --grpc-tls-cert and --grpc-tls-key go together"
    if args.demo:
        given = [
            flag
            for flag, value in (
                ("--config", args.config),
                ("--commitlog", args.commitlog),
                ("--mapped-file-size", args.mapped_file_size),
                ("--max-hash-slot-num", args.max_hash_slot_num),
                ("--max-index-num", args.max_index_num),
            )
            if value is not None
        ]
        if given:
            ignored = ", ".join(given)
            return f"argument --demo: writes its own store and broker.conf, so {ignored} would be ignored"
    return None


def store_file_count(config: StoreConfig) -> int:
    """Descriptors the store's files hold: one per mapped CommitLog file, two per index file (the
    map's own and the one ``IndexFile.fd`` keeps for the query's size check)."""
    count = 0
    for directory, each in ((config.store_path_commit_log, 1), (config.store_path_root_dir / "index", 2)):
        try:
            count += each * sum(1 for entry in os.scandir(directory) if entry.is_file())
        except OSError:
            continue
    return count


def make_demo(args: argparse.Namespace, stack: contextlib.ExitStack) -> StoreConfig:
    """Write the demo store (offset ids pointing at where we will listen) and return its config."""
    if args.store is not None:
        root = args.store.expanduser().resolve()
    else:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rmq-demo-"))) / "store"
    port = args.port or DEFAULT_PORT
    host = args.advertise.rsplit(":", 1)[0] if args.advertise else default_advertise_host(args.host)
    from clients.testkit.demo import demo_config, make_demo_store  # only --demo needs the generator

    summary = make_demo_store(root, config=demo_config(root, broker_ip=host, port=port))
    log.info("demo store: %d messages written to %s", summary.messages, summary.root)
    for topic in sorted(summary.sample_keys):
        log.info("demo: topic %s, keys %s", topic, " ".join(summary.sample_keys[topic]))
    for topic, unique_key in summary.sample_unique_keys:
        log.info("demo: unique key %s (topic %s)", unique_key, topic)
    for msg_id in summary.sample_offset_ids:
        log.info("demo: offset id %s", msg_id)
    return StoreConfig.load(root / "broker.conf")


def grpc_tls_of(args: argparse.Namespace) -> GrpcTls:
    """``--grpc-tls`` and its files, read and checked (``TlsConfigError`` for a file that cannot serve)."""
    mode = getattr(args, "grpc_tls", PERMISSIVE)
    if mode == DISABLED:
        return GrpcTls(mode=DISABLED)
    cert, key, client_ca = load_files(
        getattr(args, "grpc_tls_cert", None),
        getattr(args, "grpc_tls_key", None),
        getattr(args, "grpc_tls_client_ca", None),
    )
    return GrpcTls(mode=mode, cert_pem=cert, key_pem=key, client_ca_pem=client_ca)


def loop_slice_us(value: str) -> int:
    """``--loop-slice-us``: 0 (the kernel's default slice) or the kernel's 100-100,000 µs."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number != 0 and not MIN_SLICE_US <= number <= MAX_SLICE_US:
        raise argparse.ArgumentTypeError(
            f"expected 0 (the kernel's default) or {MIN_SLICE_US}-{MAX_SLICE_US} microseconds, got {value!r}"
        )
    return number


def settings_from(
    args: argparse.Namespace,
    config: StoreConfig,
    acl: AclConfig | None = None,
    budget: FileBudget | None = None,
    grpc_tls: GrpcTls | None = None,
) -> ServerSettings:
    from_conf = args.demo or config_file(args) is not None
    port = args.port if args.port is not None else (config.listen_port if from_conf else DEFAULT_PORT)
    return ServerSettings(
        host=args.host,
        port=port,
        advertise=args.advertise,
        # Bound to every interface, routes name brokerIP1 as the broker's do (not the loopback
        # address a host-name lookup often gives, which remote clients cannot dial).
        advertise_host=config.broker_ip1 if args.host in WILDCARD_HOSTS else None,
        cluster=config.broker_cluster_name,
        broker_name=config.broker_name,
        default_query_max_num=config.default_query_max_num,
        idle_timeout=args.idle_timeout,
        request_timeout=args.request_timeout,
        loop_slice_us=getattr(args, "loop_slice_us", 0),
        max_connections=budget.max_connections
        if budget is not None
        else args.max_connections or DEFAULT_MAX_CONNECTIONS,
        max_waiting=budget.max_waiting if budget is not None else None,
        max_buffered_bytes=args.max_buffered_mib * 1024 * 1024,
        acl=acl,
        query_threads=args.query_threads,
        query_budget=args.query_budget,
        max_held_pulls=args.max_held_pulls,
        max_held_pulls_per_connection=args.max_held_pulls_per_connection,
        max_queued_bytes=args.max_queued_mib * 1024 * 1024,
        max_queued_bytes_per_connection=args.max_queued_mib_per_connection * 1024 * 1024,
        grpc_port=grpc_port_of(args.grpc_port, port, args.writable),
        grpc_tls=grpc_tls if grpc_tls is not None else GrpcTls(),
        grpc_max_request_bytes=args.grpc_max_request_mib * 1024 * 1024,
        grpc_max_request_bytes_per_connection=args.grpc_max_request_mib_per_connection * 1024 * 1024,
        http_port=http_port_of(getattr(args, "http", None), port),
        metrics_max_series=args.metrics_max_series,
        http_allowed_hosts=tuple(getattr(args, "http_allow_host", ())),
        optional_front_doors=optional_front_doors(args),
    )


#: Seconds between two checks of the store's file count against the connection limit.
FILE_CHECK_INTERVAL = 5.0


async def follow_file_limit(
    server: QueryServer,
    watch: FileWatch,
    count_files: Callable[[], int],
    interval: float = FILE_CHECK_INTERVAL,
) -> None:
    """Keep the connection limit within the open-file limit while the store gains or loses files."""
    while True:
        await asyncio.sleep(interval)
        files = count_files()
        limit = watch.limit(files)
        if limit != server.max_connections:
            log.log(
                logging.WARNING if limit < server.max_connections else logging.INFO,
                "connection limit now %d (was %d): the store has %d files, whose descriptors come out of "
                "the open-file limit's share for connections",
                limit,
                server.max_connections,
                files,
            )
            server.set_max_connections(limit)


async def serve(
    store: MessageStore,
    settings: ServerSettings,
    refresh_interval: float,
    *,
    workers: int = 0,
    config: StoreConfig | None = None,
    writable: WritableStore | None = None,
    file_watch: FileWatch | None = None,
    consume: ConsumeSettings | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, then stop gracefully (``workers`` extra processes share the ports).

    ``file_watch``: lowers the connection limit as the store gains files (``server.file_budget``).
    """
    if workers > 0:
        settings = dataclasses.replace(settings, reuse_port=True)
    timer = DeliveryTimer(writable) if writable is not None else None
    path = write_path(writable, timer=timer, consume=consume) if writable is not None else None
    server = QueryServer(store, settings, configure=path)
    # The remoting ports serve (and are announced) first; the HTTP and gRPC ports, whose libraries
    # take longer to import than the rest of start-up, follow at once (``start_front_doors``).
    await server.start(defer_front_doors=True)
    children: list[multiprocessing.process.BaseProcess] = []
    worker_stats: WorkerStats | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # For test suites in other languages: one line on stdout to read the address from, printed
    # once a SIGTERM would stop the server cleanly; when a port was named for the HTTP or gRPC door,
    # only once that port is bound too (a start that fails on it never said it serves).
    announce = server.identity.address if writable is not None and server.identity is not None else None
    named_doors = any(
        port is not None and door not in settings.optional_front_doors
        for door, port in (("grpc", settings.grpc_port), ("http", settings.http_port))
    )
    if announce is not None and not named_doors:
        print(f"NAMESRV_ADDR={announce}", flush=True)
    if refresh_interval > 0:
        server.run_in_background(lambda: refresh_forever(store, refresh_interval, server.changes.pulse))
        if file_watch is not None and config is not None:
            watched = config
            server.run_in_background(
                lambda: follow_file_limit(server, file_watch, lambda: store_file_count(watched))
            )
    try:
        await server.start_front_doors(_grpc_writer(writable, settings, timer, path))
        if settings.grpc_port is not None and not server.grpc_port:
            log.warning(door_left_closed("grpc", settings.grpc_port))
        if settings.http_port is not None and not server.http_port:
            log.warning(door_left_closed("http", settings.http_port))
        if announce is not None:
            if named_doors:
                print(f"NAMESRV_ADDR={announce}", flush=True)
            if server.grpc_port:
                host = announce.rpartition(":")[0]
                print(f"GRPC_ENDPOINTS={host}:{server.grpc_port}", flush=True)
            if server.http_port:
                print(f"HTTP_URL={server.http_url}", flush=True)
        if workers > 0 and config is not None:
            # Started once this process said it serves (its start-up line first). The gRPC and
            # HTTP ports are the first process's only (their clients hold few connections).
            # Their request counters come back through worker_stats, for this process's /metrics.
            worker_stats = WorkerStats()
            server.worker_requests = worker_stats.snapshots
            bound = dataclasses.replace(
                settings,
                port=server.port,
                advertise=server.identity.address if server.identity else None,
                grpc_port=None,
                http_port=None,
                stats_queue=worker_stats.queue,
            )
            open_store = functools.partial(MessageStore.open, config)
            children = start_workers(workers, open_store, bound, refresh_interval, serve, _loop_factory())
        # What start-up made (the store's tables of topics, groups and offsets, its mapped files) is
        # moved out of the cyclic collector's reach: each full collection walked all of it on the
        # event loop, ~100 ms at 50,000 topics and groups (issue 30). What is made later is
        # collected as before.
        gc.freeze()
        await stop.wait()
        log.info("signal received: finishing in-flight requests and closing")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await server.stop()
        if children:
            await stop_workers(children, settings.shutdown_timeout + 5)
        if worker_stats is not None:
            worker_stats.close()


def _grpc_writer(
    writable: WritableStore | None,
    settings: ServerSettings,
    timer: DeliveryTimer | None,
    path: WritePath | None,
) -> GrpcWriter | None:
    """SendMessage's way into the writable store; it shares the write path's delivery timer and
    consume side (groups, committed offsets). Imported here: see ``QueryServer.start_front_doors``."""
    if writable is None or timer is None or path is None or settings.grpc_port is None:
        return None
    from server.grpc.sending import GrpcWriter

    return GrpcWriter(writable, cluster=settings.cluster, on_scheduled=timer.arm, broker=path.broker)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stores = getattr(args, "stores", None) or []
    if len(stores) > 1:
        from clients.cli import serve_stores

        try:
            acl = _load_acl(args)
        except AclConfigError as exc:
            log.error("bad --acl file: %s", exc)
            return 2
        return serve_stores.run_stores(
            args,
            stores,
            loop_factory=_loop_factory(),
            # the name server's port: --port, else the first store's broker.conf listenPort
            settings_of=lambda config: settings_from(args, config, acl),
        )
    if getattr(args, "broker_name", None):
        log.error("--broker-name names the brokers of several --store: give one --store per name")
        return 2
    with contextlib.ExitStack() as stack:
        try:
            config = make_demo(args, stack) if args.demo else load_config(args)
        except ConfigError as exc:
            log.error("bad configuration: %s", exc)
            return 2
        except (FileExistsError, OSError) as exc:
            log.error("cannot write the demo store: %s", exc)
            return 2
        return _serve_store(args, config)


def _load_acl(args: argparse.Namespace) -> AclConfig | None:
    if args.acl is None:
        return None
    acl = load_acl_config(args.acl)
    log.info(
        "access control on (%s): %d account(s), %d global whitelist entr%s; name-server requests unchecked",
        args.acl,
        len(acl.accounts),
        len(acl.global_white),
        "y" if len(acl.global_white) == 1 else "ies",
    )
    return acl


def _serve_store(args: argparse.Namespace, config: StoreConfig) -> int:
    try:
        acl = _load_acl(args)
    except AclConfigError as exc:
        log.error("bad --acl file: %s", exc)
        return 2
    try:
        grpc_tls = grpc_tls_of(args)
    except TlsConfigError as exc:
        log.error("cannot serve gRPC with TLS: %s", exc)
        return 2
    if getattr(args, "brokers", None) is not None:
        return _serve_cluster(args, config, acl, grpc_tls)
    writable: WritableStore | None = None
    if args.writable:
        if args.workers > 1:
            log.error("--writable takes one process (one writer per store): drop --workers")
            return 2
        try:
            writable = WritableStore(config, auto_create_topics=args.auto_create_topics)
        except WriterLockedError as exc:
            log.error(
                "cannot write the store at %s: %s (a broker or another `serve --writable` on it; "
                "stop that one first)",
                config.store_path_root_dir,
                exc,
            )
            return EXIT_STORE_IN_USE
        except (OSError, ValueError) as exc:
            log.error("cannot open the store at %s for writing: %s", config.store_path_root_dir, exc)
            return 2
        store = writable.reader
    elif not config.store_path_commit_log.is_dir():
        log.error("no CommitLog directory at %s (is --store the store root?)", config.store_path_commit_log)
        return 2
    else:
        try:
            # With --build-index and refreshing on, the backlog is indexed in slices after serving
            # starts (server.refresh); with refreshing off it is indexed here, before serving.
            store = MessageStore.open(
                config, build_index=args.build_index, catch_up=args.refresh_interval <= 0
            )
        except (OSError, ValueError) as exc:
            log.error("cannot open the store at %s: %s", config.store_path_root_dir, exc)
            return 2
    topics = sorted(store.topics())
    log.info(
        "store %s: CommitLog %d..%d, %d topic(s)%s, index %s",
        config.store_path_root_dir,
        store.commitlog.min_offset,
        store.commitlog.max_offset,
        len(topics),
        f" ({', '.join(topics[:10])}{', ...' if len(topics) > 10 else ''})" if topics else "",
        "kept up to date as records are written (--writable)"
        if writable is not None
        else "built and kept up to date here (--build-index)"
        if args.build_index
        else "read-only",
    )
    if not topics and writable is None:
        log.warning(
            "no topics found (no consumequeue/ directories or config/topics.json, nothing newly indexed): "
            "route requests will be answered TOPIC_NOT_EXIST, so clients cannot reach this store's messages"
        )
    budget = plan_connections(args.max_connections, DEFAULT_MAX_CONNECTIONS, store_file_count(config))
    try:
        settings = settings_from(args, config, acl, budget, grpc_tls)
        settings, closed = drop_uninstalled_doors(settings)
    except (ValueError, FrontDoorNotInstalled) as exc:
        log.error("%s", exc)
        if writable is not None:
            writable.close()
        else:
            store.close()
        return 2
    for warning in closed:
        log.warning("%s", warning)
    factory = _loop_factory()
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(
                serve(
                    store,
                    settings,
                    args.refresh_interval,
                    workers=max(0, args.workers - 1),
                    config=config,
                    writable=writable,
                    file_watch=FileWatch(budget, lambda: store_file_count(config)),
                    consume=consume_settings(args, config),
                )
            )
    except PortUnusableError as exc:
        log.error("%s", unusable_port_message(exc, args))
        return EXIT_PORT_UNUSABLE
    except (OSError, ValueError) as exc:
        log.error("cannot listen: %s", exc)
        return 1
    finally:
        if writable is not None:
            writable.close()
        else:
            store.close()
    log.info("stopped")
    return 0


def _serve_cluster(
    args: argparse.Namespace, config: StoreConfig, acl: AclConfig | None, grpc_tls: GrpcTls
) -> int:
    """``--brokers N`` (``clients.cli.serve_cluster``)."""
    from clients.cli import serve_cluster

    refused = serve_cluster.refusal(args)
    if refused is not None:
        log.error("%s", refused)
        return 2
    try:
        settings = settings_from(args, config, acl, None, grpc_tls)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    return serve_cluster.run_cluster(
        args,
        config,
        settings,
        consume_settings(args, config),
        loop_factory=_loop_factory(),
        exit_store_in_use=EXIT_STORE_IN_USE,
    )
