"""A wake-up for requests waiting on the store: pulsed after every refresh, closed at shutdown.

A long-polling PULL_MESSAGE (suspend flag) that finds nothing new is held, as the broker's
``PullRequestHoldService`` holds it, until the queue grows or the client's suspend timeout runs out.
The broker learns of new messages from its reput; here the store learns of them in
``MessageStore.refresh()`` (``server.refresh``), which pulses this signal so that every held request
looks at its queue again. Waiting is an ``asyncio.Event`` wait: nothing blocks the event loop.

Under ``serve --writable`` a SEND tells exactly which queue grew (``notify_queue``), as the broker's
``NotifyMessageArrivingListener`` wakes only the pulls held on that queue: a held pull waits on its
own queue's event (``wait_queue``), so a SEND wakes the few pulls it concerns, not every held one.
A ``pulse`` (a refresh of a store another process writes) still wakes them all.
"""

from __future__ import annotations

import asyncio
import time


class StoreChanges:
    """Wakes every waiter when the store may have grown, and for good when the server stops."""

    __slots__ = ("_closed", "_event", "_queues", "last_pulse")

    def __init__(self) -> None:
        #: ``time.monotonic()`` of the last pulse (None before the first): ``/metrics``' refresh lag.
        self.last_pulse: float | None = None
        self._event = asyncio.Event()
        self._closed = False
        #: (topic, queue id) -> the event its held pulls wait on, until the queue grows.
        self._queues: dict[tuple[str, int], asyncio.Event] = {}

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

    def notify_queue(self, topic: str, queue_id: int) -> None:
        """New messages in one queue: wake the pulls held on it."""
        event = self._queues.pop((topic, queue_id), None)
        if event is not None:
            event.set()

    def close(self) -> None:
        """The server is stopping: wake everyone, now and from now on."""
        self._closed = True
        self._event.set()
        queues, self._queues = self._queues, {}
        for event in queues.values():
            event.set()

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

    async def wait_queue(self, topic: str, queue_id: int, timeout: float) -> None:
        """Until the queue grows (``notify_queue``), a ``pulse``, ``close()`` or ``timeout`` seconds,
        counted from when this coroutine first runs (``watch_queue`` to watch from the call).

        The wait is the event's own, bounded by ``asyncio.timeout`` in the waiting task: a SEND's
        ``notify_queue`` resumes the held pull in the next turn of the loop. (``asyncio.wait_for``
        ran the wait as a task of its own, made per wait, and took two more turns to hand its end
        back: a held pull answered after the loop had come round three times.)"""
        if self._closed or timeout <= 0:
            return
        try:
            async with asyncio.timeout(timeout):
                await self.watch_queue(topic, queue_id).wait()
        except TimeoutError:
            pass

    async def wait(self, timeout: float) -> None:
        """Until the next pulse, ``close()`` or ``timeout`` seconds, whichever comes first."""
        if self._closed or timeout <= 0:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            pass
