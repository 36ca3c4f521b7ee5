"""``DecidedHalves``' bounds (issue 31 item 6): at most ``capacity`` decisions, the oldest forgotten
first; the op queue read back ``catch_up`` records per question, from ``capacity`` before its end."""

from __future__ import annotations

from pathlib import Path

from server.broker.decided_halves import DecidedHalves, Decision
from server.broker.transactions import TRANS_OP_HALF_TOPIC
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord


def op(half_offset: int) -> StoreRecord:
    """An op record as the broker writes it: tag ``d``, the half's queue offset as the body."""
    return StoreRecord(
        TRANS_OP_HALF_TOPIC, str(half_offset).encode(), "TAGS\x01d\x02WAIT\x01true\x02", queue_id=0
    )


def test_the_oldest_decision_is_forgotten_past_the_capacity(tmp_path: Path) -> None:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store"))
    try:
        table = DecidedHalves(capacity=3)
        for offset in range(4):
            table.record(0, offset, Decision.COMMIT)
        assert len(table) == 3
        assert table.decision(store.reader, 0, 0) is None
        assert table.decision(store.reader, 0, 3) is Decision.COMMIT
    finally:
        store.close()


def test_the_op_queue_is_read_back_a_page_at_a_time_from_capacity_before_its_end(tmp_path: Path) -> None:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store"))
    try:
        store.put([op(n) for n in range(10)])
        table = DecidedHalves(capacity=6, catch_up=2)
        # Ops 0-3 are older than the capacity: never read. Each question reads two more.
        assert table.decision(store.reader, 0, 4) is Decision.UNKNOWN
        assert len(table) == 2
        assert table.decision(store.reader, 0, 9) is None
        assert table.decision(store.reader, 0, 9) is Decision.UNKNOWN
        assert table.decision(store.reader, 0, 3) is None
        # A kind known here is kept when its op is read back.
        table.record(0, 20, Decision.ROLLBACK)
        store.put([op(20)])
        assert table.decision(store.reader, 0, 20) is Decision.ROLLBACK
    finally:
        store.close()
