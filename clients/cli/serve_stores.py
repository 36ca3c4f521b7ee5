"""``rmq-query serve --store A --store B ...``: several stores, each served read-only as one broker
of a cluster, under one name server on ``--port``.

For the stores of a retired or crashed cluster: each store is the broker its ``broker.conf`` names
(``STORE/broker.conf``'s brokerName, or ``--broker-name`` per store, in order), on its own ports
(``server.cluster.broker_port``), and the name server merges what they hold, so ``mqadmin
queryMsgByKey -n`` (which asks every broker of the topic's route) and ``mqadmin queryMsgById`` find
a message in whichever store has it, through one address. Stdout gets ``NAMESRV_ADDR=`` and one
``BROKER_ADDR=name=host:port`` per store once all serve. Stores are followed as they grow (the
refresh interval), as a single read-only store is.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from clients.cli.serve_cluster import cluster_port_message, serve_started_cluster
from clients.cli.serve_ports import EXIT_PORT_UNUSABLE
from clients.cli.store_options import config_from_args
from server.app import ServerSettings
from server.cluster import MAX_BROKERS, Cluster, ReadOnlyStore
from server.port_errors import PortUnusableError
from server.refresh import refresh_forever
from store.config.store_config import ConfigError, StoreConfig
from store.message_store import MessageStore

log = logging.getLogger("server")


def refusal(args: argparse.Namespace, stores: list[Path]) -> str | None:
    """Why several stores cannot be served with these flags (None: they can)."""
    if args.writable:
        return "several --store are served read-only: drop --writable (--brokers N makes writable brokers)"
    if getattr(args, "brokers", None) is not None:
        return "--brokers makes its own stores under one --store: give one --store"
    if args.config is not None:
        return "with several --store each store's own broker.conf is read: drop --config"
    if args.workers > 1:
        return "several --store take one process: drop --workers"
    if len(stores) > MAX_BROKERS:
        return f"at most {MAX_BROKERS} stores"
    names = args.broker_name or []
    if names and len(names) != len(stores):
        return f"{len(names)} --broker-name for {len(stores)} --store: give one name per store, in order"
    return None


def store_configs(args: argparse.Namespace, stores: list[Path]) -> list[StoreConfig]:
    """Each store's config (its own broker.conf, the geometry flags on top), named as asked."""
    configs = []
    for index, store in enumerate(stores):
        config = config_from_args(argparse.Namespace(**{**vars(args), "store": store}))
        if args.broker_name:
            config = dataclasses.replace(config, broker_name=args.broker_name[index])
        configs.append(config)
    names = [config.broker_name for config in configs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(
            f"two stores would be broker {', '.join(repeated)}: "
            "name each with --broker-name, in --store order"
        )
    return configs


async def serve_stores(
    stores: list[MessageStore],
    names: list[tuple[str, str]],
    settings: ServerSettings,
    refresh_interval: float,
) -> None:
    """Serve until SIGINT/SIGTERM."""
    cluster = Cluster(
        [ReadOnlyStore(store, name, cluster) for store, (name, cluster) in zip(stores, names, strict=True)],
        dataclasses.replace(settings, grpc_port=None),
    )
    await cluster.start()
    if refresh_interval > 0:
        for store, broker in zip(stores, cluster.brokers.values(), strict=True):
            server = broker.server
            server.run_in_background(
                lambda store=store, server=server: refresh_forever(
                    store, refresh_interval, server.changes.pulse
                )
            )
    await serve_started_cluster(cluster, f"{len(stores)} stores under the name server")


def run_stores(
    args: argparse.Namespace,
    stores: list[Path],
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
    settings_of: Callable[[StoreConfig], ServerSettings],
) -> int:
    """Open every store read-only and serve them as one cluster; the exit code ``serve`` returns.
    ``settings_of``: ``serve``'s settings from the flags and the first store's config."""
    refused = refusal(args, stores)
    if refused is not None:
        log.error("%s", refused)
        return 2
    try:
        configs = store_configs(args, stores)
    except ConfigError as exc:
        log.error("bad configuration: %s", exc)
        return 2
    opened: list[MessageStore] = []
    try:
        for config in configs:
            if not config.store_path_commit_log.is_dir():
                log.error(
                    "no CommitLog directory at %s (is --store the store root?)", config.store_path_commit_log
                )
                return 2
            opened.append(MessageStore.open(config, catch_up=args.refresh_interval <= 0))
        settings = settings_of(configs[0])
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(
                serve_stores(
                    opened,
                    [(c.broker_name, c.broker_cluster_name) for c in configs],
                    settings,
                    args.refresh_interval,
                )
            )
    except PortUnusableError as exc:
        log.error("%s", cluster_port_message(exc, args))
        return EXIT_PORT_UNUSABLE
    except (OSError, ValueError) as exc:
        log.error("cannot open or serve the stores: %s", exc)
        return 1
    finally:
        for store in opened:
            store.close()
    log.info("stopped")
    return 0
