"""Requests waiting for their answers, paired by ``opaque`` (sans-IO).

RocketMQ pairs a response with its request by the ``opaque`` alone: a connection carries any number
of requests at once and their answers come back in any order. Whoever sends requests therefore
keeps the same book: hand out opaques, remember who waits under each, give an answer to its waiter,
refuse or ignore an answer nobody waits for and a second request under an opaque still waiting,
and give up on requests whose time ran out. The async client (``clients.client``) and the tests'
raw client (``tests/support/harness.py``) both keep it here, with no clock and no event loop: the
caller says what time it is.

Opaques count up from ``first`` and wrap to 0 at ``limit`` (2**31 by default, so they stay a
non-negative Java int, as the client always sent them), skipping any still waiting.

Expiry is by timeout class: requests registered with the same timeout expire in the order they were
registered (their deadlines are ``now + timeout`` with a clock that never goes back), so each class
is an insertion-ordered dict and both matching and expiring cost O(1) per request; the caller needs
one timer, at ``next_deadline()``, not one per request.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from protocol.errors import DuplicateOpaqueError, UnknownOpaqueError

W = TypeVar("W")

#: Opaques stay below this: a non-negative Java ``int``.
OPAQUE_LIMIT = 1 << 31


class OpaqueMatcher(Generic[W]):
    """The requests of one connection that wait for an answer, each with its waiter ``W``."""

    __slots__ = ("_clock", "_limit", "_next", "_queues", "_waiting")

    def __init__(self, *, first: int = 1, limit: int = OPAQUE_LIMIT) -> None:
        if not 0 <= first < limit:
            raise ValueError(f"the first opaque must be in [0, {limit}), got {first}")
        self._next = first
        self._limit = limit
        #: opaque -> (waiter, the deadline queue of its timeout class, or None: never expires)
        self._waiting: dict[int, tuple[W, dict[int, float] | None]] = {}
        #: timeout -> {opaque: deadline}, in registration (and so deadline) order
        self._queues: dict[float, dict[int, float]] = {}
        self._clock = float("-inf")

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, opaque: object) -> bool:
        return opaque in self._waiting

    def next_opaque(self) -> int:
        """A fresh opaque (registered by ``expect`` once the request is on its way)."""
        waiting = self._waiting
        limit = self._limit
        while True:
            opaque = self._next
            self._next = opaque + 1 if opaque + 1 < limit else 0
            if opaque not in waiting:
                return opaque

    def expect(self, opaque: int, waiter: W, timeout: float | None = None, now: float = 0.0) -> float | None:
        """Remember that ``waiter`` waits for the answer to ``opaque``; return its deadline.

        With a ``timeout`` it expires at ``now + timeout`` (``now`` from a clock that never goes
        back, such as ``loop.time()``); without one it waits until matched or drained. Raises
        ``DuplicateOpaqueError`` if a request is already waiting under ``opaque``.
        """
        waiting = self._waiting
        if opaque in waiting:
            raise DuplicateOpaqueError(f"a request is already waiting for the answer to opaque {opaque}")
        if timeout is None:
            waiting[opaque] = (waiter, None)
            return None
        if now < self._clock:
            raise ValueError(f"the clock went back from {self._clock} to {now}")
        self._clock = now
        queue = self._queues.get(timeout)
        if queue is None:
            queue = self._queues[timeout] = {}
        deadline = queue[opaque] = now + timeout
        waiting[opaque] = (waiter, queue)
        return deadline

    def match(self, opaque: int) -> W | None:
        """The waiter of the answer to ``opaque``, no longer waiting; None if nobody waits for it
        (an answer that came after its request expired, a duplicate answer, or one never asked for)."""
        entry = self._waiting.pop(opaque, None)
        if entry is None:
            return None
        waiter, queue = entry
        if queue is not None:
            del queue[opaque]
        return waiter

    def take(self, opaque: int) -> W:
        """Like ``match``, but an answer nobody waits for is refused (``UnknownOpaqueError``)."""
        if opaque not in self._waiting:
            raise UnknownOpaqueError(
                f"an answer to opaque {opaque}, which no request is waiting for"
                " (never sent, answered already, or expired)"
            )
        return self.match(opaque)  # type: ignore[return-value]

    def forget(self, opaque: int) -> W | None:
        """The caller gave up on ``opaque`` (cancelled): stop waiting for it; its waiter, if any."""
        return self.match(opaque)

    def expire(self, now: float) -> list[tuple[int, W, float]]:
        """Stop waiting for every request whose deadline is at or before ``now``.

        Returns ``(opaque, waiter, timeout)`` for each, earliest deadline first.
        """
        expired: list[tuple[float, int, W, float]] = []
        waiting = self._waiting
        emptied = []
        for timeout, queue in self._queues.items():
            while queue:
                opaque = next(iter(queue))
                deadline = queue[opaque]
                if deadline > now:
                    break
                del queue[opaque]
                expired.append((deadline, opaque, waiting.pop(opaque)[0], timeout))
            if not queue:
                emptied.append(timeout)
        for timeout in emptied:
            del self._queues[timeout]
        if len(expired) > 1:
            expired.sort(key=lambda item: item[0])  # stable: one class's order is kept
        return [(opaque, waiter, timeout) for _, opaque, waiter, timeout in expired]

    def next_deadline(self) -> float | None:
        """The earliest deadline of a request still waiting (None if none has one)."""
        firsts = [queue[next(iter(queue))] for queue in self._queues.values() if queue]
        return min(firsts) if firsts else None

    def drain(self) -> list[W]:
        """Stop waiting for everything (the connection is gone); the waiters, in registration order."""
        waiters = [waiter for waiter, _ in self._waiting.values()]
        self._waiting.clear()
        self._queues.clear()
        return waiters
