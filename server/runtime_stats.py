"""Counters behind GET_BROKER_RUNTIME_INFO's "get" figures: pulls served, per second, over windows.

The broker's ``StoreStatsService`` reports ``getFoundTps``, ``getMissTps``, ``getTotalTps`` and
``getTransferedTps`` over the last 10 s, 1 min and 10 min, and ``getMessageEntireTimeMax``. The pull
processor counts here (one dict update per pull: per-second buckets, the oldest dropped past 10 min).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: The windows the broker reports, in seconds.
WINDOWS = (10, 60, 600)


@dataclass(slots=True)
class _Buckets:
    counts: dict[int, int] = field(default_factory=dict)

    def add(self, second: int, amount: int) -> None:
        counts = self.counts
        counts[second] = counts.get(second, 0) + amount
        if len(counts) > WINDOWS[-1] + 2:
            for old in [s for s in counts if s < second - WINDOWS[-1] - 1]:
                del counts[old]

    def rate(self, now: int, window: int) -> float:
        """Per second over the last ``window`` complete seconds."""
        return sum(c for s, c in self.counts.items() if now - window <= s < now) / window


@dataclass(slots=True)
class PullStats:
    """What the pull processor served since the server started."""

    boot_timestamp_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    messages_got: int = 0
    entire_time_max_ms: int = 0
    _found: _Buckets = field(default_factory=_Buckets)
    _miss: _Buckets = field(default_factory=_Buckets)
    _transferred: _Buckets = field(default_factory=_Buckets)

    def record(self, found: bool, messages: int, elapsed_ms: int) -> None:
        second = int(time.monotonic())
        (self._found if found else self._miss).add(second, 1)
        if messages:
            self._transferred.add(second, messages)
            self.messages_got += messages
        if elapsed_ms > self.entire_time_max_ms:
            self.entire_time_max_ms = elapsed_ms

    def record_many(self, found: int, messages: int, elapsed_ms: int) -> None:
        """``found`` pulls that found ``messages`` in all, the slowest in ``elapsed_ms``: the same
        counts as that many ``record`` calls in this second (the compiled request path counts a read's
        pulls together)."""
        second = int(time.monotonic())
        self._found.add(second, found)
        if messages:
            self._transferred.add(second, messages)
            self.messages_got += messages
        if elapsed_ms > self.entire_time_max_ms:
            self.entire_time_max_ms = elapsed_ms

    def tps(self) -> dict[str, str]:
        """The four TPS figures, each ``"<10 s> <1 min> <10 min>"`` as the broker writes them."""
        now = int(time.monotonic())

        def line(*buckets: _Buckets) -> str:
            return " ".join(repr(sum(b.rate(now, w) for b in buckets)) for w in WINDOWS)

        return {
            "getFoundTps": line(self._found),
            "getMissTps": line(self._miss),
            "getTotalTps": line(self._found, self._miss),
            "getTransferedTps": line(self._transferred),
        }
