"""Shared test fixtures: where the golden data produced by the real Java RocketMQ lives.

The golden data is read in place from ``../shared`` (beside the repository), never copied into the
repository. ``RMQ_SHARED`` overrides the location.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("RMQ_SHARED", REPO_ROOT.parent / "shared")).resolve()
VECTORS_DIR = SHARED_DIR / "vectors"
STORES_DIR = SHARED_DIR / "stores"


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
