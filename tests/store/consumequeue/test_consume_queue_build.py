"""Building ConsumeQueues from the CommitLog gives the Java broker's bytes (both golden stores), resumes
after a stop or a kill at any record, and reproduces the broker's rules for a CommitLog that no longer
starts at 0 (pre-blank entries) and for queues of several files.

Expected bytes come from the Java-written files (sha256 in the golden data) or are derived from them
by the format's rules (entries are 20 bytes at queue offset x 20, files named by their first byte)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from store.checkpoint import Checkpoint
from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder, rebuild_consume_queues
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from store.errors import StoreError
from store.message_store import GetMessageStatus, MessageStore

GOLDEN = ("java-4.9.7-a", "java-4.9.7-send")


def _copy(stores_dir: Path, name: str, tmp_path: Path, **overrides: object) -> StoreConfig:
    dst = tmp_path / name
    shutil.copytree(stores_dir / name, dst)
    for p in [dst, *dst.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return StoreConfig.load(
        stores_dir / f"{name}.broker.conf",
        overrides={"store_path_root_dir": dst, "store_path_commit_log": dst / "commitlog", **overrides},
    )


def _java_cq_files(stores_dir: Path, name: str) -> dict[str, str]:
    if name == "java-4.9.7-a":
        files = json.loads((stores_dir / f"{name}.cq-expected.json").read_text("utf-8"))["consumequeueFiles"]
    else:
        files = json.loads((stores_dir / f"{name}.expected.json").read_text("utf-8"))["files"]
    return {f["path"]: f["sha256"] for f in files if f["path"].startswith("consumequeue/")}


def _cq_files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("name", GOLDEN)
def test_rebuild_is_byte_identical_to_java(stores_dir: Path, tmp_path: Path, name: str) -> None:
    config = _copy(stores_dir, name, tmp_path)
    java = _java_cq_files(stores_dir, name)
    assert _cq_files(config.store_path_root_dir) == java  # the copy starts as Java wrote it
    before = Checkpoint.read(config.checkpoint_path)
    builder = rebuild_consume_queues(config)
    assert _cq_files(config.store_path_root_dir) == java
    assert builder.entries_written == builder.records_read - (20 if name == "java-4.9.7-a" else 0)
    assert not [p for p in config.store_path_root_dir.iterdir() if p.name.startswith(".consumequeue")]
    # The broker's own checkpoint: logicsMsgTimestamp = store time of the last record dispatched.
    assert Checkpoint.read(config.checkpoint_path) == before


def test_entry_counts_follow_the_transaction_rule(stores_dir: Path, tmp_path: Path) -> None:
    """4980 entries for java-4.9.7-a's 5000 records: PREPARED and ROLLBACK records get none."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    builder = rebuild_consume_queues(config)
    assert (builder.records_read, builder.entries_written) == (5000, 4980)


def test_complete_queues_are_left_alone(stores_dir: Path, tmp_path: Path) -> None:
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    expected = json.loads((stores_dir / "java-4.9.7-a.cq-expected.json").read_text("utf-8"))
    builder = ConsumeQueueBuilder(config)
    # The broker's reput start: the largest end of any queue's last entry's record.
    assert builder.next_offset == max(q["cqMaxPhysicOffset"] for t in expected["topics"] for q in t["queues"])
    builder.run_once()
    builder.close()
    assert builder.entries_written == 0
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir, "java-4.9.7-a")


@pytest.mark.parametrize("slice_records", [1, 7, 333, 4999])
def test_build_in_slices_with_restarts(stores_dir: Path, tmp_path: Path, slice_records: int) -> None:
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    total = 0
    for restart in range(60):
        builder = ConsumeQueueBuilder(config)
        read = builder.run_once(slice_records)
        if builder.entries_written == 0 or restart == 59:
            # A restart resumes at the last entry's end (the broker's rule), so a slice holding only
            # PREPARED/ROLLBACK records is read again by every restart: go on with this builder.
            builder.run_once()
        total += builder.entries_written
        builder.close()
        if read < slice_records or builder.entries_written == 0:
            break
    assert total == 4980
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir, "java-4.9.7-a")


def _walk_entries(stores_dir: Path) -> dict[tuple[str, int], list[list]]:
    """(topic, qid) -> [[queueOffset, commitLogOffset, size, storeTimestamp, rawSha256], ...] (Java's)."""
    expected = json.loads((stores_dir / "java-4.9.7-a.cq-expected.json").read_text("utf-8"))
    out = {}
    for t in expected["topics"]:
        for q in t["queues"]:
            out[(t["topic"], q["queueId"])] = [m for step in q["walk"] for m in step["messages"]]
    return out


