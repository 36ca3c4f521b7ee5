"""The golden-data guard of ``tests/conftest.py`` sees each way a test could write into ``tests/golden``."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.golden_guard import changes, snapshot
from tests.support.paths import GOLDEN_DIR, STORES_DIR, VECTORS_DIR


def test_an_untouched_tree_has_no_changes(tmp_path: Path) -> None:
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    (tmp_path / "store" / "commitlog" / "0").write_bytes(b"x" * 10)
    assert changes(snapshot(tmp_path), snapshot(tmp_path)) == []


def test_a_write_an_added_file_and_a_removed_one_are_each_reported(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "checkpoint").write_bytes(b"a" * 8)
    (tmp_path / "store" / "abort").write_bytes(b"")
    before = snapshot(tmp_path)
    checkpoint = tmp_path / "store" / "checkpoint"
    checkpoint.write_bytes(b"b" * 8)  # same size: the modification time tells
    os.utime(checkpoint, ns=(0, before["store/checkpoint"][1] + 1_000_000))
    (tmp_path / "store" / "abort").unlink()
    (tmp_path / "store" / "lock").write_bytes(b"")
    assert changes(before, snapshot(tmp_path)) == [
        "added: store/lock",
        "modified: store/checkpoint",
        "removed: store/abort",
    ]


def test_the_golden_data_is_in_the_repository() -> None:
    """What the suite reads is under tests/golden (no folder beside the checkout is needed)."""
    assert STORES_DIR.parent == VECTORS_DIR.parent == GOLDEN_DIR
    assert (STORES_DIR / "java-4.9.7-a" / "commitlog").is_dir()
    assert (VECTORS_DIR / "manifest.json").is_file()
    assert (GOLDEN_DIR / "README.md").is_file()
