"""The write path's store: one writer at a time, delayed delivery that survives a restart, the broker's
``delayOffset.json``, and a torn record left by a crash scrubbed before writing resumes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

import server.broker.scheduled_delivery as scheduled_delivery_module
from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader, client_properties
from server.broker.put_message import PutContext, single_record
from server.broker.writable_store import WritableStore
from store.config.delay_offsets import read_delay_offsets, write_delay_offsets
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter, WriterLockedError


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1")


def _delayed(topic: str, key: str, level: int):
    header = SendMessageRequestHeader(
        "g", topic, "TBW102", 4, 0, 0, 5, 0, client_properties(key, None, None, f"U-{key}", level)
    )
    return single_record(header, b"later", PutContext("DefaultCluster", 4096, "127.0.0.1", 9))


def test_delay_offset_file_has_the_brokers_bytes(stores_dir: Path, tmp_path: Path) -> None:
    golden = stores_dir / "java-4.9.7-send" / "config" / "delayOffset.json"
    assert read_delay_offsets(golden) == {2: 1}
    write_delay_offsets(tmp_path / "d.json", {2: 1})
    assert (tmp_path / "d.json").read_bytes() == golden.read_bytes()


def test_pending_delivery_survives_a_restart_and_happens_once(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    now = [1_000]
    with WritableStore(config, clock=lambda: now[0]) as store:
        (scheduled,) = store.put([_delayed("T", "d-1", 1)])
        assert store.next_delivery() == 2_000
    now[0] = 5_000
    with WritableStore(config, clock=lambda: now[0]) as store:
        assert store.next_delivery() == 2_000, "a pending delivery must be re-armed after a restart"
        (delivered,) = store.deliver_due()
        msg = decode_message(store.reader.view_message(delivered.offset))
        assert (msg.topic, msg.body, msg.store_timestamp) == ("T", b"later", 5_000)
        assert store.deliver_due() == []
    assert read_delay_offsets(config.store_path_root_dir / "config" / "delayOffset.json") == {1: 1}
    with WritableStore(config, clock=lambda: now[0]) as store:
        assert store.next_delivery() is None
    assert scheduled.queue_offset == 0


def test_due_deliveries_leave_the_delay_offsets_file_to_another_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deliver_due`` runs on the event loop: rewriting and syncing ``delayOffset.json`` after each
    of its 64 deliveries held the loop 26-500 ms here (the disk's sync latency). The offsets are
    written off that thread, and the file holds all of them once the store is closed."""
    config = _config(tmp_path / "s")
    now = [1_000]
    writers: list[int] = []
    real_write = scheduled_delivery_module.write_delay_offsets

    def recording_write(target: Path, offsets: dict[int, int]) -> None:
        writers.append(threading.get_ident())
        real_write(target, offsets)

    monkeypatch.setattr(scheduled_delivery_module, "write_delay_offsets", recording_write)
    with WritableStore(config, clock=lambda: now[0]) as store:
        store.put([_delayed("T", f"d-{i}", 1) for i in range(64)])
        now[0] = 5_000
        assert len(store.deliver_due()) == 64
        assert threading.get_ident() not in writers, "a delivery wrote the file on the loop's thread"
    assert read_delay_offsets(config.store_path_root_dir / "config" / "delayOffset.json") == {1: 64}


