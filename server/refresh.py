"""Keeping up with a store that is still being written: periodic ``MessageStore.refresh()``.

A live broker keeps appending to the CommitLog and rolling new index files; with ``--build-index``
the store's reput (``store.reput``) feeds whatever the CommitLog gained since the last pass to its
consume queue and index builders. Both happen
in ``refresh()``, which is called here on the event loop (store calls are synchronous and the
store is not shared with other threads, so no locking is needed against the processors). Indexing
is done in slices of ``INDEX_SLICE_RECORDS`` records with the loop free in between, so a large
backlog (a whole unindexed CommitLog at start-up) never stalls the requests being served; while a
backlog remains, slices follow each other at once instead of every ``interval``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from server.burst_log import BurstLog
from server.store_api import DispatchWriteError

log = logging.getLogger(__name__)

#: Seconds between two refresh passes (the broker's reput loop runs every millisecond; one second
#: keeps a query server current without competing with the requests it serves).
DEFAULT_REFRESH_INTERVAL = 1.0

#: Records indexed per slice: about 20-50 ms of work at the builder's rate, the longest a request
#: waits behind indexing.
INDEX_SLICE_RECORDS = 2000


class Refreshable(Protocol):
    def refresh(self, max_records: int | None = None) -> bool: ...


async def refresh_forever(
    store: Refreshable,
    interval: float = DEFAULT_REFRESH_INTERVAL,
    on_refresh: Callable[[], None] | None = None,
) -> None:
    """Refresh ``store`` every ``interval`` seconds (at once while it has a backlog) until cancelled.

    ``on_refresh`` runs after every pass (the server wakes its held pulls). Errors are logged, not
    fatal: the server keeps serving what was already loaded. A failure that repeats every pass is
    logged once per burst (``server.burst_log``), with its traceback. A consume queue or index write
    refused by a full disk (``DispatchWriteError``) is a known state, not a fault: the writable store
    has said at ERROR that it refuses SENDs until the entries are written, and each pass tries again;
    it is logged once per burst in one line, without a traceback (the issue 18 soak found one per
    burst for as long as the disk stayed full).
    """
    failures = BurstLog(log, level=logging.ERROR)
    dispatch_failures = BurstLog(log, level=logging.WARNING)
    flush_failures = BurstLog(log, level=logging.ERROR)
    # A store that builds consume queues syncs them once caught up (``MessageStore.flush_queues``):
    # here in the default executor, one flush at a time, never on the event loop (an fsync can take
    # tens of milliseconds, and every held pull and SEND would wait for it).
    deferred = hasattr(store, "flush_queues")
    if deferred:
        store.defer_flush = True  # type: ignore[attr-defined]
    flushing: asyncio.Future[None] | None = None

    def flushed(done: asyncio.Future[None]) -> None:
        if not done.cancelled() and done.exception() is not None:
            flush_failures.event(
                "syncing the consume queues failed (tried again at the next pass that catches up)",
                exc_info=done.exception(),
            )

    backlog = True  # the first pass runs at once: the store may have been opened without catching up
    try:
        while True:
            await asyncio.sleep(0 if backlog else interval)
            try:
                backlog = store.refresh(max_records=INDEX_SLICE_RECORDS)
            except DispatchWriteError as exc:
                backlog = False
                dispatch_failures.event(
                    "the store could not write its consume queues or index (%s): the entries are written"
                    " again from the CommitLog by the next pass",
                    exc,
                )
            except Exception as exc:
                backlog = False
                failures.event("refreshing the store failed; serving what was already loaded", exc_info=exc)
            if deferred and store.flush_due and (flushing is None or flushing.done()):  # type: ignore[attr-defined]
                store.flush_due = False  # type: ignore[attr-defined]
                flushing = asyncio.get_running_loop().run_in_executor(None, store.flush_queues)  # type: ignore[attr-defined]
                flushing.add_done_callback(flushed)
            if on_refresh is not None:
                on_refresh()
    finally:
        if deferred:
            # whoever closes the store next syncs on its own thread (``ConsumeQueueBuilder.close``)
            store.defer_flush = False  # type: ignore[attr-defined]
        if flushing is not None and not flushing.done():
            await asyncio.wait([flushing])  # the store is closed after this: not under a running sync