def test_several_files_per_queue(stores_dir: Path, tmp_path: Path) -> None:
    """mappedFileSizeConsumeQueue=2000 (100 entries a file): the Java files' entries, cut into files."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path, mapped_file_size_consume_queue=2000)
    java_root = stores_dir / "java-4.9.7-a" / "consumequeue"
    shutil.rmtree(config.consume_queue_dir)  # another geometry: the old files must go first
    rebuild_consume_queues(config)
    per_file = 2000
    for (topic, qid), entries in _walk_entries(stores_dir).items():
        java = (java_root / topic / str(qid) / ("0" * 20)).read_bytes()[: len(entries) * 20]
        qdir = config.consume_queue_dir / topic / str(qid)
        names = sorted(os.listdir(qdir))
        assert names == [f"{start:020d}" for start in range(0, len(java), per_file)]
        for name in names:
            chunk = java[int(name) : int(name) + per_file]
            assert (qdir / name).read_bytes() == chunk + bytes(per_file - len(chunk))
    with MessageStore.open(config) as store:
        for (topic, qid), entries in _walk_entries(stores_dir).items():
            assert store.min_offset(topic, qid) == 0
            assert store.max_offset(topic, qid) == len(entries)
            queue = store.queues.get(topic, qid)
            assert [e.commit_log_offset for e in queue.entries(0, 10_000)] == [m[1] for m in entries]
            # A pull reads within one file: from 90 it stops at the file's end (100).
            result = store.get_message(topic, qid, 90, 32)
            assert result.status is GetMessageStatus.FOUND
            assert result.next_begin_offset == 100
            assert [hashlib.sha256(b).hexdigest() for b in result.buffers] == [m[4] for m in entries[90:100]]
            offset, seen = 0, []
            while offset < len(entries):
                result = store.get_message(topic, qid, offset, 32)
                seen += [hashlib.sha256(b).hexdigest() for b in result.buffers]
                assert result.next_begin_offset == min(offset + 32, (offset // 100 + 1) * 100, len(entries))
                offset = result.next_begin_offset
            assert seen == [m[4] for m in entries]


def _drop_commitlog_files(config: StoreConfig, count: int) -> int:
    names = sorted(os.listdir(config.store_path_commit_log))
    for name in names[:count]:
        os.unlink(config.store_path_commit_log / name)
    return int(names[count])


def test_commitlog_cleaned_min_offset_above_zero(stores_dir: Path, tmp_path: Path) -> None:
    """The broker deleted the first 5 CommitLog files but not the consume queue files: each queue's min
    offset is its first entry pointing at or past the new first offset (correctMinOffset)."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    first = _drop_commitlog_files(config, 5)
    with MessageStore.open(config) as store:
        for (topic, qid), entries in _walk_entries(stores_dir).items():
            q0 = next(m[0] for m in entries if m[1] >= first)
            assert q0 > 0
            assert store.min_offset(topic, qid) == q0
            assert store.max_offset(topic, qid) == len(entries)
            assert store.earliest_message_time(topic, qid) == entries[q0][3]
            result = store.get_message(topic, qid, q0 - 1, 32)
            assert (result.status, result.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, q0)
            result = store.get_message(topic, qid, q0, 32)
            assert result.status is GetMessageStatus.FOUND
            assert [hashlib.sha256(b).hexdigest() for b in result.buffers] == [
                m[4] for m in entries[q0 : q0 + 32]
            ]
            # Times before everything left give the min offset (entries below it are skipped).
            assert store.offset_by_time(topic, qid, 0) == q0
            assert store.offset_by_time(topic, qid, entries[-1][3] + 10**6) == len(entries) - 1
            stats = {row[0]: row for row in store.topic_stats(topic)}
            assert stats[qid][1:3] == (q0, len(entries))


