"""Scheduled delivery's decisions without a store: due times per level, the order records fall due
in, and the delivered offsets saved as the broker saves them (off the delivering thread, and never
an older table over a newer one)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import server.broker.scheduled_delivery as scheduled_delivery_module
import store.config.delay_offsets as delay_offsets_module
from server.broker.scheduled_delivery import DeliverySchedule
from store.config.delay_offsets import read_delay_offsets
from store.config.persister import ConfigPersister


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
    schedule.load()
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


def test_a_save_never_writes_an_older_table_over_a_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop's save (on its thread) copies the table, and a delivery on the event loop saves a
    later one meanwhile: the file must end with the later table, not the copy written last. The
    stop's write is held until the delivery is done or has waited for it (0.3 s)."""
    path = tmp_path / "delayOffset.json"
    schedule = DeliverySchedule(path, "1s 5s")
    schedule.load()
    schedule.delivered(1, 0)
    delivery = threading.Thread(target=schedule.delivered, args=(1, 4))
    writes: list[dict[int, int]] = []
    real_write = delay_offsets_module.replace_whole

    def slow_first_write(target: Path, data: bytes) -> None:
        if not writes:
            writes.append({})
            delivery.start()
            delivery.join(0.3)  # on the fixed code the delivery's save waits for this one
        real_write(target, data)

    monkeypatch.setattr(delay_offsets_module, "replace_whole", slow_first_write)
    stop = threading.Thread(target=schedule.save)
    stop.start()
    stop.join(5)
    delivery.join(5)
    assert not stop.is_alive() and not delivery.is_alive()
    assert read_delay_offsets(path) == {1: 5}, "the stop's older copy was written over the delivery's"


def test_with_a_persister_deliveries_write_nothing_on_their_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery runs on the event loop: the file (a rewrite and an fsync each) is the persister's
    to write, batched, never the delivering thread's."""
    path = tmp_path / "delayOffset.json"
    schedule = DeliverySchedule(path, "1s 5s")
    schedule.load()
    writers: list[int] = []
    real_write = delay_offsets_module.write_delay_offsets

    def recording_write(target: Path, offsets: dict[int, int]) -> None:
        writers.append(threading.get_ident())
        real_write(target, offsets)

    monkeypatch.setattr(scheduled_delivery_module, "write_delay_offsets", recording_write)
    persister = ConfigPersister(schedule)
    try:
        for queue_offset in range(64):
            schedule.delivered(2, queue_offset)
        assert threading.get_ident() not in writers
    finally:
        persister.close()
    assert threading.get_ident() not in writers
    assert 1 <= len(writers) <= 64
    assert read_delay_offsets(path) == {2: 64}
