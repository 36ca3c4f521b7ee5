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
import queue
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from server.app import ServerSettings
from server.request_stats import RequestStats

log = logging.getLogger(__name__)

#: ``serve(store, settings, refresh_interval)`` from clients.cli.serve, passed in to avoid a cycle.
ServeFn = Callable[[Any, ServerSettings, float], Coroutine[Any, Any, None]]

#: Opens the worker's own read-only store (``functools.partial(MessageStore.open, config)``): passed
#: in by the caller, which knows the store, so the server reaches it only through ``server.store_api``.
#: Pickled to the worker process, so a module-level function or a partial of one.
OpenStoreFn = Callable[[], Any]


class WorkerStats:
    """The workers' request counters, as each last reported them (``server.request_stats.report_forever``):
    the first process's ``/metrics`` adds them to its own, so that ``--workers N`` counts every
    request. A thread takes the reports off the queue (its reads block); ``snapshots`` is read on the
    event loop at scrape time."""

    def __init__(self) -> None:
        self.queue: Any = multiprocessing.get_context("spawn").Queue()
        #: worker pid -> its counters at its last report (a worker's counters only grow).
        self.latest: dict[int, RequestStats] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="worker-stats", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                pid, stats = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError, ValueError):  # the queue was closed under the read
                return
            self.latest[pid] = stats

    def snapshots(self) -> list[RequestStats]:
        return list(self.latest.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.queue.close()
        self.queue.cancel_join_thread()


def _worker_main(
    open_store: OpenStoreFn,
    settings: ServerSettings,
    refresh_interval: float,
    serve: ServeFn,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
    log_level: int,
) -> None:
    logging.basicConfig(
        level=log_level, format=f"%(asctime)s %(levelname)s worker-{os.getpid()} %(name)s: %(message)s"
    )
    store = open_store()
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve(store, settings, refresh_interval))
    finally:
        store.close()


def start_workers(
    count: int,
    open_store: OpenStoreFn,
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
            args=(
                open_store,
                worker_settings,
                refresh_interval,
                serve,
                loop_factory,
                logging.getLogger().level,
            ),
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
