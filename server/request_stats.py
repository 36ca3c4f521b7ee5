"""Requests served on the remoting ports, counted by request code for ``/metrics``.

The dispatcher calls ``observe`` once per answered request. Plain dicts and lists, not
``prometheus_client`` metric objects: those take a lock per update, and this runs for every request
on the event loop, while the counts are read only when Prometheus scrapes (``server.http.metrics``
turns them into families then). The latency buckets are fixed: the server's answers range from
microseconds (offset reads) to the query pool's seconds (key queries over a large index).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Callable, Iterable

from protocol.codes import ResponseCode

#: Upper bounds (seconds) of the latency histogram's buckets; +Inf is implied.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.0005,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
)

#: Response codes counted as errors: the server failed, was too busy, did not know the code, or
#: refused access. "Not found" answers (QUERY_NOT_FOUND, PULL_NOT_FOUND, ...) are answers, not errors.
ERROR_CODES = frozenset(
    {
        int(ResponseCode.SYSTEM_ERROR),
        int(ResponseCode.SYSTEM_BUSY),
        int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
        int(ResponseCode.NO_PERMISSION),
    }
)


class RequestStats:
    """Counts, error counts and latency histograms by request code, since the server started."""

    __slots__ = ("buckets", "errors", "requests", "sums")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        #: (request code, response code) -> answers with a response code of ``ERROR_CODES``.
        self.errors: dict[tuple[int, int], int] = {}
        #: request code -> count per bucket of ``LATENCY_BUCKETS`` plus one for +Inf (not cumulative).
        self.buckets: dict[int, list[int]] = {}
        self.sums: dict[int, float] = {}

    def observe(self, code: int, response_code: int | None, seconds: float) -> None:
        """One request answered (``response_code`` None: nothing was sent back)."""
        self.requests[code] = self.requests.get(code, 0) + 1
        if response_code is not None and response_code in ERROR_CODES:
            key = (code, response_code)
            self.errors[key] = self.errors.get(key, 0) + 1
        counts = self.buckets.get(code)
        if counts is None:
            counts = self.buckets[code] = [0] * (len(LATENCY_BUCKETS) + 1)
        counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sums[code] = self.sums.get(code, 0.0) + seconds

    def copy(self) -> RequestStats:
        """A snapshot, safe to hand to another thread or process while this one keeps counting."""
        out = RequestStats()
        out.requests = dict(self.requests)
        out.errors = dict(self.errors)
        out.buckets = {code: list(counts) for code, counts in self.buckets.items()}
        out.sums = dict(self.sums)
        return out

    @staticmethod
    def combined(parts: Iterable[RequestStats]) -> RequestStats:
        """The sum of several processes' counters (``serve --workers``: one ``/metrics`` for all)."""
        out = RequestStats()
        for part in parts:
            for code, count in part.requests.items():
                out.requests[code] = out.requests.get(code, 0) + count
            for key, count in part.errors.items():
                out.errors[key] = out.errors.get(key, 0) + count
            for code, counts in part.buckets.items():
                mine = out.buckets.setdefault(code, [0] * len(counts))
                for i, count in enumerate(counts):
                    mine[i] += count
            for code, seconds in part.sums.items():
                out.sums[code] = out.sums.get(code, 0.0) + seconds
        return out

    def observe_many(self, code: int, response_code: int, count: int, seconds: float) -> None:
        """``count`` requests answered alike in ``seconds`` each: the compiled request path
        (``server.remoting.request_path``) times a batch, not each request, and reports its mean."""
        self.requests[code] = self.requests.get(code, 0) + count
        if response_code in ERROR_CODES:
            key = (code, response_code)
            self.errors[key] = self.errors.get(key, 0) + count
        counts = self.buckets.get(code)
        if counts is None:
            counts = self.buckets[code] = [0] * (len(LATENCY_BUCKETS) + 1)
        counts[bisect_left(LATENCY_BUCKETS, seconds)] += count
        self.sums[code] = self.sums.get(code, 0.0) + seconds * count


#: Seconds between two reports of a worker process's counters to the process serving ``/metrics``.
REPORT_INTERVAL = 1.0


async def report_forever(
    stats: RequestStats, send: Callable[[RequestStats], None], interval: float = REPORT_INTERVAL
) -> None:
    """A ``serve --workers`` worker's loop: a snapshot of its counters handed to ``send`` (a
    multiprocessing queue's ``put_nowait``: pickled and written by the queue's own thread) every
    ``interval`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        send(stats.copy())
