"""A wake-up for requests waiting on the store: pulsed after every refresh, closed at shutdown.

A long-polling PULL_MESSAGE (suspend flag) that finds nothing new is held, as the broker's
``PullRequestHoldService`` holds it, until the queue grows or the client's suspend timeout runs out.
The broker learns of new messages from its reput; here the store learns of them in
``MessageStore.refresh()`` (``server.refresh``), which pulses this signal so that every held request
looks at its queue again. Waiting is an ``asyncio.Event`` wait: nothing blocks the event loop.

Under ``serve --writable`` a SEND tells exactly which queue grew (``notify_queue``), as the broker's
``NotifyMessageArrivingListener`` wakes only the pulls held on that queue: a held gRPC receive
waits on its queues' events (``watch_queue``), so a SEND wakes the few waits it concerns, not every
held one. A ``pulse`` (a refresh of a store another process writes) still wakes them all.

A held PULL_MESSAGE does not wait on an event: it hands a wake-up callback (``on_queue``), which a
``notify_queue`` queues and ``run_woken`` runs. The remoting connection that handled the SEND calls
``run_woken`` right after it wrote the SEND's answers, so the woken pull answers in the SEND's own
turn of the loop, after the SEND's acknowledgement; any other writer (gRPC, the delivery timer) has
them run at the loop's next turn. An event's waiter resumed the pull's task at the next turn and its
answer went out one turn later still (the task's done callback): two turns and a task step between
the message being readable and the consumer being told.

What the wake-ups of one loop turn may cost is bounded (``WOKEN_TURN_SECONDS``): 10,000 pulls held
on one queue (the held-pull bound) woken by one SEND made 10,000 passes in that SEND's turn, 146 ms
of the loop (393 ms on the Python path) during which no other client was answered, and a refresh's
pulse woke them all at once every second (27-30 ms). Past the budget the rest run at the next turns,
in order, a budget per turn; the few pulls a SEND usually wakes still answer in its own turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: Seconds of wake-ups run in one turn of the loop at most (past them, the rest wait for the next
#: turn): the loop's share ``server.loop_budget`` gives heartbeats; each wake-up's pass is bounded
#: (one pull's answer), so a turn holds the loop about this long plus one pass.
WOKEN_TURN_SECONDS = 0.004


class StoreChanges:
    """Wakes every waiter when the store may have grown, and for good when the server stops."""

    __slots__ = (
        "_closed",
        "_deferred",
        "_event",
        "_queues",
        "_scheduled",
        "_wakers",
        "last_pulse",
        "turn_budget",
        "woken",
    )

    def __init__(self, turn_budget: float = WOKEN_TURN_SECONDS) -> None:
        #: ``time.monotonic()`` of the last pulse (None before the first): ``/metrics``' refresh lag.
        self.last_pulse: float | None = None
        self._event = asyncio.Event()
        self._closed = False
        #: (topic, queue id) -> the event its held pulls wait on, until the queue grows.
        self._queues: dict[tuple[str, int], asyncio.Event] = {}
        #: (topic, queue id) -> the wake-ups handed to ``on_queue`` (a dict for its order and an
        #: O(1) ``forget``), until the queue grows.
        self._wakers: dict[tuple[str, int], dict[Callable[[], None], None]] = {}
        #: Wake-ups due (their queue grew), in order, until ``run_woken`` runs them.
        self.woken: list[Callable[[], None]] = []
        #: Whether a ``run_woken`` is scheduled for the loop's next turn.
        self._scheduled = False
        #: Seconds of wake-ups one turn runs (``WOKEN_TURN_SECONDS``).
        self.turn_budget = turn_budget
        #: A turn's budget ran out with wake-ups left: only the scheduled runs work them off (one
        #: budget per turn), not every read's ``run_woken`` in the same turn.
        self._deferred = False

    @property
    def closed(self) -> bool:
        return self._closed

    def pulse(self) -> None:
        """The store was refreshed: wake everyone waiting now; later waits wait for the next pulse."""
        self.last_pulse = time.monotonic()
        self._event.set()
        if not self._closed:
            self._event = asyncio.Event()
        queues, self._queues = self._queues, {}
        for event in queues.values():
            event.set()
        self._wake_all()

    def notify_queue(self, topic: str, queue_id: int) -> None:
        """New messages in one queue: wake the pulls held on it (their wake-ups run at the next
        ``run_woken``: after the notifying read's answers are written, or the loop's next turn)."""
        key = (topic, queue_id)
        event = self._queues.pop(key, None)
        if event is not None:
            event.set()
        wakers = self._wakers.pop(key, None)
        if wakers:
            self.woken.extend(wakers)
            self._schedule()

    def close(self) -> None:
        """The server is stopping: wake everyone, now and from now on."""
        self._closed = True
        self._event.set()
        queues, self._queues = self._queues, {}
        for event in queues.values():
            event.set()
        self._wake_all()

    def on_queue(self, topic: str, queue_id: int, wake: Callable[[], None]) -> None:
        """Have ``wake()`` called once, by the ``run_woken`` after the queue's next ``notify_queue``
        (or a ``pulse``, or ``close()``; at the next ``run_woken`` already once closed), unless
        ``forget`` takes it back first. ``wake`` must not raise; it is held until then."""
        if self._closed:
            self.woken.append(wake)
            self._schedule()
            return
        wakers = self._wakers.get((topic, queue_id))
        if wakers is None:
            self._wakers[(topic, queue_id)] = {wake: None}
        else:
            wakers[wake] = None

    def forget(self, topic: str, queue_id: int, wake: Callable[[], None]) -> None:
        """``wake`` is not wanted any more (its pull answered or was cancelled): O(1), whether or
        not it was still waiting."""
        wakers = self._wakers.get((topic, queue_id))
        if wakers is not None and wakers.pop(wake, 0) is None and not wakers:
            del self._wakers[(topic, queue_id)]

    def waiting(self, topic: str, queue_id: int) -> int:
        """How many wake-ups wait on the queue (``on_queue``'s, not yet run nor forgotten)."""
        return len(self._wakers.get((topic, queue_id), ()))

    def run_woken(self) -> None:
        """Run the wake-ups that are due, in the order their queues grew (and any a wake-up makes
        due meanwhile), for at most ``turn_budget`` seconds (at least one): the rest stay due, in
        order, for the next turn's run. The remoting connection calls it after writing a read's
        answers; while earlier wake-ups wait for a later turn, it leaves them to that turn."""
        woken = self.woken
        if not woken or self._deferred:
            return
        if len(woken) == 1:  # the usual one (a SEND waking its consumer's pull): no clock to read
            self.woken = []
            woken[0]()
            woken = self.woken
            if not woken:
                return
        clock = time.perf_counter
        deadline = clock() + self.turn_budget
        while woken:
            self.woken = []
            for done, wake in enumerate(woken, 1):
                wake()
                if clock() >= deadline:
                    rest = woken[done:]
                    if rest:
                        self.woken = rest + self.woken
                    if self.woken:
                        self._schedule()
                        self._deferred = self._scheduled
                    return
            woken = self.woken

    def _schedule(self) -> None:
        """A ``run_woken`` at the loop's next turn, for wake-ups no connection runs sooner."""
        if not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a stop outside it): nobody can be waiting on one
                self.woken.clear()
                return
            self._scheduled = True
            loop.call_soon(self._run_scheduled)

    def _run_scheduled(self) -> None:
        self._scheduled = False
        self._deferred = False
        self.run_woken()

    def _wake_all(self) -> None:
        wakers, self._wakers = self._wakers, {}
        for waiting in wakers.values():
            self.woken.extend(waiting)
        if self.woken:
            self._schedule()

    def watch_queue(self, topic: str, queue_id: int) -> asyncio.Event:
        """The event the queue's next ``notify_queue`` (or a ``pulse``, or ``close()``) sets, set
        already once closed. Watching starts at this call: a caller that looked at the queue and
        then awaits anything must watch first, or a SEND handled meanwhile wakes nobody."""
        if self._closed:
            event = asyncio.Event()
            event.set()
            return event
        key = (topic, queue_id)
        event = self._queues.get(key)
        if event is None:
            event = self._queues[key] = asyncio.Event()
        return event

    async def wait(self, timeout: float) -> None:
        """Until the next pulse, ``close()`` or ``timeout`` seconds, whichever comes first."""
        if self._closed or timeout <= 0:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            pass
