"""Which clients the name server told a broker's routes, and whether they have since been told it is gone.

A broker that stops and starts again (``down`` then clear, ``server.cluster``) must be seen gone by
the clients that knew it before it is back. The 4.9.7 Java client does not fail the requests it
is waiting on when a broker ends their connection with a FIN (Netty closes the channel without
``NettyConnectManageHandler.close``, the only place that fails them), nor always with an RST (its
``closeChannel`` skips the close when another thread already replaced the channel in the table): a
push consumer's pull held by the broker then waits for its 30 s timeout and 3 s more before the
queue is pulled again. What frees such a queue is the consumer's rebalance: once a route poll no
longer names the broker, the next rebalance drops the broker's queues, and once it is back they are
added afresh with new pulls. A real broker's restart takes seconds, longer than the clients'
route poll (``golden/record_cluster.py``); ours took a fraction of one, so the consumer never saw it
go and one of its queues stalled past the scenario's wait (``test_java_cluster_failover``).

So ``broker_left`` notes every (connection, topic) whose last route answer named the broker, and
the broker comes back when each has been answered ``ANSWERS_TO_SEE_GONE`` routes of that topic since
(the first shows the broker gone; the next two come two poll intervals later, so the client's
rebalance, on a timer of its own, has had two turns with the broker gone: under load one turn was
seen lost, its consumer list asked of the broker that had just gone), its connection closed, or
``MAX_WAIT_SECONDS`` since the broker left passed: a client polling less often would not see a real
restart of that length either. Counting answers, not seconds, keeps the rule the client's own on a
slow machine as on a fast one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

#: Route answers of a topic, since the broker left, that show a client the broker is gone.
ANSWERS_TO_SEE_GONE = 3
#: The longest a broker stays away for clients that do not ask (about a real broker's restart).
MAX_WAIT_SECONDS = 10.0


class RouteWatch:
    """Per client connection (its ``host:port``), the brokers each topic's last route answer named;
    per broker that left, who still has to see it gone."""

    __slots__ = ("_changed", "_clock", "_left", "_told")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: peer -> topic -> the brokers its last answer named.
        self._told: dict[str, dict[str, frozenset[str]]] = {}
        #: broker -> (when it left, (peer, topic) -> answers since without it, until seen).
        self._left: dict[str, tuple[float, dict[tuple[str, str], int]]] = {}
        self._changed = asyncio.Event()

    def answered(self, peer: str, topic: str, brokers: Iterable[str]) -> None:
        """The name server answered ``peer`` the route of ``topic``, naming ``brokers`` (none when the
        topic is unknown now)."""
        named = frozenset(brokers)
        self._told.setdefault(peer, {})[topic] = named
        key = (peer, topic)
        for broker, (_, waiting) in self._left.items():
            if broker in named or key not in waiting:
                continue
            waiting[key] += 1
            if waiting[key] >= ANSWERS_TO_SEE_GONE:
                del waiting[key]
                self._wake()

    def forget(self, peer: str) -> None:
        """``peer``'s connection closed: nothing it was told matters any more."""
        self._told.pop(peer, None)
        for _, waiting in self._left.values():
            for key in [key for key in waiting if key[0] == peer]:
                del waiting[key]
        self._wake()

    def broker_left(self, broker: str) -> None:
        """``broker`` is gone from the answers from now on: who must see it gone before it is back."""
        waiting = {
            (peer, topic): 0
            for peer, topics in self._told.items()
            for topic, named in topics.items()
            if broker in named
        }
        self._left[broker] = (self._clock(), waiting)

    def back_within(self, broker: str, max_wait: float | None = None) -> float | None:
        """Seconds a clear of ``broker``'s ``down`` asked now would wait at most (``seen_gone``'s
        bound: 0 when every client told its routes has seen it gone, or ``max_wait`` since it left
        has passed); None when it did not leave."""
        left = self._left.get(broker)
        if left is None:
            return None
        since, waiting = left
        if not waiting:
            return 0.0
        bound = MAX_WAIT_SECONDS if max_wait is None else max_wait
        return max(0.0, since + bound - self._clock())

    def waiting_for(self, broker: str) -> list[tuple[str, str]]:
        """The (peer, topic) pairs that have not seen ``broker`` gone yet (empty when it did not leave)."""
        left = self._left.get(broker)
        return [] if left is None else sorted(left[1])

    async def seen_gone(self, broker: str, max_wait: float | None = None) -> bool:
        """Wait until every client told ``broker``'s routes has seen it gone, or ``max_wait`` seconds
        (``MAX_WAIT_SECONDS``) since it left; then it may come back (``broker_back``). False if the
        wait ran out first."""
        left = self._left.get(broker)
        if left is None:
            return True
        if max_wait is None:
            max_wait = MAX_WAIT_SECONDS
        since, waiting = left
        while waiting:
            remaining = since + max_wait - self._clock()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                pass
        return True

    def broker_back(self, broker: str) -> None:
        """``broker`` is in the answers again."""
        self._left.pop(broker, None)

    def _wake(self) -> None:
        self._changed.set()
