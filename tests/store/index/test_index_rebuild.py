"""Rebuilding a golden store's index from its CommitLog gives the Java broker's bytes, and the
builder resumes after a crash at any point without losing or duplicating an entry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from store.checkpoint import Checkpoint
from store.config.store_config import StoreConfig
from store.index.builder import IndexBuilder, rebuild_index
from store.index.index_file import IndexFile
from tests.support.index_writes import hook_compiled_writes
from tests.support.store_copy import writable_copy


def _writable_copy(config: StoreConfig, tmp_path: Path) -> StoreConfig:
    return writable_copy(config, tmp_path / config.store_path_root_dir.name)


def _index_bytes(index_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(index_dir.iterdir()) if p.name.isdigit()]


def test_rebuild_is_byte_identical_to_java(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    for config, _expected in golden_stores:
        java = _index_bytes(config.index_dir)
        copy = _writable_copy(config, tmp_path)
        rebuild_index(copy)
        assert _index_bytes(copy.index_dir) == java
        assert not list(copy.store_path_root_dir.glob("index.*")), "temporary directories left behind"
        java_checkpoint = Checkpoint.read(config.checkpoint_path)
        assert (
            Checkpoint.read(copy.checkpoint_path).index_msg_timestamp == java_checkpoint.index_msg_timestamp
        )


def test_rebuild_is_idempotent(golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path) -> None:
    config, _ = golden_stores[0]
    copy = _writable_copy(config, tmp_path)
    builder = IndexBuilder(copy)
    builder.run_once()
    assert builder.keys_indexed == 0, "a complete index must not be extended"
    builder.close()
    assert _index_bytes(copy.index_dir) == _index_bytes(config.index_dir)


class _Crash(Exception):
    pass


@pytest.mark.parametrize("crash_after_keys", [1, 2, 3, 1000, 2046, 2047, 2048, 5000, 11649])
def test_builder_resumes_after_crash_mid_record(
    golden_stores: list[tuple[StoreConfig, dict]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    crash_after_keys: int,
    index_range_impl: str,
) -> None:
    config, _ = golden_stores[0]
    copy = _writable_copy(config, tmp_path)
    shutil.rmtree(copy.index_dir)
    real_put = IndexFile.put_hash
    calls = {"n": 0}

    def before_write() -> None:  # the compiled indexer: three writes per put
        calls["n"] += 1
        if calls["n"] == 3 * crash_after_keys + 1:
            raise _Crash

    hook_compiled_writes(monkeypatch, before_write)

    def crashing_put(self: IndexFile, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        if calls["n"] >= crash_after_keys:
            raise _Crash
        ok = real_put(self, key_hash, phy_offset, store_timestamp)
        calls["n"] += ok
        return ok

    monkeypatch.setattr(IndexFile, "put_hash", crashing_put)
    with pytest.raises(_Crash):
        IndexBuilder(copy).run_once()
    monkeypatch.setattr(IndexFile, "put_hash", real_put)
    builder = IndexBuilder(copy)  # a new process: state comes from the files only
    builder.run_once()
    builder.close()
    assert _index_bytes(copy.index_dir) == _index_bytes(config.index_dir)


def test_builder_repairs_a_torn_put(
    golden_stores: list[tuple[StoreConfig, dict]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    index_range_impl: str,
) -> None:
    """A crash after the slot was written but before the header: the slot points at an uncounted entry."""
    config, _ = golden_stores[0]
    copy = _writable_copy(config, tmp_path)
    shutil.rmtree(copy.index_dir)
    real_write = IndexFile._write_header
    calls = {"n": 0}

    def before_write() -> None:  # the compiled indexer: entry, slot, header of each put
        calls["n"] += 1
        if calls["n"] == 3 * 700:
            raise _Crash

    hook_compiled_writes(monkeypatch, before_write)

    def crashing_write(self: IndexFile) -> None:
        calls["n"] += 1
        if calls["n"] == 700:
            raise _Crash
        real_write(self)

    monkeypatch.setattr(IndexFile, "_write_header", crashing_write)
    with pytest.raises(_Crash):
        IndexBuilder(copy).run_once()
    monkeypatch.setattr(IndexFile, "_write_header", real_write)
    builder = IndexBuilder(copy)
    builder.run_once()
    builder.close()
    assert _index_bytes(copy.index_dir) == _index_bytes(config.index_dir)


def test_builder_follows_in_small_steps(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    config, _ = golden_stores[0]
    copy = _writable_copy(config, tmp_path)
    shutil.rmtree(copy.index_dir)
    builder = IndexBuilder(copy)
    while builder.run_once(max_records=97):
        pass
    builder.close()
    assert _index_bytes(copy.index_dir) == _index_bytes(config.index_dir)
    assert {"TopicA", "TopicB", "topic_c-1"} <= builder.topics_seen


def test_a_full_index_file_leaves_the_resident_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: ``rebuild-index``'s peak RSS grew by one IndexFile (420 MB at the default geometry)
    for every file it filled. Each full file's pages are handed back when the next one starts."""
    from store.write.writer import StoreWriter

    config = StoreConfig.for_store(tmp_path / "s", max_hash_slot_num=64, max_index_num=100)
    with StoreWriter(config, index=False) as writer:
        for i in range(200):
            writer.append("Roll", b"x", keys=f"k-{i}")
    released: list[str] = []
    real_release = IndexFile.release

    def noting_release(self: IndexFile) -> None:
        if self.is_write_full():
            released.append(self.name)
        real_release(self)

    monkeypatch.setattr(IndexFile, "release", noting_release)
    rebuild_index(config)
    names = sorted(p.name for p in config.index_dir.iterdir() if p.name.isdigit())
    assert len(names) >= 4
    assert sorted(set(released)) == names[:-1]
