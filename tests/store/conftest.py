"""Fixtures for the store tests: every golden store under ``shared/stores`` with its answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.config import StoreConfig


def golden_store_names(stores_dir: Path) -> list[str]:
    return sorted(p.name[: -len(".expected.json")] for p in stores_dir.glob("*.expected.json"))


@pytest.fixture(scope="session")
def golden_stores(stores_dir: Path) -> list[tuple[StoreConfig, dict]]:
    """(config, expected.json) for every golden store, read in place."""
    out = []
    for name in golden_store_names(stores_dir):
        expected = json.loads((stores_dir / f"{name}.expected.json").read_text(encoding="utf-8"))
        conf = stores_dir / f"{name}.broker.conf"
        if conf.exists():
            config = StoreConfig.load(conf)
        else:
            msc = expected["messageStoreConfig"]
            config = StoreConfig.for_store(
                stores_dir / name,
                mapped_file_size_commit_log=msc["mappedFileSizeCommitLog"],
                max_hash_slot_num=msc["maxHashSlotNum"],
                max_index_num=msc["maxIndexNum"],
            )
        out.append((config, expected))
    assert out, "no golden stores found"
    return out
