"""Orderly consumers' queue locks: only the holder renews or releases; a lock not renewed expires."""

from __future__ import annotations

from server.broker.rebalance_locks import LOCK_MAX_LIVE_MS, QueueId, RebalanceLocks

Q0, Q1 = QueueId("T", "b", 0), QueueId("T", "b", 1)


def test_a_held_queue_is_refused_to_another_client_until_it_expires() -> None:
    locks = RebalanceLocks()
    assert locks.try_lock("G", [Q0, Q1], "A", 0) == [Q0, Q1]
    assert locks.try_lock("G", [Q0, Q1], "B", LOCK_MAX_LIVE_MS) == []
    assert locks.try_lock("G", [Q0], "B", LOCK_MAX_LIVE_MS + 1) == [Q0]
    assert locks.holder("G", Q0, LOCK_MAX_LIVE_MS + 1) == "B"
    # Another group's locks are its own.
    assert locks.try_lock("H", [Q0], "C", 0) == [Q0]


def test_renewing_keeps_a_lock_and_only_the_holder_releases_it() -> None:
    locks = RebalanceLocks()
    locks.try_lock("G", [Q0], "A", 0)
    assert locks.try_lock("G", [Q0], "A", 50_000) == [Q0]  # renewed at 50 s
    assert locks.try_lock("G", [Q0], "B", 100_000) == []  # 50 s after the renewal: still A's
    locks.unlock("G", [Q0], "B")
    assert locks.holder("G", Q0, 100_000) == "A"
    locks.unlock("G", [Q0], "A")
    assert locks.holder("G", Q0, 100_000) is None
    assert locks.try_lock("G", [Q0], "B", 100_000) == [Q0]
