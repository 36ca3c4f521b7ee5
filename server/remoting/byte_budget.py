"""Bytes held per connection and in total, bounded, the largest holders evicted first.

The mechanism shared by the two budgets every connection reports to: the unfinished request frames
(``server.remoting.buffer_budget``) and the answers queued for peers not reading them
(``server.remoting.write_budget``). A connection reports what it holds now; one past the optional
per-connection limit is evicted, and when the total passes its limit the largest holders are
evicted, largest first, until it fits: they free the most memory with the fewest victims, and a
connection with ordinary traffic holds next to nothing, so it is never one of them. What eviction
means (drop a partial frame, cut off a connection) and how it is said are each budget's own; one
log line per burst (``server.burst_log``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from server.burst_log import BurstLog

H = TypeVar("H")


class ByteBudget(Generic[H]):
    """Bytes per holder and in total; ``_evict`` is called for each holder that must go."""

    __slots__ = ("_bytes", "_log", "limit", "per_holder", "total", "victims")

    def __init__(self, limit: int, per_holder: int | None, log: logging.Logger) -> None:
        self.limit = limit
        #: A single holder's limit (None: only the total is bounded).
        self.per_holder = per_holder
        self.total = 0
        #: Holders evicted to stay within the limits (a counter, for tests and reports).
        self.victims = 0
        self._bytes: dict[H, int] = {}
        self._log = BurstLog(log)

    def held(self, holder: H) -> int:
        """Bytes ``holder`` was last reported to hold."""
        return self._bytes.get(holder, 0)

    def update(self, holder: H, count: int) -> None:
        """``holder`` now holds ``count`` bytes; enforce the limits."""
        before = self._bytes.get(holder, 0)
        if count == before:
            return
        if count:
            self._bytes[holder] = count
        else:
            del self._bytes[holder]
        self.total += count - before
        if self.per_holder is not None and count > self.per_holder:
            self._remove(holder, count, over_total=False)
        if self.total > self.limit:
            largest: Callable[[H], int] = self._bytes.__getitem__
            for victim in sorted(self._bytes, key=largest, reverse=True):
                if self.total <= self.limit:
                    return
                self._remove(victim, self._bytes[victim], over_total=True)

    def release(self, holder: H) -> None:
        """``holder`` is gone (or dropped what it held): it holds nothing any more."""
        self.total -= self._bytes.pop(holder, 0)

    def _remove(self, holder: H, count: int, *, over_total: bool) -> None:
        self.release(holder)
        self.victims += 1
        self._evict(holder, count, over_total)

    def _evict(self, holder: H, count: int, over_total: bool) -> None:
        raise NotImplementedError
