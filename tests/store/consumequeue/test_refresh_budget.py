"""Refreshing the opened consume queues at a bounded cost per refresh (issue 30): all of them while
they are few, a turn of ``REFRESH_BUDGET`` past that, and a queue asked for is brought up to date
when its last refresh is older than ``STALE_AFTER``."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.consumequeue import queue_table
from store.consumequeue.consume_queue import ConsumeQueue
from store.consumequeue.queue_table import QueueTable


@pytest.fixture
def table(tmp_path: Path) -> QueueTable:
    config = StoreConfig.for_store(tmp_path / "store")
    for topic in ("A", "B", "C", "D", "E"):
        (config.consume_queue_dir / topic / "0").mkdir(parents=True)
    from store.commitlog.mapped_files import CommitLog

    return QueueTable(config, CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log))


def count_refreshes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = ConsumeQueue.refresh

    def counting(self: ConsumeQueue) -> None:
        seen.append(self.topic)
        real(self)

    monkeypatch.setattr(ConsumeQueue, "refresh", counting)
    return seen


def test_every_opened_queue_while_they_are_within_the_budget(
    table: QueueTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    for topic in "ABCDE":
        table.get(topic, 0)
    seen = count_refreshes(monkeypatch)
    table.refresh()
    assert sorted(seen) == list("ABCDE")


def test_past_the_budget_queues_take_turns_and_a_stale_one_asked_for_is_refreshed(
    table: QueueTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_table, "REFRESH_BUDGET", 2)
    for topic in "ABCDE":
        table.get(topic, 0)
    seen = count_refreshes(monkeypatch)
    table.refresh()
    table.refresh()
    table.refresh()
    assert seen == list("ABCDEA")  # two a turn, round the table
    seen.clear()
    table.get("B", 0)  # refreshed by the last round just now: not again
    assert seen == []
    later = queue_table.time.monotonic() + 2 * queue_table.STALE_AFTER
    monkeypatch.setattr(queue_table.time, "monotonic", lambda: later)
    table.get("B", 0)
    assert seen == ["B"]  # its last refresh is long ago: brought up to date before it answers
    table.get("B", 0)
    assert seen == ["B"]


def test_a_refresh_stops_at_its_time_and_the_next_ones_go_on_in_turn(
    table: QueueTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within ``REFRESH_BUDGET`` but past ``REFRESH_SECONDS`` (none here: one queue a call), the
    queues take turns as past the budget, and a stale one asked for is refreshed (4,000 opened
    queues held the loop 80-90 ms per refresh)."""
    monkeypatch.setattr(queue_table, "REFRESH_SECONDS", 0.0)
    for topic in "ABCDE":
        table.get(topic, 0)
    seen = count_refreshes(monkeypatch)
    for _ in range(6):
        table.refresh()
    assert seen == list("ABCDEA")  # one a call, round the table
    seen.clear()
    later = queue_table.time.monotonic() + 2 * queue_table.STALE_AFTER
    monkeypatch.setattr(queue_table.time, "monotonic", lambda: later)
    table.get("C", 0)
    assert seen == ["C"]  # not refreshed for long: brought up to date before it answers
    monkeypatch.setattr(queue_table, "REFRESH_SECONDS", 60.0)
    seen.clear()
    table.refresh()
    assert sorted(seen) == list("ABCDE")  # time enough again: all of them in one call
    seen.clear()
    table.get("D", 0)
    assert seen == []  # and none taken turns with: no look at a queue asked for
