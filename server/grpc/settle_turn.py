"""The SendMessage calls of one event-loop turn settled together (issue 33).

A gRPC SendMessage used to ``put`` its records: append, then settle (the reput's dispatch into the
consume queues and index, the CommitLog refresh, the index audit), ~45-70 µs per call whether it
settles one record or thirty. A 5.x client sends one message per call, so under concurrent producers
the settle was paid per message. grpcio's asyncio server starts the handlers of the calls that
arrived together one after the other in the same turn of the loop, as the remoting connection gets
several SENDs in one read; here each call appends at once (its checks, refusals and store timestamp
its own) and waits for one settle, run by ``loop.call_soon`` after the handlers already queued,
before any of them is answered.

Nothing is acknowledged before it is readable:

- the settle that covers a call's records runs before its answer (the call awaits it);
- another writer on the same loop may settle first (a remoting SEND's ``put``, the compiled path's
  ``SendGroup``, a timer delivery: ``WritableStore.settle`` takes every unsettled append). If that
  settle succeeded the records are readable and our settle finds nothing left; if it found the
  CommitLog cut, the store is not writable any more and our settle raises ``StoreUnavailable`` for
  them too; if it failed otherwise, our records are no longer the store's to settle, and the caller
  checks them (``WritableStore.settle``'s list says which records each settle took) before
  answering: ``not_settled_here``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from server.broker.writable_store import WritableStore
from server.store_api import AppendResult, StoreRecord


class SettleTurn:
    """One ``WritableStore.settle`` for the appends of the calls that asked in the same loop turn."""

    __slots__ = ("_store", "_waiting", "settles")

    def __init__(self, store: WritableStore) -> None:
        self._store = store
        #: The calls waiting for the settle scheduled for this turn.
        self._waiting: list[asyncio.Future[tuple[list[StoreRecord], BaseException | None]]] = []
        #: How many settles ran (for the tests and the benchmark: calls / settles is the grouping).
        self.settles = 0

    def settled(self) -> asyncio.Future[tuple[list[StoreRecord], BaseException | None]]:
        """A future of (the records the turn's settle took, its failure or None), for a caller that
        has just appended: the settle runs once the handlers already queued on the loop have run."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[list[StoreRecord], BaseException | None]] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._settle)
        self._waiting.append(future)
        return future

    def _settle(self) -> None:
        """Settle every unsettled append and tell each waiting call how it went (a call cancelled
        meanwhile is skipped: its records are settled all the same, and never acknowledged)."""
        waiting, self._waiting = self._waiting, []
        self.settles += 1
        outcome: tuple[list[StoreRecord], BaseException | None]
        try:
            outcome = (self._store.settle(), None)
        except Exception as exc:  # each caller answers it as its own put's failure
            outcome = ([], exc)
        for future in waiting:
            if not future.done():
                future.set_result(outcome)


def not_settled_here(
    store: WritableStore,
    settled: list[StoreRecord],
    records: Sequence[StoreRecord],
    appended: Sequence[AppendResult],
) -> bool:
    """Whether ``records`` (appended as ``appended``) may not be acknowledged after a settle that took
    ``settled``: some of them were settled by another writer's settle, and are not in their consume
    queues (that settle failed) while the store has not said it acknowledges records its dispatch
    could not index (``dispatch_failed``: the broker answers after its CommitLog put)."""
    taken = {id(rec) for rec in settled}
    if all(id(rec) in taken for rec in records) or store.dispatch_failed is not None:
        return False
    reader = store.reader
    return any(
        reader.max_offset(rec.topic, rec.queue_id) <= done.queue_offset
        for rec, done in zip(records, appended, strict=True)
        if id(rec) not in taken
    )
