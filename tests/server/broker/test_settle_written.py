"""A settle takes the records its own writer just appended without walking them again.

``WritableStore.settle`` hands the read side the span ``append`` wrote (``MessageStore.refresh_written``:
the CommitLog's end moved to it once the map reads the first and last record's size words as written,
the dispatchers given the writer's own bytes as one run) instead of the reput's walk, which re-read
and re-checked BODYCRC of bytes written from memory a moment ago.
The files must be byte for byte what the walk writes, across CommitLog and IndexFile roll-overs,
batches and queues; bytes that are not what the writer wrote are never acknowledged.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from protocol.message import decode_message
from server.broker.put_message import StoreUnavailable
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreRecord
from tests.support.store_files import data_files


def _config(root: Path) -> StoreConfig:
    # small files: CommitLog roll-overs (blank records) and IndexFile roll-overs within a few hundred puts
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=64, max_index_num=512
    )


def _open(root: Path) -> WritableStore:
    store = WritableStore(_config(root), clock=itertools.count(1_700_000_000_000, 3).__next__)
    store.set_store_address("127.0.0.1", 10911)
    store.create_topic("T", 4)
    store.create_topic("U", 2)
    return store


def _record(i: int, topic: str = "T", queue_id: int = 0) -> StoreRecord:
    props = f"KEYS\x01k{i} kk{i % 7}\x02TAGS\x01tag{i % 3}\x02UNIQ_KEY\x01U{i:031d}\x02WAIT\x01true"
    return StoreRecord(topic, b"body-%d-" % i + b"x" * (i * 37 % 900), props, queue_id=queue_id)


def _write(store: WritableStore) -> None:
    """Single puts, appends settled in groups, and batches, over two topics and several queues."""
    n = 0
    for round_ in range(40):
        store.put([_record(n, queue_id=round_ % 4)])
        n += 1
        for _ in range(round_ % 5):  # groups of 0 to 4 appends settled once
            store.append([_record(n, "U", n % 2)])
            n += 1
        store.settle()
        _readable(store, n - 1)
        batch = [_record(n + j, queue_id=(round_ + 1) % 4) for j in range(1 + round_ % 9)]
        n += len(batch)
        store.put(batch)
        _readable(store, n - 1)


def _readable(store: WritableStore, i: int) -> None:
    """Record ``i`` was settled: its key finds it (nothing is acknowledged before it is readable)."""
    hits = store.reader.query_message("T" if i % 5 else "U", f"k{i}", 32, 0, 2**63 - 1).buffers
    hits += store.reader.query_message("U" if i % 5 else "T", f"k{i}", 32, 0, 2**63 - 1).buffers
    assert [decode_message(h).body.split(b"-")[1] for h in hits] == [b"%d" % i]


def test_the_settle_of_what_was_written_stores_what_the_walk_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    real = MessageStore.refresh_written

    def counted(self: MessageStore, *args: object) -> bool:
        taken.append(real(self, *args))  # type: ignore[arg-type]
        return taken[-1]

    monkeypatch.setattr(MessageStore, "refresh_written", counted)
    with _open(tmp_path / "direct") as store:
        _write(store)
        settles = len(taken)
        hits = store.reader.query_message("T", "k77", 32, 0, 2**63 - 1).buffers
        assert [decode_message(h).body[:8] for h in hits] == [b"body-77-"]
    # most settles took the written span (the rest: a roll-over between or before their records,
    # and the walk every FULL_CHECK_EVERY), and the files rolled over
    assert settles >= 100 and sum(taken) >= settles // 2, (settles, sum(taken))
    assert len(list((tmp_path / "direct" / "commitlog").iterdir())) >= 3
    assert len(list((tmp_path / "direct" / "index").iterdir())) >= 2

    monkeypatch.setattr(MessageStore, "refresh_written", lambda self, *args: False)
    with _open(tmp_path / "walked") as store:
        _write(store)
    assert data_files(tmp_path / "direct") == data_files(tmp_path / "walked")


def test_bytes_changed_under_the_write_are_not_acknowledged(tmp_path: Path) -> None:
    """The map no longer holds what the writer wrote (overwritten in place, the file's size and
    inode unchanged): the settle does not take the span, the walk finds the CommitLog ending before
    the writer's position, and none of the records is acknowledged."""
    root = tmp_path / "s"
    with _open(root) as store:
        (kept,) = store.put([_record(0)])
        first = store.append([_record(1)])[0]
        second = store.append([_record(2)])[0]
        fd = os.open(root / "commitlog" / f"{0:020d}", os.O_WRONLY)
        try:
            os.pwrite(fd, bytes(second.offset + second.size - first.offset), first.offset)
        finally:
            os.close(fd)
        with pytest.raises(StoreUnavailable):
            store.settle()
        assert store.not_writable is not None
        assert store.reader.max_offset("T", 0) == 1
        assert store.reader.commitlog.read_record(kept.offset) is not None


def test_a_dispatcher_behind_the_written_span_gets_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dispatcher that lacks records before the span (the index sat a pass out: its newest file
    looked cut) is not handed the span alone: the reput walks from its resume point, and the
    records it missed get their keys."""
    from store.index.builder import IndexBuilder

    root = tmp_path / "s"
    with _open(root) as store:
        store.put([_record(0)])
        real = IndexBuilder.begin
        monkeypatch.setattr(IndexBuilder, "begin", lambda self: False)
        store.put([_record(1)])
        assert store.reader.query_message("T", "k1", 32, 0, 2**63 - 1).buffers == []
        monkeypatch.setattr(IndexBuilder, "begin", real)
        store.put([_record(2)])
        for key in ("k0", "k1", "k2"):
            assert len(store.reader.query_message("T", key, 32, 0, 2**63 - 1).buffers) == 1, key


@pytest.mark.parametrize("shortcut", [True, False])
def test_a_record_ending_in_a_zero_byte_is_readable_when_its_put_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shortcut: bool
) -> None:
    """A property value ending in U+0000 makes the record's last byte 0, which the walk's "may still
    be arriving" rule holds back for another process's writer. Our own put's record is whole when
    the write returns: readable (its queue's entry, its key) when ``put`` returns, whether the settle
    takes the written span (``refresh_written``) or walks (it does when a full check of the
    CommitLog is due, every ``FULL_CHECK_EVERY``: forced here)."""
    if not shortcut:
        monkeypatch.setattr(MessageStore, "refresh_written", lambda self, *args: False)
    store = _open(tmp_path)
    try:
        for i in range(3):
            props = f"KEYS\x01z{i}\x02UNIQ_KEY\x01Z{i:031d}\x02WAIT\x01true\x02zero\x01ends\x00"
            store.put([StoreRecord("T", b"zero-%d" % i, props, queue_id=1)])
            assert store.reader.max_offset("T", 1) == i + 1
            hits = store.reader.query_message("T", f"z{i}", 32, 0, 2**63 - 1).buffers
            assert [decode_message(h).body for h in hits] == [b"zero-%d" % i]
    finally:
        store.close()
