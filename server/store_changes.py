"""A wake-up for requests waiting on the store: pulsed after every refresh, closed at shutdown.

A long-polling PULL_MESSAGE (suspend flag) that finds nothing new is held, as the broker's
``PullRequestHoldService`` holds it, until the queue grows or the client's suspend timeout runs out.
The broker learns of new messages from its reput; here the store learns of them in
``MessageStore.refresh()`` (``server.refresh``), which pulses this signal so that every held request
looks at its queue again. Waiting is an ``asyncio.Event`` wait: nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio


class StoreChanges:
    """Wakes every waiter when the store may have grown, and for good when the server stops."""

    __slots__ = ("_closed", "_event")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def pulse(self) -> None:
        """The store was refreshed: wake everyone waiting now; later waits wait for the next pulse."""
        self._event.set()
        if not self._closed:
            self._event = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: wake everyone, now and from now on."""
        self._closed = True
        self._event.set()

    async def wait(self, timeout: float) -> None:
        """Until the next pulse, ``close()`` or ``timeout`` seconds, whichever comes first."""
        if self._closed or timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
