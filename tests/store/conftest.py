"""Fixtures for the store tests: every golden store under ``tests/golden/stores`` with its answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.index import index_range


def golden_store_names(stores_dir: Path) -> list[str]:
    """The stores whose ``expected.json`` holds the Java store's query and view answers.

    ``java-4.9.7-send`` (what the broker's write path stored) has a different ``expected.json``: its
    checks belong to the write path, not to these query fixtures."""
    names = []
    for path in sorted(stores_dir.glob("*.expected.json")):
        head = json.loads(path.read_text(encoding="utf-8"))
        if "queries" in head and "views" in head:
            names.append(path.name[: -len(".expected.json")])
    return names


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


def _compiled_index_range() -> object:
    try:
        from store.index import _index_range_fast
    except ImportError:
        pytest.skip("store.index._index_range_fast is not built (python setup.py build_ext --inplace)")
    return _index_range_fast.index_range


@pytest.fixture(params=["python", "compiled"])
def index_range_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once with the builder on the pure-Python ``index_range`` and once on the C twin."""
    if request.param == "python":
        impl = index_range.index_range_reference
    else:
        impl = _compiled_index_range()
    monkeypatch.setattr("store.index.builder.index_range", impl)
    return request.param
