"""Saving a ``config/*.json`` table off the event loop, batching the changes that pile up meanwhile.

The broker rewrites a config file whole on every change, on the thread that changed it. Here
changes come on the event loop, where a rewrite and fsync per change (10-50 ms for a big table)
would stall every client, so a table with a ``ConfigPersister`` is saved on the persister's thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from store.errors import StoreError

log = logging.getLogger(__name__)

#: A table with a journal (``store/config/journal.py``) is written whole this long after the first
#: change the file lacks, so that a burst of creations costs one whole write, not one each ...
WHOLE_WRITE_AFTER_S = 1.0
#: ... or at once when its journal holds this many changes (it is replayed at every load).
WHOLE_WRITE_AFTER_LINES = 10_000


class Persistable(Protocol):
    """A table the persister saves: whole, atomically, from any thread."""

    path: Path
    persister: ConfigPersister | None

    def save(self) -> None: ...


class ConfigPersister:
    """Saves a config table on a thread of its own whenever it changed (``request``), so a SEND that
    creates a topic (or a heartbeat that creates a group) costs the event loop a dict insert, not a
    rewrite and fsync of the whole file.

    Changes that arrive while a write is under way are written together by the next one (the whole
    table each time, as the broker's ``persist`` writes it). Each change has a number (``request``'s
    answer); ``saved(n)`` is a future done once a write holding change ``n`` is on disk, so a SEND
    that created a topic is answered only then, as the broker answers after its ``persist``, while
    the loop serves others. A failed write is logged once, completes the futures waiting on it (the
    records are stored; the table is rebuilt from them when the store opens) and is retried at the
    next change and at ``close``, which writes whatever is still unsaved before it returns.

    A table with a journal (``write_journal``: ``store/config/journal.py``) has its changes made
    durable by an append to it instead, which is what ``saved`` waits for; the whole file is then
    written ``WHOLE_WRITE_AFTER_S`` later (once for every change of a burst), and at ``close``.
    """

    def __init__(self, table: Persistable) -> None:
        self.table = table
        self._cond = threading.Condition()
        #: Changes requested, and the highest change a finished write covered.
        self.requested = 0
        self._written = 0
        self._waiters: list[tuple[int, Future[None]]] = []
        self._stopping = False
        #: ``held`` depth: while above 0 no write starts.
        self._held = 0
        #: A write failed and nothing has been written since.
        self._unsaved = False
        #: Whole-file writes done (a measure of the batching, for tests and benchmarks).
        self.writes = 0
        #: When the journaled changes are to be written whole (None: the file holds every change).
        self._whole_due: float | None = None
        self._thread = threading.Thread(target=self._run, name=table.path.name, daemon=True)
        table.persister = self
        self._thread.start()

    def request(self) -> int:
        """The table changed: write it soon (returns at once); the change's number for ``saved``."""
        with self._cond:
            self.requested += 1
            if not self._held:
                self._cond.notify()
            return self.requested

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No write starts while held (one under way finishes): the changes of one request that makes
        many (a heartbeat creating hundreds of groups and retry topics) go out in one write after it,
        instead of each waking the writer, whose rewrite of the whole table then competes with the
        rest of that request for the interpreter (issue 30)."""
        with self._cond:
            self._held += 1
        try:
            yield
        finally:
            with self._cond:
                self._held -= 1
                if not self._held:
                    self._cond.notify()

    def saved(self, change: int) -> Future[None]:
        """A future done once change ``change`` was written (or its write failed)."""
        done: Future[None] = Future()
        with self._cond:
            if change <= self._written:
                done.set_result(None)
            else:
                self._waiters.append((change, done))
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    if self._held:
                        self._cond.wait()
                    elif self._written != self.requested:
                        break
                    elif self._whole_due is not None:
                        wait = self._whole_due - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._stopping and self._written == self.requested:
                    return
                upto = self.requested
            journal = getattr(self.table, "write_journal", None)
            if journal is not None and upto != self._written:
                # durable in one small append: the futures are done, the whole write comes later
                if self._attempt(journal, "journal of "):
                    if self._whole_due is None:
                        self._whole_due = time.monotonic() + WHOLE_WRITE_AFTER_S
                    if self.table.journal.lines < WHOLE_WRITE_AFTER_LINES:
                        self._done(upto)
                        continue
                # a journal that cannot be written (or is long): the whole file, now
            if self._attempt(self.table.save, ""):
                self.writes += 1
                self._whole_due = None
            elif self._whole_due is not None:
                # the journal holds the changes: try the whole file again later, not in a loop
                self._whole_due = time.monotonic() + WHOLE_WRITE_AFTER_S
            self._done(upto)

    def _attempt(self, write: Callable[[], None], what: str) -> bool:
        """Run one write; a failure is logged (once until a write succeeds again), never raised."""
        try:
            write()
        except (OSError, StoreError) as exc:
            if not self._unsaved:
                log.error("cannot write %s%s (retried at the next change): %s", what, self.table.path, exc)
            self._unsaved = True
            return False
        except Exception:
            # a bug, not the disk: said with its traceback, and the thread goes on (otherwise every
            # later change would wait forever for a write that never comes)
            log.exception("cannot write %s%s (retried at the next change)", what, self.table.path)
            self._unsaved = True
            return False
        if self._unsaved:
            log.info("%s written again", self.table.path)
        self._unsaved = False
        return True

    def _done(self, upto: int) -> None:
        with self._cond:
            self._written = upto
            ready = [f for n, f in self._waiters if n <= upto]
            self._waiters = [(n, f) for n, f in self._waiters if n > upto]
        for f in ready:
            f.set_result(None)

    def close(self) -> None:
        """Stop the thread, then write synchronously whatever it has not written yet."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()
        self.table.persister = None
        if self._unsaved or self._whole_due is not None:
            # the journal's changes folded into the file: a clean stop leaves the broker's layout only
            self._unsaved = False
            self._whole_due = None
            self.table.save()
