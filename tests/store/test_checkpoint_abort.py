"""The checkpoint page and the abort marker behave like the broker's StoreCheckpoint and IndexService.load."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.checkpoint import (
    CHECKPOINT_SIZE,
    Checkpoint,
    abnormal_exit,
    create_abort_marker,
    remove_abort_marker,
)
from store.config.store_config import StoreConfig
from store.errors import CheckpointError
from store.index.builder import IndexBuilder
from tests.support.store_copy import writable_copy


def test_reads_the_java_checkpoint(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    config, expected = golden_stores[0]
    cp = Checkpoint.read(config.checkpoint_path)
    files = expected["storeInfoAfterReload"]["indexFiles"]
    # The broker writes indexMsgTimestamp when a file fills up: the last full file's end.
    assert cp.index_msg_timestamp == [f for f in files if f["isWriteFull"]][-1]["endTimestamp"]
    assert cp.physic_msg_timestamp == max(m["storeTimestamp"] for m in expected["messages"])


def test_write_keeps_the_page_and_unknown_bytes(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(b"\0" * 40 + b"tail-bytes" + b"\0" * (CHECKPOINT_SIZE - 50))
    Checkpoint(1, 2, 3, 4, 5).write(path)
    data = path.read_bytes()
    assert len(data) == CHECKPOINT_SIZE
    assert data[40:50] == b"tail-bytes"
    assert Checkpoint.read(path) == Checkpoint(1, 2, 3, 4, 5)
    path.write_bytes(b"\0" * 10)
    with pytest.raises(CheckpointError):
        Checkpoint.read(path)
    with pytest.raises(CheckpointError):
        Checkpoint.read(tmp_path / "missing")


def test_abort_marker(tmp_path: Path) -> None:
    assert not abnormal_exit(tmp_path)
    create_abort_marker(tmp_path)
    assert abnormal_exit(tmp_path)
    remove_abort_marker(tmp_path)
    remove_abort_marker(tmp_path)
    assert not abnormal_exit(tmp_path)


def test_after_abnormal_exit_index_files_are_kept_not_destroyed(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    config, _ = golden_stores[0]
    root = tmp_path / "s"
    copy = writable_copy(config, root)
    create_abort_marker(root)
    java_names = sorted(p.name for p in config.index_dir.iterdir())
    builder = IndexBuilder(copy)
    # The broker destroys files newer than indexMsgTimestamp (here the last, unfilled one) and
    # loses their keys; the builder keeps them: they are sound, so nothing is undone or redone.
    assert [f.name for f in builder.index.files] == java_names
    assert builder.run_once() == 1, "resumes at the last indexed record"
    assert builder.keys_indexed == 0
    builder.close()
    java = [p.read_bytes() for p in sorted(config.index_dir.iterdir())]
    assert [p.read_bytes() for p in sorted(copy.index_dir.iterdir())] == java, "kept, nothing lost"
