"""A writable copy of a store (the golden stores are read-only and shared by every test run)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from store.config import StoreConfig


def writable_copy(config: StoreConfig, root: Path) -> StoreConfig:
    """Copy the store of ``config`` to ``root`` (files made writable) and return its configuration:
    the same file geometry (CommitLog and consume queue file sizes, hash slots, index entries)."""
    shutil.copytree(config.store_path_root_dir, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=config.mapped_file_size_commit_log,
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
        mapped_file_size_consume_queue=config.mapped_file_size_consume_queue,
    )
