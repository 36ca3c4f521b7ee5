"""The thread pool that runs expensive key queries off the event loop, like the broker's query executor.

A key query walks an index chain; on a hot key with a narrow time range (a key written 200k times,
a range holding only its first write) that walk visits every entry of the chain. On the event loop
it would stall every other connection of the process for the whole walk. The Java broker answers
QUERY_MESSAGE on its own executor (``queryMessageExecutor``, ``queryMessageThreadPoolNums`` threads,
default 8 + the number of processors); this is its counterpart.

The processor first answers a query inline with a small budget of index entries (a few
microseconds compiled): nearly every query fits, and answering inline costs no thread hand-off.
Only a query whose walk runs out of that budget is handed to this pool, where it continues from
where the inline walk stopped (``MessageStore.query_message``'s ``resume``), with the full
per-request budget. The compiled chain walk releases the GIL, so the loop keeps serving
while pool threads walk (the pure-Python reference walks under the GIL: correct, but the loop then
shares the interpreter with the walk).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from server.store_api import QUERY_WALK_COMPILED

T = TypeVar("T")

#: How often (seconds) a thread holding the GIL hands it over to a waiting one. CPython's default of
#: 5 ms would make every pool query wait up to that long for the GIL twice (to start, and after its
#: compiled walk) behind a busy event loop; 0.5 ms costs the loop nothing measurable when no pool
#: thread waits (the interval only matters under contention).
GIL_SWITCH_INTERVAL = 0.0005

#: ``BrokerConfig.queryMessageThreadPoolNums``'s default in 4.9.7: 8 + availableProcessors().
DEFAULT_QUERY_THREADS = 8 + (os.cpu_count() or 1)

#: ``BrokerConfig.queryThreadPoolQueueCapacity``'s default: queries queued or running in the pool
#: beyond it are refused with SYSTEM_BUSY, as the broker answers a rejected submission.
DEFAULT_QUEUE_CAPACITY = 20_000

#: The remark of that refusal (``NettyRemotingAbstract`` on ``RejectedExecutionException``).
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

#: Index entries a query may visit inline on the event loop before it is handed to the pool, and
#: the time it may walk there (``INLINE_SECONDS``), whichever ends first. The compiled walk reads
#: an entry in 3.5 ns (a dense chain) to 13 ns (a hot key among 2M others: a cache miss per entry),
#: so 65,536 entries are 0.25-0.85 ms and the deadline ends it first; the pure-Python walk (~1.9 us
#: per entry) gets 400, so that either way no query holds the loop for more than about a
#: millisecond. The pool continues where the inline walk stopped (``resume``): nothing is read
#: twice, so the inline share only decides where the work runs, not how much there is. Before the
#: resume point existed the budget was 2048 (~10 us dense), as a walk the pool finished was a walk
#: read twice; a narrow range on a hot key (5,000 entries, ~70 us) now finishes inline instead of
#: paying the hand-off (BENCHMARKS.md, "Narrow time-range key queries on a hot key": 16x8 went
#: from 0.77-0.85x to 1.3-2.5x Java's requests/s; VIEW p99 beside chain walkers ~0.3 ms worse).
INLINE_BUDGET = 65_536 if QUERY_WALK_COMPILED else 400

#: Seconds a query may walk inline before the rest goes to the pool (checked every 256 entries).
INLINE_SECONDS = 0.0002

#: Index entries one query may visit in all (``serve --query-budget``). A walk that runs out is
#: answered with what it found, as the broker answers a walk cut short. About 5 ms for the compiled
#: walk over a hot key's chain; far more than a mqadmin query (at most 64 hits) ever needs.
DEFAULT_QUERY_BUDGET = 1_000_000


class QueryPool:
    """Threads for expensive queries; ``run`` awaits a function's result without blocking the loop."""

    def __init__(self, threads: int = DEFAULT_QUERY_THREADS, capacity: int = DEFAULT_QUEUE_CAPACITY) -> None:
        if threads < 1:
            raise ValueError(f"a query pool needs at least one thread, got {threads}")
        self.threads = threads
        self.capacity = capacity
        self._pending = 0
        self._count_lock = threading.Lock()
        if sys.getswitchinterval() > GIL_SWITCH_INTERVAL:
            sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="query")

    @property
    def pending(self) -> int:
        """Calls queued or running."""
        return self._pending

    @property
    def full(self) -> bool:
        """True when ``capacity`` calls are queued or running: refuse more (SYSTEM_BUSY)."""
        return self._pending >= self.capacity

    async def run(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        """``fn(*args, **kwargs)`` on a pool thread."""
        future = self._executor.submit(functools.partial(fn, *args, **kwargs))
        with self._count_lock:
            self._pending += 1
        # Done, failed or cancelled before it ran (its awaiting task was cancelled): no longer pending.
        future.add_done_callback(self._finished)
        return await asyncio.wrap_future(future)

    def _finished(self, _future: object) -> None:
        with self._count_lock:
            self._pending -= 1

    def close(self) -> None:
        """Stop the threads once the queries they run are done; queued ones are dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)
