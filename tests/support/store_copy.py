"""A writable copy of a store (the golden stores are read-only and shared by every test run)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder


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


def queues_rebuilt_in_files_of(
    stores_dir: Path, name: str, root: Path, file_size: int
) -> tuple[StoreConfig, dict[str, bytes]]:
    """A writable copy of golden store ``name`` at ``root`` whose consume queues were rebuilt by our
    builder into files of ``file_size`` bytes, and what each file must hold: Java's entries (the
    golden queue file, relative path as key) zero padded to ``file_size``."""
    shutil.copytree(stores_dir / name, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    cq = root / "consumequeue"
    java = {str(p.relative_to(cq)): p.read_bytes() for p in cq.rglob("0" * 20)}
    shutil.rmtree(cq)
    config = StoreConfig.load(
        stores_dir / f"{name}.broker.conf",
        overrides={
            "store_path_root_dir": root,
            "store_path_commit_log": root / "commitlog",
            "mapped_file_size_consume_queue": file_size,
        },
    )
    builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    return config, {path: data + bytes(file_size - len(data)) for path, data in java.items()}
