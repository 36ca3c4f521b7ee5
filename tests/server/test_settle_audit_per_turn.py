"""The index audit of a writable server's settles: once per turn of the event loop, not once per put.

Every settle of a writable store audits the index file being written (``IndexService.audit``: a
``stat`` of its path, a read of its header; it warns once when the file was deleted, replaced, cut
or zeroed under the builder). A server settles many puts in one turn of its loop (one per read
under sync16); ``QueryServer`` lets the first settle of a turn audit and the rest skip it
(``MessageStore.once_per_turn``). The builder's own check before writing through the map still
runs on every settle that was not audited, so a file cut in between is never written (a fault).
A server's settles also audit at most every ``AUDIT_EVERY`` seconds: when each turn brings one
SEND or one batch (a synchronous producer), once a turn is once a put. The look at resident memory
every ``RSS_CHECK_EVERY_DISPATCHED`` records dispatched (a read of ``/proc/self/statm``, and the
page release it may bring) is once a turn at most too.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

import store.message_store as message_store_module
from clients.testkit.server import RmqServer, kit_store_config
from server.broker.writable_store import WritableStore
from store.commitlog import mapped_files
from store.index.index_file import IndexFile
from store.write.writer import StoreRecord


def _record(i: int) -> StoreRecord:
    return StoreRecord("T", b"body-%d" % i, f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i:031d}\x02", queue_id=i % 4)


def _counting_resident_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each read of ``/proc/self/statm`` (``resident_file_bytes``)."""
    reads: list[int] = []
    real = message_store_module.resident_file_bytes

    def resident() -> int | None:
        reads.append(1)
        return real()

    monkeypatch.setattr(message_store_module, "resident_file_bytes", resident)
    return reads


def _counting_audits(store: WritableStore) -> list[bool]:
    index = store.reader.index
    real = index.audit
    audits: list[bool] = []

    def audit(*, tail: bool = False) -> None:
        audits.append(tail)
        real(tail=tail)

    index.audit = audit  # type: ignore[method-assign]
    return audits


def test_the_settles_of_one_loop_turn_audit_the_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(message_store_module, "AUDIT_EVERY", 0.0)  # every turn (the interval: below)
    server = RmqServer(kit_store_config(tmp_path / "store"))
    try:
        store = server.store
        assert store is not None
        server.call(store.create_topic, "T", 4)
        audits = _counting_audits(store)

        def puts(first: int) -> None:  # one turn of the server's loop
            for i in range(first, first + 8):
                store.put([_record(i)])

        server.call(puts, 0)
        assert audits == [True], "eight settles in one turn: one audit"
        server.call(puts, 8)
        assert audits == [True, True], "the next turn audits again"
        for i in range(16):  # each put was indexed and readable when it returned
            hits = server.call(store.reader.query_message, "T", f"k{i}", 32, 0, 2**63 - 1)
            assert len(hits.buffers) == 1
    finally:
        server.close()
    assert store.reader.once_per_turn is None, "the stopped server's hook is gone"


def test_turns_within_the_audit_interval_audit_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One put per turn (a synchronous producer's SENDs or batches): the turns within ``AUDIT_EVERY``
    of an audit make none, the first turn after it audits again; the builder's own look at the map
    before it writes still runs on each settle not audited."""
    monkeypatch.setattr(message_store_module, "AUDIT_EVERY", 3600.0)
    server = RmqServer(kit_store_config(tmp_path / "store"))
    try:
        store = server.store
        assert store is not None
        server.call(store.create_topic, "T", 4)
        audits = _counting_audits(store)
        looks: list[int] = []
        real_intact = IndexFile.intact

        def intact(self: IndexFile) -> bool:
            looks.append(1)
            return real_intact(self)

        monkeypatch.setattr(IndexFile, "intact", intact)
        for i in range(6):  # six turns of one put each
            server.call(store.put, [_record(i)])
        assert audits == [True], "six turns within the interval: one audit"
        assert len(looks) == 5, "each settle not audited looked at the map itself"
        store.reader._audited_at -= 3600.0  # the interval has passed
        server.call(store.put, [_record(6)])
        assert audits == [True, True]
        for i in range(7):  # each put was indexed and readable when it returned
            hits = server.call(store.reader.query_message, "T", f"k{i}", 32, 0, 2**63 - 1)
            assert len(hits.buffers) == 1
    finally:
        server.close()


def test_resident_memory_is_looked_at_once_per_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``RSS_CHECK_EVERY_DISPATCHED`` records dispatched a settle reads ``/proc/self/statm``:
    two settles of that many records in one turn read it once, and the next turn reads it again."""
    every = message_store_module.RSS_CHECK_EVERY_DISPATCHED
    server = RmqServer(kit_store_config(tmp_path / "store"))
    try:
        store = server.store
        assert store is not None
        server.call(store.create_topic, "T", 4)
        reads = _counting_resident_reads(monkeypatch)

        def settles(first: int) -> None:  # one turn: two settles of ``every`` records each
            for start in (first, first + every):
                store.append([_record(i) for i in range(start, start + every)])
                store.settle()

        server.call(settles, 0)
        assert len(reads) == 1
        server.call(settles, 2 * every)
        assert len(reads) == 2
    finally:
        server.close()


def test_one_batch_a_turn_looks_at_resident_memory_every_256_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synchronous producer's batches of 32, one per turn: ``/proc/self/statm`` is read once per
    ``RSS_CHECK_EVERY_DISPATCHED`` records dispatched, not at every batch."""
    every = message_store_module.RSS_CHECK_EVERY_DISPATCHED
    # No periodic full check of the CommitLog: a settle it falls due in walks, and the walk's
    # records are looked at every RSS_CHECK_EVERY_RECORDS (a slow, loaded run met it).
    monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)
    server = RmqServer(kit_store_config(tmp_path / "store"))
    try:
        store = server.store
        assert store is not None
        server.call(store.create_topic, "T", 4)
        reads = _counting_resident_reads(monkeypatch)
        batches = 2 * every // 32
        for b in range(batches):  # one turn each
            server.call(store.put, [_record(i) for i in range(32 * b, 32 * b + 32)])
        assert len(reads) == 2
    finally:
        server.close()


def test_a_file_replaced_between_turns_is_said_at_the_next_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(message_store_module, "AUDIT_EVERY", 0.0)
    config = kit_store_config(tmp_path / "store", max_hash_slot_num=16, max_index_num=40)
    server = RmqServer(config)
    try:
        store = server.store
        assert store is not None
        server.call(store.create_topic, "T", 4)
        server.call(store.put, [_record(0)])
        (path,) = [p for p in config.index_dir.iterdir() if p.name.isdigit()]
        spare = path.with_name("spare")
        shutil.copyfile(path, spare)
        os.replace(spare, path)
        with caplog.at_level(logging.WARNING):
            server.call(store.put, [_record(1)])
        said = [r.getMessage() for r in caplog.records if "was replaced by another file" in r.getMessage()]
        assert len(said) == 1, said
    finally:
        server.close()


def test_a_store_without_a_server_audits_every_settle(tmp_path: Path) -> None:
    with WritableStore(kit_store_config(tmp_path / "store")) as store:
        store.create_topic("T", 4)
        audits = _counting_audits(store)
        for i in range(5):
            store.put([_record(i)])
        assert audits == [True] * 5
