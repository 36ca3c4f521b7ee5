"""Shared test fixtures: where the golden data produced by the real Java RocketMQ lives.

The golden data is read in place from ``../shared`` (beside the repository), never copied into the
repository. ``RMQ_SHARED`` overrides the location (``tests/support/paths.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.paths import STORES_DIR, VECTORS_DIR


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"golden data missing: {path} (set RMQ_SHARED to the shared/ directory)")
    return path


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    return _require(VECTORS_DIR)


@pytest.fixture(scope="session")
def stores_dir() -> Path:
    return _require(STORES_DIR)


@pytest.fixture(scope="session")
def manifest(vectors_dir: Path) -> dict:
    return json.loads((vectors_dir / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def vectors_by_name(manifest: dict) -> dict[str, dict]:
    return {v["name"]: v for v in manifest["vectors"]}
