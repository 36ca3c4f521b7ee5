"""Extra server processes sharing the listening ports (SO_REUSEPORT), to use more than one core.

Python serves requests on one core per process; the store is memory-mapped, so several processes
reading it share the page cache instead of copying it. The first process binds (with SO_REUSEPORT)
and owns the index builder when there is one; every worker opens the store read-only, binds the same
ports and lets the kernel spread new connections. Workers stop gracefully on SIGTERM/SIGINT like
the first process, which forwards its own stop to them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from server.app import ServerSettings
from store.config.store_config import StoreConfig

log = logging.getLogger(__name__)

#: ``serve(store, settings, refresh_interval)`` from clients.cli.serve, passed in to avoid a cycle.
ServeFn = Callable[[Any, ServerSettings, float], Coroutine[Any, Any, None]]


def _worker_main(
    config: StoreConfig,
    settings: ServerSettings,
    refresh_interval: float,
    serve: ServeFn,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
    log_level: int,
) -> None:
    from store.message_store import MessageStore

    logging.basicConfig(
        level=log_level, format=f"%(asctime)s %(levelname)s worker-{os.getpid()} %(name)s: %(message)s"
    )
    store = MessageStore.open(config)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve(store, settings, refresh_interval))
    finally:
        store.close()


def start_workers(
    count: int,
    config: StoreConfig,
    settings: ServerSettings,
    refresh_interval: float,
    serve: ServeFn,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
) -> list[multiprocessing.process.BaseProcess]:
    """Start ``count`` worker processes serving ``settings.port`` (already bound with reuse_port)."""
    context = multiprocessing.get_context("spawn")
    worker_settings = dataclasses.replace(settings, reuse_port=True)
    workers = []
    for _ in range(count):
        process = context.Process(
            target=_worker_main,
            args=(config, worker_settings, refresh_interval, serve, loop_factory, logging.getLogger().level),
            daemon=False,
        )
        process.start()
        workers.append(process)
    log.info("started %d worker process(es) sharing port %d", count, settings.port)
    return workers


async def stop_workers(workers: list[multiprocessing.process.BaseProcess], timeout: float) -> None:
    """SIGTERM every worker (each finishes its in-flight requests), then wait; kill stragglers."""
    for process in workers:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process in workers:
        await asyncio.to_thread(process.join, timeout)
        if process.is_alive():
            log.warning("worker %s did not stop in %.0f s; killing it", process.pid, timeout)
            process.kill()
            await asyncio.to_thread(process.join, 5)
