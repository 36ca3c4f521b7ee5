"""Keeping up with a store that is still being written: periodic ``MessageStore.refresh()``.

A live broker keeps appending to the CommitLog and rolling new index files; with ``--build-index``
the store's own index builder indexes whatever the CommitLog gained since the last pass. Both happen
in ``refresh()``, which is called here on the event loop (store calls are synchronous and the
store is not shared with other threads, so no locking is needed against the processors). After a
large backlog a pass can take a while; it is bounded by what was appended since the previous one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)

#: Seconds between two refresh passes (the broker's reput loop runs every millisecond; one second
#: keeps a query server current without competing with the requests it serves).
DEFAULT_REFRESH_INTERVAL = 1.0


class Refreshable(Protocol):
    def refresh(self) -> None: ...


async def refresh_forever(store: Refreshable, interval: float = DEFAULT_REFRESH_INTERVAL) -> None:
    """Call ``store.refresh()`` every ``interval`` seconds until cancelled; errors are logged, not fatal."""
    while True:
        await asyncio.sleep(interval)
        try:
            store.refresh()
        except Exception:
            log.exception("refreshing the store failed; serving what was already loaded")
