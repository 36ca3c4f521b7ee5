"""A store still being written is followed without a restart: new files, a growing tail, a torn
record at the end (ignored until whole), and a store whose index this process builds itself."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from protocol.message import decode_message
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter

MAX = 2**63 - 1


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=8192, max_hash_slot_num=16, max_index_num=40
    )


def test_refresh_picks_up_new_files_and_tail(tmp_path: Path) -> None:
    config = _config(tmp_path / "live")
    writer = StoreWriter(config)
    first = [writer.append("Live", b"a" * 100, keys=f"k{i}") for i in range(10)]
    writer.index()
    store = MessageStore.open(config)
    try:
        assert store.commitlog.max_offset == writer.position
        assert len(store.query_message("Live", "k3", 64, 0, MAX).buffers) == 1
        files_before = len(store.index.files)
        later = [writer.append("Live", b"b" * 300, keys=f"n{i}") for i in range(60)]
        writer.index()
        assert store.view_message(later[-1].offset) is None, "not visible before refresh"
        store.refresh()
        assert store.commitlog.max_offset == writer.position
        assert len(store.commitlog.files) > 1
        assert len(store.index.files) > files_before
        buf = store.view_message(later[-1].offset)
        assert buf is not None and decode_message(buf).keys == ["n59"]
        hits = store.query_message("Live", "n42", 64, 0, MAX).buffers
        assert [decode_message(b).commit_log_offset for b in hits] == [later[42].offset]
        assert store.query_message("Live", "k0", 64, 0, MAX).buffers[0].tobytes() == bytes(
            store.view_message(first[0].offset) or b""
        )
    finally:
        store.close()
        writer.close()


def test_torn_tail_is_ignored_until_complete(tmp_path: Path) -> None:
    config = _config(tmp_path / "torn")
    with StoreWriter(config) as writer:
        a = writer.append("T", b"x" * 50, keys="whole")
        b = writer.append("T", b"y" * 50, keys="torn")
    path = config.store_path_commit_log / f"{0:020d}"
    data = bytearray(path.read_bytes())
    record_b = bytes(data[b.offset : b.offset + b.size])
    data[b.offset : b.offset + b.size] = b"\0" * b.size
    path.write_bytes(bytes(data))
    with MessageStore.open(config) as store:
        assert store.commitlog.max_offset == b.offset
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, record_b[: b.size - 60], b.offset)  # header and part of the body
            store.refresh()
            assert store.commitlog.max_offset == b.offset
            assert [off for off, _ in store.commitlog.iter_records()] == [a.offset]
            os.pwrite(fd, record_b[b.size - 60 :], b.offset + b.size - 60)
        finally:
            os.close(fd)
        store.refresh()
        assert store.commitlog.max_offset == b.offset + b.size
        assert [off for off, _ in store.commitlog.iter_records()] == [a.offset, b.offset]


def test_store_without_index_builds_its_own(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    config, expected = golden_stores[0]
    root = tmp_path / "noindex"
    shutil.copytree(config.store_path_commit_log, root / "commitlog")
    for p in (root / "commitlog").iterdir():
        os.chmod(p, 0o644)
    own = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=config.mapped_file_size_commit_log,
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
    )
    with MessageStore.open(own, build_index=True) as store:
        assert {"TopicA", "TopicB", "topic_c-1"} <= store.topics()
        for q in expected["queries"][:60]:
            if "exception" in q:
                continue
            result = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            assert [int.from_bytes(b[28:36], "big") for b in result.buffers] == [
                r["commitLogOffset"] for r in q["results"]
            ], q["label"]
            assert result.index_last_update_phyoffset == q["indexLastUpdatePhyoffset"]


def test_index_file_being_created_is_picked_up_once_sized(tmp_path: Path) -> None:
    config = _config(tmp_path / "creating")
    with StoreWriter(config) as writer:
        writer.append("T", b"x", keys="a")
    with MessageStore.open(config) as store:
        before = len(store.index.files)
        fresh = config.index_dir / "99991231235959999"
        fresh.touch()  # a broker creating its next file: the name exists before the size is set
        store.refresh()
        assert len(store.index.files) == before
        os.truncate(fresh, config.index_file_size)
        store.refresh()
        assert [f.name for f in store.index.files][-1] == fresh.name
        # The new, empty newest file now gives the last-update fields, as the broker's would.
        assert store.query_message("T", "a", 64, 0, MAX).index_last_update_phyoffset == 0


def test_refresh_indexes_new_records_when_building_its_own_index(tmp_path: Path) -> None:
    root = tmp_path / "own"
    writer = StoreWriter(
        StoreConfig.for_store(root, mapped_file_size_commit_log=8192, message_index_enable=False)
    )
    writer.append("Own", b"one", keys="early")
    config = _config(root)
    with MessageStore.open(config, build_index=True) as store:
        assert len(store.query_message("Own", "early", 64, 0, MAX).buffers) == 1
        late = [writer.append("Own", b"x" * 200, keys=f"late-{i}") for i in range(80)]
        assert not store.query_message("Own", "late-79", 64, 0, MAX).buffers
        store.refresh()
        hits = store.query_message("Own", "late-79", 64, 0, MAX).buffers
        assert [decode_message(b).commit_log_offset for b in hits] == [late[-1].offset]
        assert len(store.index.files) > 1, "the small geometry rolls index files while following"
    writer.close()


def test_build_index_holds_when_the_broker_had_indexing_off(tmp_path: Path) -> None:
    """A store whose broker ran with messageIndexEnable=false has no index: that is exactly when
    ``serve --build-index`` is asked for, so the flag must not be silently dropped by that setting."""
    root = tmp_path / "unindexed"
    root.mkdir()
    (root / "broker.conf").write_text(
        "storePathRootDir=.\nmappedFileSizeCommitLog=8192\nmaxHashSlotNum=16\nmaxIndexNum=40\n"
        "messageIndexEnable=false\n",
        encoding="utf-8",
    )
    config = StoreConfig.load(root / "broker.conf")
    assert config.message_index_enable is False
    writer = StoreWriter(config)  # a broker with indexing off: appends, never indexes
    stored = [writer.append("Off", b"body", keys=f"off-{i}") for i in range(5)]
    writer.close()
    assert not (root / "index").exists()
    with MessageStore.open(config, build_index=True) as store:
        hits = store.query_message("Off", "off-3", 64, 0, MAX).buffers
        assert [decode_message(b).commit_log_offset for b in hits] == [stored[3].offset]
        assert "Off" in store.topics()
