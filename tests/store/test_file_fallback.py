"""A file overwritten in place under the store is rebuilt from the CommitLog (issue 31, item 7).

``cp`` of another file's bytes over an IndexFile or a consume queue file of a served store (same
inode, other contents) used to be logged while answers stayed wrong: the IndexFile was left out (its
keys not found), the consume queue file was not noticed at all (pulls answered from the other
file's entries). On a copy of the real 4.9.7 broker's store, each file here is overwritten with
another's bytes while the store is open; after a refresh every known answer must be the broker's
again (the 475 key queries of ``java-4.9.7-a.expected.json``; every consume queue answer of
``java-4.9.7-a.cq-expected.json``), the rebuilt file must hold the broker's bytes, and the file on
disk is used again once it is restored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from protocol.message import decode_message
from store.config.store_config import StoreConfig
from store.consumequeue.get_message import GetMessageStatus
from store.message_store import MessageStore
from store.write.writer import StoreWriter

JAVA = "java-4.9.7-a"


def _copy(stores_dir: Path, tmp_path: Path) -> StoreConfig:
    """A writable copy of the Java store, its broker.conf beside it."""
    root = tmp_path / JAVA
    shutil.copytree(stores_dir / JAVA, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conf = tmp_path / f"{JAVA}.broker.conf"
    shutil.copy(stores_dir / f"{JAVA}.broker.conf", conf)
    os.chmod(conf, 0o644)
    return StoreConfig.load(conf)


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / f"{JAVA}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cq_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / f"{JAVA}.cq-expected.json").read_text(encoding="utf-8"))


def wrong_key_answers(store: MessageStore, expected: dict[str, Any]) -> list[str]:
    """The broker's key queries whose answer here differs from the broker's (records by sha256 in
    order, total size, index watermark)."""
    wrong = []
    for q in expected["queries"]:
        if "exception" in q:
            continue
        result = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        got = (
            [hashlib.sha256(b).hexdigest() for b in result.buffers],
            result.buffer_total_size,
            result.index_last_update_timestamp,
            result.index_last_update_phyoffset,
        )
        want = (
            [r["rawSha256"] for r in q["results"]],
            q["bufferTotalSize"],
            q["indexLastUpdateTimestamp"],
            q["indexLastUpdatePhyoffset"],
        )
        if got != want:
            wrong.append(f"{q['label']} {q['topic']}#{q['key']!r}")
    return wrong


def wrong_queue_answers(store: MessageStore, cq_expected: dict[str, Any]) -> list[str]:
    """The broker's consume queue answers that differ here: min/max, store times, offset by time,
    getMessage probes and walks (records by sha256)."""
    wrong = []
    for topic_entry in cq_expected["topics"]:
        topic = topic_entry["topic"]
        for q in topic_entry["queues"]:
            qid = q["queueId"]
            label = f"{topic}/{qid}"
            lo, hi = q["minOffsetInQueue"], q["maxOffsetInQueue"]
            if (store.min_offset(topic, qid), store.max_offset(topic, qid)) != (lo, hi):
                wrong.append(f"{label} min/max")
            if store.earliest_message_time(topic, qid) != q["earliestMessageTime"]:
                wrong.append(f"{label} earliest")
            times = [store.message_store_timestamp(topic, qid, n) for n in range(lo, hi)]
            if times != q["storeTimestamps"]:
                wrong.append(f"{label} store times")
            for timestamp, want in q["offsetByTime"]:
                if store.offset_by_time(topic, qid, timestamp) != want:
                    wrong.append(f"{label} offset by time {timestamp}")
            for probe in [*q["getMessage"], *q["walk"]]:
                result = store.get_message(topic, qid, probe["offset"], probe["maxMsgNums"])
                got = (
                    result.status.name,
                    result.next_begin_offset,
                    result.min_offset,
                    result.max_offset,
                    result.buffer_total_size,
                    [hashlib.sha256(b).hexdigest() for b in result.buffers],
                )
                want = (
                    probe["status"],
                    probe["nextBeginOffset"],
                    probe["minOffset"],
                    probe["maxOffset"],
                    probe["bufferTotalSize"],
                    [m["rawSha256"] if isinstance(m, dict) else m[4] for m in probe["messages"]],
                )
                if got != want:
                    wrong.append(f"{label} getMessage {probe['offset']}/{probe['maxMsgNums']}")
    return wrong


def _overwrite(victim: Path, source: Path) -> None:
    """``cp source victim``: the same inode, written over; its mtime moves as cp's write moves it
    (set past the old one should the copy land within the same millisecond)."""
    before = victim.stat().st_mtime_ns
    shutil.copyfile(source, victim)
    after = victim.stat()
    if after.st_mtime_ns // 1_000_000 == before // 1_000_000:
        os.utime(victim, ns=(after.st_atime_ns, before + 1_000_000_000))


def _warnings(caplog: pytest.LogCaptureFixture, *parts: str) -> int:
    return sum(
        all(p in r.getMessage() for p in parts) for r in caplog.records if r.levelno >= logging.WARNING
    )


def test_the_copy_answers_as_the_broker_before_any_damage(
    stores_dir: Path, tmp_path: Path, expected: dict[str, Any], cq_expected: dict[str, Any]
) -> None:
    config = _copy(stores_dir, tmp_path)
    with MessageStore.open(config) as store:
        assert len([q for q in expected["queries"] if "exception" not in q]) == 475
        assert wrong_key_answers(store, expected) == []
        assert wrong_queue_answers(store, cq_expected) == []


@pytest.mark.parametrize("victim", [0, 2, 5], ids=["first", "middle", "last"])
def test_an_index_file_overwritten_in_place_is_rebuilt_with_the_brokers_bytes(
    stores_dir: Path,
    tmp_path: Path,
    expected: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    victim: int,
) -> None:
    config = _copy(stores_dir, tmp_path)
    paths = sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())
    assert len(paths) == 6
    path = paths[victim]
    golden = (stores_dir / JAVA / "index" / path.name).read_bytes()
    with MessageStore.open(config) as store, caplog.at_level(logging.WARNING):
        _overwrite(path, paths[victim - 1 if victim else 1])
        store.refresh()
        assert wrong_key_answers(store, expected) == []
        rebuilt = next(f for f in store.index.files if f.name == path.name)
        assert rebuilt.inode != os.stat(path).st_ino  # answered from the rebuilt file, not the disk's
        assert bytes(rebuilt.buffer) == golden
        assert store.file_checks() == {"index": (1, 1), "consume_queue": (0, 0)}
        for _ in range(3):
            store.refresh()
        assert _warnings(caplog, str(path), "replaced by another file's bytes", "rebuilding it") == 1
        assert _warnings(caplog, str(path), "rebuilt from the CommitLog") == 1
        # Restored (the broker's file copied back): the file on disk answers again.
        shutil.copyfile(stores_dir / JAVA / "index" / path.name, path)
        store.refresh()
        again = next(f for f in store.index.files if f.name == path.name)
        assert again.inode == os.stat(path).st_ino
        assert wrong_key_answers(store, expected) == []
        assert store.file_checks() == {"index": (1, 1), "consume_queue": (0, 0)}


@pytest.mark.parametrize(
    ("victim", "source"),
    [("TopicA/0", "TopicA/1"), ("TopicB/2", "topic_c-1/2"), ("topic_c-1/3", "TopicA/3")],
    ids=["same-topic", "other-topic", "smaller-over-larger"],
)
def test_a_consume_queue_file_overwritten_in_place_is_rebuilt_with_the_brokers_bytes(
    stores_dir: Path,
    tmp_path: Path,
    cq_expected: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    victim: str,
    source: str,
) -> None:
    config = _copy(stores_dir, tmp_path)
    name = "0" * 20
    path = config.consume_queue_dir / victim / name
    golden = (stores_dir / JAVA / "consumequeue" / victim / name).read_bytes()
    topic, qid = victim.split("/")
    with MessageStore.open(config) as store, caplog.at_level(logging.WARNING):
        for t in cq_expected["topics"]:  # every queue opened, as a server that has served them
            for q in t["queues"]:
                store.max_offset(t["topic"], q["queueId"])
        _overwrite(path, config.consume_queue_dir / source / name)
        store.refresh()
        assert wrong_queue_answers(store, cq_expected) == []
        f = store.queues.get(topic, int(qid))._files[0]
        assert f.rebuilt and not f.pending
        assert bytes(f.view) == golden
        assert store.file_checks() == {"index": (0, 0), "consume_queue": (1, 1)}
        for _ in range(3):
            store.refresh()
        assert _warnings(caplog, str(path), "overwritten", "rebuilding it") == 1
        assert _warnings(caplog, str(path), "rebuilt from the CommitLog") == 1
        # Restored: the file on disk answers again.
        _overwrite(path, stores_dir / JAVA / "consumequeue" / victim / name)
        store.refresh()
        assert not store.queues.get(topic, int(qid))._files[0].rebuilt
        assert wrong_queue_answers(store, cq_expected) == []


def test_rebuilds_run_in_slices_and_a_pull_meanwhile_is_sent_back_to_its_offset(
    stores_dir: Path, tmp_path: Path, expected: dict[str, Any], cq_expected: dict[str, Any]
) -> None:
    config = _copy(stores_dir, tmp_path)
    index = sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())
    queue = config.consume_queue_dir / "TopicA" / "2" / ("0" * 20)
    with MessageStore.open(config) as store:
        assert store.max_offset("TopicA", 2) == 500
        _overwrite(index[3], index[4])
        _overwrite(queue, config.consume_queue_dir / "TopicB" / "2" / ("0" * 20))
        slices = 0
        while store.refresh(max_records=200):
            slices += 1
            if store.queues.get("TopicA", 2).rebuilding(7):
                # Nothing to answer from yet: the puller is sent back to the same offset, and the
                # queue's bounds hold.
                result = store.get_message("TopicA", 2, 7, 32)
                assert (result.status, result.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 7)
                assert (result.min_offset, result.max_offset) == (0, 500)
            assert slices < 100
        assert slices >= 10  # about 5,000 records, 200 a call
        assert store.repairs.pending == 0
        assert wrong_key_answers(store, expected) == []
        assert wrong_queue_answers(store, cq_expected) == []
        assert store.file_checks() == {"index": (1, 1), "consume_queue": (1, 1)}


def test_the_last_files_rebuilt_copies_follow_a_writer_that_keeps_writing_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A writer (as a live broker) keeps appending while its last consume queue file and newest
    # IndexFile are overwritten under it: it goes on writing into what is now the other file's
    # bytes. The rebuilt copies follow the CommitLog until they are full, so the messages sent
    # after the damage are pulled and found by key too, and the files the writer rolls to next
    # are read as usual.
    config = StoreConfig.for_store(
        tmp_path / "s",
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=200,  # 10 entries a file
        max_hash_slot_num=16,
        max_index_num=40,  # 39 keys a file: a message has two (its key and its unique key)
        broker_ip1="127.0.0.1",
    )
    clock = iter(range(1_000_000, 2_000_000, 300)).__next__
    with StoreWriter(config, clock=clock) as writer, caplog.at_level(logging.WARNING):
        for i in range(25):
            writer.append("T", f"body-{i}".encode(), keys=f"k{i}", queue_id=0)
        writer.index()  # its consume queue and index entries written, as a broker's reput does
        with MessageStore.open(config) as store:
            queue_files = sorted((config.consume_queue_dir / "T" / "0").iterdir())
            index_files = sorted(config.index_dir.iterdir())
            assert [len(queue_files), len(index_files)] == [3, 2]
            assert store.max_offset("T", 0) == 25  # the queue opened, as a server serving it has
            _overwrite(queue_files[-1], queue_files[0])
            _overwrite(index_files[-1], index_files[0])
            store.refresh()
            assert store.file_checks() == {"index": (1, 1), "consume_queue": (1, 1)}
            for i in range(25, 70):
                writer.append("T", f"body-{i}".encode(), keys=f"k{i}", queue_id=0)
                writer.index()
                if i % 10 == 0:
                    store.refresh()
            store.refresh()
            assert store.max_offset("T", 0) == 70
            bodies, offset = [], 0
            while offset < 70:
                result = store.get_message("T", 0, offset, 32)
                assert result.status == GetMessageStatus.FOUND, offset
                bodies += [decode_message(b).body for b in result.buffers]
                offset = result.next_begin_offset
            assert bodies == [f"body-{i}".encode() for i in range(70)]
            for i in range(70):
                found = store.query_message("T", f"k{i}", 64, 0, 1 << 62).buffers
                assert [decode_message(b).body for b in found] == [f"body-{i}".encode()], i
            assert store.repairs.following == 0  # both copies full: the writer rolled past them
            assert len(sorted(config.index_dir.iterdir())) == 4  # 140 keys, 39 a file


def test_a_full_index_file_of_this_process_own_build_overwritten_in_place_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # ``serve --build-index`` / ``--writable``: the index is this process's own build; a full file
    # overwritten in place (the one being written is the builder's) is left out and rebuilt too.
    config = StoreConfig.for_store(
        tmp_path / "s",
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=200,
        max_hash_slot_num=16,
        max_index_num=40,
        broker_ip1="127.0.0.1",
    )
    with StoreWriter(config, clock=iter(range(1_000_000, 2_000_000, 300)).__next__) as writer:
        for i in range(70):
            writer.append("T", f"body-{i}".encode(), keys=f"k{i}", queue_id=0)
    paths = sorted(config.index_dir.iterdir())
    assert len(paths) == 4
    original = paths[1].read_bytes()
    with MessageStore.open(config, build_index=True) as store, caplog.at_level(logging.WARNING):
        assert store.index.writable  # the builder's own files
        _overwrite(paths[1], paths[2])
        store.refresh()
        for i in range(70):
            found = store.query_message("T", f"k{i}", 64, 0, 1 << 62).buffers
            assert [decode_message(b).body for b in found] == [f"body-{i}".encode()], i
        rebuilt = next(f for f in store.index.files if f.name == paths[1].name)
        assert bytes(rebuilt.buffer) == original
        assert store.file_checks()["index"] == (1, 1)
        assert _warnings(caplog, str(paths[1]), "while this process builds it", "rebuilding it") == 1


@pytest.mark.parametrize(("victim", "source"), [("TopicA/0", "TopicB/0"), ("TopicB/3", "TopicB/1")])
def test_a_queue_first_opened_after_its_file_was_overwritten_is_rebuilt(
    stores_dir: Path,
    tmp_path: Path,
    cq_expected: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    victim: str,
    source: str,
) -> None:
    # A served queue is opened on its first request: one nobody asked for before the damage maps
    # the other file's bytes fresh. Its first and last entries name another queue's records (or
    # this queue's at other queue offsets): it is rebuilt, not answered from.
    config = _copy(stores_dir, tmp_path)
    name = "0" * 20
    topic, qid = victim.split("/")
    with MessageStore.open(config) as store, caplog.at_level(logging.WARNING):
        _overwrite(config.consume_queue_dir / victim / name, config.consume_queue_dir / source / name)
        # Until the next refresh rebuilds it, a pull there is sent back to its own offset.
        result = store.get_message(topic, int(qid), 3, 32)
        assert (result.status, result.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 3)
        store.refresh()
        assert wrong_queue_answers(store, cq_expected) == []
        f = store.queues.get(topic, int(qid))._files[0]
        assert (
            f.rebuilt and bytes(f.view) == (stores_dir / JAVA / "consumequeue" / victim / name).read_bytes()
        )
        assert store.file_checks()["consume_queue"] == (1, 1)
        assert _warnings(caplog, victim, "holds another file's entries", "rebuilding it") == 1


def test_a_queue_tail_zeroed_in_place_is_a_writer_cutting_it_back_not_other_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A writer cutting a queue back past records its CommitLog lost leaves the last entries zeroed:
    # its own doing, not another file's bytes. Nothing is said or rebuilt (the queue's end is read
    # as before this change).
    config = StoreConfig.for_store(
        tmp_path / "s",
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=200,
        max_hash_slot_num=16,
        max_index_num=40,
        broker_ip1="127.0.0.1",
    )
    with StoreWriter(config, clock=iter(range(1_000_000, 2_000_000, 300)).__next__) as writer:
        for i in range(25):
            writer.append("T", f"body-{i}".encode(), keys=f"k{i}", queue_id=0)
    last = sorted((config.consume_queue_dir / "T" / "0").iterdir())[-1]
    with MessageStore.open(config) as store, caplog.at_level(logging.WARNING):
        assert store.max_offset("T", 0) == 25
        before = last.stat().st_mtime_ns
        with open(last, "r+b") as fh:
            fh.seek(2 * 20)
            fh.write(bytes(3 * 20))  # entries 22..24 zeroed in place
        os.utime(last, ns=(before, before + 1_000_000_000))
        store.refresh()
        assert store.file_checks()["consume_queue"] == (0, 0)
        assert _warnings(caplog, str(last)) == 0
