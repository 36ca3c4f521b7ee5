"""``WritableStore.append`` then one ``settle``: what separate puts store, acknowledged together.

The compiled request path appends the SENDs of one read one by one and settles them once (the
reput, the refresh, the readable-end check and the index audit run once for all): the files must be
byte for byte what a put per record writes, each record with its own store timestamp, and a failed
settle must acknowledge none of the records it covers.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutContext, StoreUnavailable, single_record
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord
from tests.support.store_files import data_files

_CTX = PutContext("DefaultCluster", 4 * 1024 * 1024, "127.0.0.1", 9)


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=64, max_index_num=1024
    )


def _record(i: int, queue_id: int = 0, topic: str = "T") -> StoreRecord:
    props = f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i:031d}\x02WAIT\x01true"
    header = SendMessageRequestHeader("g", topic, "TBW102", 4, queue_id, 0, 1_700_000_000_000 + i, 0, props)
    return single_record(header, b"body-%d" % i, _CTX)


def _open(root: Path) -> WritableStore:
    store = WritableStore(_config(root), clock=itertools.count(1_700_000_000_000, 7).__next__)
    store.set_store_address("127.0.0.1", 10911)
    store.create_topic("T", 4)
    return store


def test_appends_settled_once_store_what_a_put_each_stores(tmp_path: Path) -> None:
    records = [_record(i, queue_id=i % 3) for i in range(12)]
    with _open(tmp_path / "puts") as store:
        one_by_one = [store.put([rec])[0] for rec in records]
    with _open(tmp_path / "group") as store:
        grouped = []
        for start in (0, 5, 6):  # groups of 5, 1 and 6
            for rec in records[start : {0: 5, 5: 6, 6: 12}[start]]:
                grouped += store.append([rec])
            settled = store.settle()
            assert len(settled) == {0: 5, 5: 1, 6: 6}[start]
        assert store.settle() == []  # nothing appended since
        # each record kept its own store timestamp (the clock read at each append)
        assert len({a.store_timestamp for a in grouped}) == len(records)
        hits = store.reader.query_message("T", "k7", 32, 0, 2**63 - 1).buffers
        assert [decode_message(h).body for h in hits] == [b"body-7"]
    assert grouped == one_by_one
    assert data_files(tmp_path / "group") == data_files(tmp_path / "puts")


def test_records_appended_are_not_readable_until_settled(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        store.put([_record(0)])
        store.append([_record(1)])
        store.append([_record(2)])
        assert store.reader.max_offset("T", 0) == 1
        assert store.reader.query_message("T", "k2", 32, 0, 2**63 - 1).buffers == []
        store.settle()
        assert store.reader.max_offset("T", 0) == 3


def test_a_cut_found_at_the_settle_acknowledges_none_of_its_records(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with _open(root) as store:
        (kept,) = store.put([_record(0)])
        first = store.append([_record(1)])[0]
        store.append([_record(2)])
        # the file is cut inside the first unsettled record, after both appends
        os.truncate(root / "commitlog" / f"{0:020d}", first.offset + 20)
        with pytest.raises(StoreUnavailable):
            store.settle()
        assert store.not_writable is not None
        with pytest.raises(StoreUnavailable):
            store.settle()  # a caller whose appends someone else settled learns it too
        with pytest.raises(StoreUnavailable):
            store.append([_record(3)])
        assert store.reader.max_offset("T", 0) == 1
        assert store.reader.commitlog.read_record(kept.offset) is not None
