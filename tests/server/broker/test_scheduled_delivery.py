"""Scheduled delivery's decisions without a store: due times per level, the order records fall due
in, and the delivered offsets saved as the broker saves them."""

from __future__ import annotations

from pathlib import Path

from server.broker.scheduled_delivery import DeliverySchedule
from store.config.delay_offsets import read_delay_offsets


def test_records_fall_due_at_their_levels_delay_earliest_first(tmp_path: Path) -> None:
    schedule = DeliverySchedule(tmp_path / "delayOffset.json", "1s 5s 10s")
    assert schedule.max_delay_level == 3
    schedule.schedule(2, 1_000, offset=300, queue_offset=0)  # due 6_000
    schedule.schedule(1, 1_000, offset=200, queue_offset=0)  # due 2_000
    schedule.schedule(9, 1_000, offset=100, queue_offset=0)  # capped to level 3: due 11_000
    schedule.schedule(1, 1_000, offset=150, queue_offset=1)  # due 2_000, earlier in the CommitLog
    assert schedule.next_due() == 2_000
    assert schedule.pop_due(1_999) is None
    assert [schedule.pop_due(6_000) for _ in range(4)] == [(150, 1, 1), (200, 1, 0), (300, 2, 0), None]
    assert schedule.next_due() == 11_000
    assert schedule.pop_due(11_000) == (100, 9, 0)
    assert schedule.next_due() is None


def test_delivered_offsets_are_saved_at_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "delayOffset.json"
    schedule = DeliverySchedule(path, "1s 5s")
    schedule.save()
    assert not path.exists(), "nothing delivered and no file: nothing to write"
    schedule.delivered(2, 4)
    schedule.delivered(2, 1)  # an older one dealt with later does not move the level back
    assert read_delay_offsets(path) == {2: 5}
    again = DeliverySchedule(path, "1s 5s")
    again.load()
    assert again.first_pending(2, 0) == 5
    assert again.first_pending(2, 7) == 7, "the queue's own start wins when it is further"
    assert again.first_pending(1, 0) == 0
