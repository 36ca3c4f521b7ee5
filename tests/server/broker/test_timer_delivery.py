"""The writable store's timer wheel: due at the slot's end and not before, across a restart, and
exactly once through the crash windows around a delivery (its intent written, its re-put made, the
watermark not yet moved), with a clock the test sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutContext, single_record
from server.broker.timer_schedule import TimerSchedule
from server.broker.writable_store import DELIVERIES_PER_CALL, WritableStore
from store.config.store_config import StoreConfig
from store.timer.delivery_log import TimerDeliveryLog

T0 = 1_700_000_000_400


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1"
    )


def send(store: WritableStore, body: bytes, props: str, topic: str = "T") -> None:
    header = SendMessageRequestHeader("g", topic, "TBW102", 4, 0, 0, T0, 0, props)
    ctx = PutContext("C", 4096, "127.0.0.1", 9, timer=store.timer_settings, now_ms=store.now_ms())
    store.put([single_record(header, body, ctx)])


def bodies(store: WritableStore, topic: str = "T") -> list[bytes]:
    found: list[bytes] = []
    while buffers := store.reader.get_message(topic, 0, len(found), 32).buffers:
        found += [decode_message(b).body for b in buffers]
    return found


def test_a_timer_is_delivered_when_its_slot_has_passed_and_not_before(config: StoreConfig) -> None:
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        send(store, b"at", "TIMER_DELIVER_MS\x011700000003000")  # on a slot's edge: due at 3 000
        send(store, b"sec", "TIMER_DELAY_SEC\x011")  # 1 s after 400: slot 1 000, due 2 000
        assert bodies(store) == [] and store.next_delivery() == 1_700_000_002_000
        assert store.deliver_due(1_700_000_001_999) == []
        assert [a.queue_offset for a in store.deliver_due(1_700_000_002_000)] == [0]
        assert store.deliver_due(1_700_000_002_999) == [] and bodies(store) == [b"sec"]
        clock.now = 1_700_000_003_000
        store.deliver_due()
        assert bodies(store) == [b"sec", b"at"] and store.next_delivery() is None
        (buf,) = store.reader.get_message("T", 0, 1, 1).buffers
        delivered = decode_message(buf)
        assert delivered.store_timestamp == 1_700_000_003_000
        assert delivered.properties["TIMER_DEQUEUE_MS"] == "1700000003000"
        assert delivered.properties["TIMER_OUT_MS"] == "1700000002000"


def test_pending_timers_survive_a_restart_and_delivered_ones_are_not_repeated(config: StoreConfig) -> None:
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        send(store, b"far", "TIMER_DELAY_SEC\x01100")
        send(store, b"near", "TIMER_DELAY_SEC\x012")
        store.deliver_due(T0 + 5000)
        assert bodies(store) == [b"near"]
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() == 1_700_000_101_000
        store.deliver_due(T0 + 5000)
        assert bodies(store) == [b"near"]
        store.deliver_due(T0 + 101_000)
        assert bodies(store) == [b"near", b"far"]
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() is None and bodies(store) == [b"near", b"far"]


def test_killed_after_the_re_put_before_the_watermark_moved(
    config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intent is in the file and the delivery in the CommitLog, nothing else: not delivered again."""
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        for i in range(3):
            send(store, b"m%d" % i, f"TIMER_DELAY_SEC\x01{i + 1}")
        with monkeypatch.context() as patch:
            patch.setattr(TimerSchedule, "settle", lambda self, queue_offset: None)
            store.deliver_due(T0 + 10_000)
        assert bodies(store) == [b"m0", b"m1", b"m2"]
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() is None
        store.deliver_due(T0 + 60_000)
        assert bodies(store) == [b"m0", b"m1", b"m2"]


def test_killed_after_the_intent_before_the_re_put(config: StoreConfig) -> None:
    """An intent with nothing at its offset: the timer is still delivered, once."""
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        send(store, b"m", "TIMER_DELAY_SEC\x011")
        end = store.writer.position
    log = TimerDeliveryLog(config.store_path_root_dir / "timer" / "deliveries")
    log.open()
    log.intend(0, end)
    log.close()
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() == 1_700_000_002_000
        store.deliver_due(T0 + 10_000)
        assert bodies(store) == [b"m"]
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() is None and bodies(store) == [b"m"]


def test_a_delivery_that_rolled_to_the_next_commitlog_file_is_found_there(
    config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intent names the blank end of a file; the delivery went to the next file's start."""
    clock = Clock()
    size = config.mapped_file_size_commit_log
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        store.create_topic("Fill", 1)
        send(store, b"m" * 200, "TIMER_DELAY_SEC\x011")
        while size - store.writer.position % size > 400:
            send(store, b"f" * 100, "", topic="Fill")
        position = store.writer.position
        with monkeypatch.context() as patch:
            patch.setattr(TimerSchedule, "settle", lambda self, queue_offset: None)
            (appended,) = store.deliver_due(T0 + 10_000)
        assert appended.offset == (position // size + 1) * size, "the delivery went to the next file"
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() is None
        store.deliver_due(T0 + 60_000)
        assert bodies(store) == [b"m" * 200]


def test_many_timers_due_together_are_delivered_a_bounded_number_per_call(config: StoreConfig) -> None:
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        for i in range(150):
            send(store, b"%d" % i, "TIMER_DELAY_MS\x01500")
        counts = []
        while (done := store.deliver_due(T0 + 5000)) or not counts:
            counts.append(len(done))
        assert counts == [DELIVERIES_PER_CALL, DELIVERIES_PER_CALL, 150 - 2 * DELIVERIES_PER_CALL]
        assert sorted(int(b) for b in bodies(store)) == list(range(150))


def test_records_a_client_put_into_the_timer_topic_itself(config: StoreConfig) -> None:
    """One with a slot and a real topic is delivered as a rolled timer is; one without a slot, or with
    a real queue no queue can have, is passed over (settled, not retried, not kept across a restart)."""
    clock = Clock()
    with WritableStore(config, clock=clock) as store:
        store.create_topic("T", 1)
        store.create_topic("rmq_sys_wheel_timer", 1)
        send(store, b"no-slot", "REAL_TOPIC\x01T\x02REAL_QID\x010", topic="rmq_sys_wheel_timer")
        send(
            store,
            b"bad-qid",
            "TIMER_OUT_MS\x011700000001000\x02REAL_TOPIC\x01T\x02REAL_QID\x01-1",
            "rmq_sys_wheel_timer",
        )
        send(
            store,
            b"rolled",
            "TIMER_OUT_MS\x011700000001000\x02REAL_TOPIC\x01T\x02REAL_QID\x010",
            "rmq_sys_wheel_timer",
        )
        assert store.next_delivery() == 1_700_000_002_000
        clock.now = 1_700_000_002_000
        store.deliver_due()
        assert bodies(store) == [b"rolled"] and store.next_delivery() is None
        assert sorted(p.name for p in (config.consume_queue_dir / "T").iterdir()) == ["0"], "no queue -1"
    with WritableStore(config, clock=clock) as store:
        assert store.next_delivery() is None and bodies(store) == [b"rolled"]