def test_one_writer_per_store(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    with WritableStore(config):
        with pytest.raises(WriterLockedError):
            WritableStore(config)
        with pytest.raises(WriterLockedError):
            StoreWriter(config)
    WritableStore(config).close()  # released


def test_a_torn_record_is_scrubbed_before_writing_resumes(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    with StoreWriter(config, clock=lambda: 7) as writer:
        first = writer.append("T", b"a" * 1000, keys="k1")
    path = config.store_path_commit_log / f"{0:020d}"
    end = first.offset + first.size
    torn = bytearray(path.read_bytes()[: first.size])  # a copy of a whole record, cut short
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(bytes(torn[: first.size - 10]))
    with StoreWriter(config, clock=lambda: 8) as writer:
        second = writer.append("T", b"b", keys="k2")
    assert second.offset == end
    data = path.read_bytes()
    assert data[second.offset + second.size : end + first.size] == bytes(
        end + first.size - second.offset - second.size
    )
    assert os.path.getsize(path) == config.mapped_file_size_commit_log
    assert json.loads((config.store_path_root_dir / "config" / "topics.json").read_text())[
        "topicConfigTable"
    ]["T"]


def _keyed(topic: str, key: str):
    header = SendMessageRequestHeader(
        "g", topic, "TBW102", 4, 0, 0, 5, 0, client_properties(key, None, None, f"U-{key}")
    )
    return single_record(header, b"now", PutContext("DefaultCluster", 4096, "127.0.0.1", 9))


@pytest.mark.parametrize("indexing", [True, False])
def test_the_write_path_indexes_only_when_broker_conf_says_so(tmp_path: Path, indexing: bool) -> None:
    """``messageIndexEnable=false``: the broker's dispatch skips ``CommitLogDispatcherBuildIndex``, so
    no IndexFile is written and a key query finds nothing; the consume queues are dispatched either way."""
    config = StoreConfig.for_store(
        tmp_path / "s",
        mapped_file_size_commit_log=64 * 1024,
        broker_ip1="127.0.0.1",
        message_index_enable=indexing,
    )
    with WritableStore(config, clock=lambda: 1_000) as store:
        (sent,) = store.put([_keyed("T", "k-1")])
        hits = store.reader.query_message("T", "k-1", 32, 0, 2**63 - 1).buffers
        assert [decode_message(h).commit_log_offset for h in hits] == ([sent.offset] if indexing else [])
        assert store.reader.max_offset("T", 0) == 1  # dispatched to its consume queue regardless
        assert store.reader.get_message("T", 0, 0, 32).buffers
    index_dir = config.store_path_root_dir / "index"
    files = sorted(index_dir.iterdir()) if index_dir.exists() else []
    assert bool(files) is indexing
    with WritableStore(config, clock=lambda: 2_000) as store:  # reopened: still not indexed
        store.put([_keyed("T", "k-2")])
        assert bool(store.reader.query_message("T", "k-2", 32, 0, 2**63 - 1).buffers) is indexing
    assert (sorted(index_dir.iterdir()) if index_dir.exists() else []) == files or indexing


def test_a_store_that_fails_to_open_keeps_its_delivered_offsets(tmp_path: Path) -> None:
    """An open that fails after the lock (a corrupt ``config/topics.json``) must not save delivery
    offsets it never loaded: its cleanup used to write an empty ``delayOffset.json``, so the next good
    open delivered every scheduled message again."""
    config = _config(tmp_path / "s")
    now = [1_000]
    with WritableStore(config, clock=lambda: now[0]) as store:
        store.put([_delayed("T", "d-1", 1)])
        now[0] = 5_000
        assert len(store.deliver_due()) == 1
    offsets = config.store_path_root_dir / "config" / "delayOffset.json"
    saved = offsets.read_bytes()
    assert read_delay_offsets(offsets) == {1: 1}
    topics = config.store_path_root_dir / "config" / "topics.json"
    backup = topics.with_name("topics.json.bak")  # read instead of a corrupt file, as the broker does
    good, good_backup = topics.read_bytes(), backup.read_bytes()
    topics.write_bytes(b'{"topicConfigTable": {')
    backup.write_bytes(b'{"topicConfigTable": {')
    with pytest.raises(ValueError):
        WritableStore(config, clock=lambda: now[0])
    assert offsets.read_bytes() == saved
    topics.write_bytes(good)
    backup.write_bytes(good_backup)
    with WritableStore(config, clock=lambda: now[0]) as store:
        assert store.next_delivery() is None, "the delivered message must not be due again"
        assert store.deliver_due() == []
        assert store.reader.max_offset("T", 0) == 1
