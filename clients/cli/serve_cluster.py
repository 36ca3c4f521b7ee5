"""``rmq-query serve --writable --brokers N``: a name server and N master brokers in one process.

The name server listens on ``--port``; broker ``broker-a``, ``broker-b``, ... each on a port of its
own (``server.cluster.broker_port``: free ones with ``--port 0``), over its own store
``STORE/broker-a``, ``STORE/broker-b``, ... (created when missing). The HTTP port, when on, is
broker-a's API and serves ``/api/brokers/{brokerName}/faults`` for every broker. Once all serve,
stdout gets ``NAMESRV_ADDR=host:port``, one ``BROKER_ADDR=name=host:port`` line per broker, and
``HTTP_URL=`` when the HTTP port is on.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
from collections.abc import Callable

from clients.cli.arg_types import PORT_OFF
from clients.cli.serve_ports import EXIT_PORT_UNUSABLE, unusable_port_message
from server.app import ServerSettings
from server.broker.controller import ConsumeSettings
from server.broker.writable_store import WritableStore
from server.cluster import BROKER_PORT_STEP, Cluster, broker_names
from server.port_errors import PortUnusableError
from store.config.store_config import StoreConfig
from store.write.writer import WriterLockedError

log = logging.getLogger("server")


def refusal(args: argparse.Namespace) -> str | None:
    """Why ``--brokers`` cannot serve with these flags (None: it can)."""
    if not args.writable:
        return "--brokers N starts writable brokers: add --writable"
    if args.workers > 1:
        return "--brokers takes one process: drop --workers"
    if args.grpc_port not in (None, PORT_OFF):
        return (
            "--brokers serves no gRPC port (the brokers' routes are for remoting clients): drop --grpc-port"
        )
    return None


def broker_configs(config: StoreConfig, count: int) -> list[StoreConfig]:
    """Each broker's store under the root ``config`` names, with its own broker name."""
    root = config.store_path_root_dir
    return [
        dataclasses.replace(
            config,
            store_path_root_dir=root / name,
            store_path_commit_log=root / name / "commitlog",
            broker_name=name,
        )
        for name in broker_names(count)
    ]


def open_stores(configs: list[StoreConfig], auto_create_topics: bool | None) -> list[WritableStore]:
    """Every broker's store opened for writing; ``WriterLockedError``/``OSError`` close those opened."""
    stores: list[WritableStore] = []
    try:
        for config in configs:
            stores.append(WritableStore(config, auto_create_topics=auto_create_topics))
    except BaseException:
        for store in stores:
            store.close()
        raise
    return stores


async def serve_cluster(
    stores: list[WritableStore], settings: ServerSettings, consume: ConsumeSettings
) -> None:
    """Serve until SIGINT/SIGTERM, then stop every broker and the name server."""
    cluster = Cluster(stores, dataclasses.replace(settings, grpc_port=None), consume=consume)
    await cluster.start()
    await serve_started_cluster(cluster, f"cluster {settings.cluster}: name server")


async def serve_started_cluster(cluster: Cluster, what: str) -> None:
    """Print the cluster's addresses (``NAMESRV_ADDR=``, one ``BROKER_ADDR=`` per broker, the
    first broker's ``HTTP_URL=``), serve until SIGINT/SIGTERM, then stop it; ``what`` opens the
    log line that names them (``<what> <name server>, brokers ...``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        print(f"NAMESRV_ADDR={cluster.name_server_address}", flush=True)
        for name, address in cluster.broker_addresses().items():
            print(f"BROKER_ADDR={name}={address}", flush=True)
        first = next(iter(cluster.brokers.values())).server
        if first.http_url:
            print(f"HTTP_URL={first.http_url}", flush=True)
        log.info(
            "%s %s, brokers %s",
            what,
            cluster.name_server_address,
            ", ".join(f"{n} {a}" for n, a in cluster.broker_addresses().items()),
        )
        await stop.wait()
        log.info("signal received: stopping the brokers and the name server")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await cluster.stop()


def cluster_port_message(exc: PortUnusableError, args: argparse.Namespace) -> str:
    """One line for a port of the cluster that could not be bound, and the flag that chose it."""
    if exc.role == "name server":
        return f"{exc} (--port {args.port})" if args.port is not None else f"{exc} (the default --port)"
    if exc.role in ("listen", "fast"):
        return (
            f"{exc} (a broker's port: broker i listens on --port + {BROKER_PORT_STEP} * (i + 1), its fast "
            "port 2 below; choose another --port, or --port 0 for free ones)"
        )
    return unusable_port_message(exc, args)


def run_cluster(
    args: argparse.Namespace,
    config: StoreConfig,
    settings: ServerSettings,
    consume: ConsumeSettings,
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
    exit_store_in_use: int,
) -> int:
    """Open the brokers' stores and serve them; the exit code ``serve`` returns."""
    try:
        stores = open_stores(broker_configs(config, args.brokers), args.auto_create_topics)
    except WriterLockedError as exc:
        log.error(
            "cannot write a broker's store under %s: %s (stop what holds it first)",
            config.store_path_root_dir,
            exc,
        )
        return exit_store_in_use
    except (OSError, ValueError) as exc:
        log.error("cannot open the brokers' stores under %s: %s", config.store_path_root_dir, exc)
        return 2
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve_cluster(stores, settings, consume))
    except PortUnusableError as exc:
        log.error("%s", cluster_port_message(exc, args))
        return EXIT_PORT_UNUSABLE
    except (OSError, ValueError) as exc:
        log.error("cannot listen: %s", exc)
        return 1
    finally:
        for store in stores:
            store.close()
    log.info("stopped")
    return 0
