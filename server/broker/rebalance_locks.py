"""Queue locks for orderly consumers (``RebalanceLockManager``).

An orderly consumer consumes a queue only while it holds the broker's lock on it, so that one queue's
messages are never processed by two clients at once, even while a rebalance moves the queue. A client
locks its queues in batches (LOCK_BATCH_MQ) and renews them every 20 s; a lock not renewed for
``LOCK_MAX_LIVE_MS`` expires and another client of the group may take it (so a vanished client's
locks free themselves), and UNLOCK_BATCH_MQ releases them at once. Only the holder may renew or
release a lock.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``REBALANCE_LOCK_MAX_LIVE_TIME`` (the ``rocketmq.broker.rebalance.lockMaxLiveTime`` default).
LOCK_MAX_LIVE_MS = 60_000


@dataclass(frozen=True, slots=True)
class QueueId:
    """``MessageQueue``: a queue of a topic on a broker."""

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLocks:
    """group -> queue -> the client holding it, with the broker's expiry."""

    def __init__(self, max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.max_live_ms = max_live_ms
        self._locks: dict[str, dict[QueueId, _Lock]] = {}

    def try_lock(self, group: str, queues: list[QueueId], client_id: str, now_ms: int) -> list[QueueId]:
        """``tryLockBatch``: the queues ``client_id`` holds after this call (renewed or newly taken);
        a queue another client holds and renewed within ``max_live_ms`` stays theirs."""
        table = self._locks.setdefault(group, {})
        locked = []
        for queue in queues:
            lock = table.get(queue)
            if lock is None or lock.client_id == client_id or now_ms - lock.last_update_ms > self.max_live_ms:
                table[queue] = _Lock(client_id, now_ms)
                locked.append(queue)
        return locked

    def unlock(self, group: str, queues: list[QueueId], client_id: str) -> None:
        """``unlockBatch``: release the queues ``client_id`` holds; others' locks are untouched."""
        table = self._locks.get(group)
        if table is None:
            return
        for queue in queues:
            lock = table.get(queue)
            if lock is not None and lock.client_id == client_id:
                del table[queue]
        if not table:
            del self._locks[group]

    def holder(self, group: str, queue: QueueId, now_ms: int) -> str | None:
        """The client holding ``queue`` for ``group`` now, None if nobody (or the lock expired)."""
        lock = self._locks.get(group, {}).get(queue)
        if lock is None or now_ms - lock.last_update_ms > self.max_live_ms:
            return None
        return lock.client_id
