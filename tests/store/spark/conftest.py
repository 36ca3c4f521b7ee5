"""One SparkSession for every pipeline test: ``local[2]``, tiny shuffles, no UI, started once."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from store.config.store_config import StoreConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHARED_STORE = "java-4.9.7-a"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("pyspark is not installed (install the `spark` extra: pip install -e '.[test,spark]')")
    from store.spark.session import build_session

    session = build_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture
def java_store_copy(stores_dir: Path, tmp_path: Path) -> StoreConfig:
    """A writable copy of the shared Java store, for tests that replace its index."""
    root = tmp_path / SHARED_STORE
    shutil.copytree(stores_dir / SHARED_STORE, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    conf = StoreConfig.load(stores_dir / f"{SHARED_STORE}.broker.conf")
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=conf.mapped_file_size_commit_log,
        max_hash_slot_num=conf.max_hash_slot_num,
        max_index_num=conf.max_index_num,
    )
