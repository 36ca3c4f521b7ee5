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

What it keeps is bounded, and each step costs what it concerns (issue 30's 1,000 clients): an
answer naming no broker (an unknown topic) keeps nothing, so made-up names asked on one connection
do not pile up (100,000 of them held 32 MB); a connection's watched topics are the
``MAX_TOPICS_PER_PEER`` it asked last (a client asks the routes of the topics it uses; past that, the
oldest asked is not waited for, and ``MAX_WAIT_SECONDS`` still bounds its broker's absence); the
peers told each broker are indexed, so a broker leaving lists only them (a scan of every answer
kept: 43 ms at 1,000 clients of 50 topics), and a connection that closes while a broker is away
drops only its own entries (a scan of everyone still waiting: 8 ms per closing connection).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Iterable

#: Route answers of a topic, since the broker left, that show a client the broker is gone.
ANSWERS_TO_SEE_GONE = 3
#: The longest a broker stays away for clients that do not ask (about a real broker's restart).
MAX_WAIT_SECONDS = 10.0
#: Topics watched per connection at most (the ones it asked last).
MAX_TOPICS_PER_PEER = 1_000


class RouteWatch:
    """Per client connection (its ``host:port``), the brokers each topic's last route answer named;
    per broker that left, who still has to see it gone."""

    __slots__ = ("_changed", "_clock", "_left", "_named", "_told", "_told_by")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: peer -> topic -> the brokers its last answer named (never none), oldest asked first.
        self._told: dict[str, dict[str, frozenset[str]]] = {}
        #: broker -> peer -> the topics whose last answer to it named the broker.
        self._told_by: dict[str, dict[str, set[str]]] = {}
        #: Each set of brokers answered, kept once (the answers of a topic mostly repeat it).
        self._named: dict[frozenset[str], frozenset[str]] = {}
        #: broker -> (when it left, peer -> topic -> answers since without it, until seen).
        self._left: dict[str, tuple[float, dict[str, dict[str, int]]]] = {}
        self._changed = asyncio.Event()

    def answered(self, peer: str, topic: str, brokers: Iterable[str]) -> None:
        """The name server answered ``peer`` the route of ``topic``, naming ``brokers`` (none when the
        topic is unknown now)."""
        named = frozenset(brokers)
        if named:
            named = self._named.setdefault(named, named)
        topics = self._told.get(peer)
        if topics is None:
            if named:
                self._told[peer] = topics = {}
        if topics is not None:
            before = topics.pop(topic, None)
            if before is not named:
                if before is not None:
                    self._unindex(peer, topic, before)
                for broker in named:
                    self._told_by.setdefault(broker, {}).setdefault(peer, set()).add(topic)
            if named:
                topics[topic] = named  # the most recently asked last
                if len(topics) > MAX_TOPICS_PER_PEER:
                    oldest = next(iter(topics))
                    self._unindex(peer, oldest, topics.pop(oldest))
            elif not topics:
                del self._told[peer]
        for broker, (_, waiting) in self._left.items():
            if broker in named:
                continue
            counts = waiting.get(peer)
            if counts is None or topic not in counts:
                continue
            counts[topic] += 1
            if counts[topic] >= ANSWERS_TO_SEE_GONE:
                del counts[topic]
                if not counts:
                    del waiting[peer]
                self._wake()

    def _unindex(self, peer: str, topic: str, named: frozenset[str]) -> None:
        for broker in named:
            peers = self._told_by.get(broker)
            if peers is None:
                continue
            told = peers.get(peer)
            if told is not None:
                told.discard(topic)
                if not told:
                    del peers[peer]
                    if not peers:
                        del self._told_by[broker]

    def forget(self, peer: str) -> None:
        """``peer``'s connection closed: nothing it was told matters any more."""
        topics = self._told.pop(peer, None)
        if topics is not None:
            for named in {id(named): named for named in topics.values()}.values():
                for broker in named:
                    peers = self._told_by.get(broker)
                    if peers is not None and peers.pop(peer, None) is not None and not peers:
                        del self._told_by[broker]
        for _, waiting in self._left.values():
            waiting.pop(peer, None)
        self._wake()

    def broker_left(self, broker: str) -> None:
        """``broker`` is gone from the answers from now on: who must see it gone before it is back."""
        told = self._told_by.get(broker, {})
        waiting = {peer: dict.fromkeys(topics, 0) for peer, topics in told.items()}
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

    def waiting_for(self, broker: str, limit: int | None = None) -> list[tuple[str, str]]:
        """The (peer, topic) pairs that have not seen ``broker`` gone yet, in order (the first
        ``limit`` of them when given: a page shows ten of up to a million); empty when it did not leave."""
        left = self._left.get(broker)
        if left is None:
            return []
        pairs = ((peer, topic) for peer, counts in left[1].items() for topic in counts)
        return sorted(pairs) if limit is None else heapq.nsmallest(limit, pairs)

    def waiting_count(self, broker: str) -> int:
        """How many (peer, topic) pairs ``waiting_for`` would list."""
        left = self._left.get(broker)
        return 0 if left is None else sum(len(counts) for counts in left[1].values())

    def watched(self) -> int:
        """(peer, topic) answers kept: what a broker leaving now would have to wait for, at most."""
        return sum(len(topics) for topics in self._told.values())

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