def test_rebuild_after_commitlog_cleaning_fills_pre_blanks(stores_dir: Path, tmp_path: Path) -> None:
    """Rebuilt from a CommitLog starting mid-queue, a queue's first file holds blank entries
    (0, Integer.MAX_VALUE, 0) up to its first entry, then the Java entries at the same places."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    first = _drop_commitlog_files(config, 5)
    java_root = stores_dir / "java-4.9.7-a" / "consumequeue"
    rebuild_consume_queues(config)
    blank = (0).to_bytes(8, "big") + (2**31 - 1).to_bytes(4, "big") + (0).to_bytes(8, "big")
    with MessageStore.open(config) as store:
        for (topic, qid), entries in _walk_entries(stores_dir).items():
            q0 = next(m[0] for m in entries if m[1] >= first)
            java = (java_root / topic / str(qid) / ("0" * 20)).read_bytes()
            built = (config.consume_queue_dir / topic / str(qid) / ("0" * 20)).read_bytes()
            assert built == blank * q0 + java[q0 * CQ_STORE_UNIT_SIZE :]
            assert store.min_offset(topic, qid) == q0
            queue = store.queues.get(topic, qid)
            assert isinstance(queue, ConsumeQueue) and queue.entry(q0 - 1) is None


def test_unsafe_topic_names_write_nothing_outside(tmp_path: Path) -> None:
    from store.write.writer import StoreWriter

    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=1 << 20)
    with StoreWriter(config) as w:
        w.append("..", b"x")
        w.append("ok", b"y", tags="T")
    builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    assert sorted(os.listdir(config.consume_queue_dir)) == ["ok"]
    assert not (tmp_path / "s" / "0").exists()


def test_a_wrong_geometry_is_refused_before_anything_is_written(stores_dir: Path, tmp_path: Path) -> None:
    """Without the store's mappedFileSizeConsumeQueue (20000 here; the default is 6,000,000), a rebuild
    would rewrite every file in another geometry: refused, with the reason, the files untouched."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path, mapped_file_size_consume_queue=6_000_000)
    with pytest.raises(StoreError, match="mappedFileSizeConsumeQueue"):
        rebuild_consume_queues(config)
    with pytest.raises(StoreError, match="mappedFileSizeConsumeQueue"):
        ConsumeQueueBuilder(config)
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir, "java-4.9.7-a")


@pytest.mark.parametrize("catch_up", [True, False])
def test_serve_build_index_builds_the_consume_queues(
    stores_dir: Path, tmp_path: Path, catch_up: bool
) -> None:
    """``serve --build-index`` (MessageStore with build_index): the queues are built beside the index,
    at open or in refresh slices, and answer as the Java-written ones."""
    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    with MessageStore.open(config, build_index=True, catch_up=catch_up) as store:
        if not catch_up:
            assert store.max_offset("TopicA", 0) == 0
            slices = 0
            while store.refresh(max_records=700):
                slices += 1
            assert slices >= 7
        assert store.max_offset("TopicA", 0) == 500
        assert store.get_message("TopicB", 1, 0, 32).message_count == 32
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir, "java-4.9.7-a")
    assert Checkpoint.read(config.checkpoint_path).logics_msg_timestamp == 1795216843063


def test_rebuild_index_command_builds_both(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clients.cli import main

    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    conf = stores_dir / "java-4.9.7-a.broker.conf"
    root = config.store_path_root_dir
    shutil.rmtree(config.consume_queue_dir)
    assert main(["rebuild-index", "--store", str(root), "--config", str(conf), "--only", "consumequeue"]) == 0
    out = capsys.readouterr().out
    assert "built 4980 consume queue entries of 5000 records into 12 queues" in out and "indexed" not in out
    assert _cq_files(root) == _java_cq_files(stores_dir, "java-4.9.7-a")
    assert main(["rebuild-index", "--store", str(root), "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "indexed 11650 keys" in out and "built 4980 consume queue entries" in out
    assert _cq_files(root) == _java_cq_files(stores_dir, "java-4.9.7-a")
    # Without the store's broker.conf the geometry is the default one: refused, nothing replaced.
    assert main(["rebuild-index", "--store", str(root), "--only", "consumequeue"]) == 1
    assert "mappedFileSizeConsumeQueue" in capsys.readouterr().err
    assert _cq_files(root) == _java_cq_files(stores_dir, "java-4.9.7-a")


def test_an_unreadable_checkpoint_refuses_the_consume_queue_rebuild(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clients.cli import main

    config = _copy(stores_dir, "java-4.9.7-a", tmp_path)
    root = config.store_path_root_dir
    (root / "checkpoint").unlink()
    (root / "checkpoint").mkdir()
    conf = stores_dir / "java-4.9.7-a.broker.conf"
    args = ["rebuild-index", "--store", str(root), "--config", str(conf), "--only", "consumequeue"]
    assert main(args) == 1
    assert f"nothing was replaced; {config.consume_queue_dir} is unchanged" in capsys.readouterr().err
    assert _cq_files(root) == _java_cq_files(stores_dir, "java-4.9.7-a")
