"""The benchmark scripts find the checkout they belong to, and the golden data beside it.

They are not installed and run as ``python -m benchmarks.<name>`` from the checkout; several start a
server child from ``REPO`` or read the golden data in ``tests/golden``. When they moved out of
``clients/benchmarks`` their ``parents[2]`` pointed above the repository and the child failed to
start: every such constant is checked here against the repository root and its golden folder.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import benchmarks
from tests.support.paths import GOLDEN_DIR, REPO_ROOT

SCRIPTS = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))
ROOT_NAMES = ("REPO", "REPO_ROOT")


def test_there_are_scripts() -> None:
    assert "request_costs" in SCRIPTS and "vs_java" in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_imports_and_its_paths_are_the_checkouts(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    for attr in ROOT_NAMES:
        if hasattr(module, attr):
            assert Path(getattr(module, attr)) == REPO_ROOT, f"{name}.{attr}"
    for attr in ("GOLDEN", "DEFAULT_GOLDEN"):
        if isinstance(getattr(module, attr, None), Path):
            assert Path(getattr(module, attr)).resolve() == GOLDEN_DIR, f"{name}.{attr}"
    for attr in ("DEFAULT_STORE", "GOLDEN_STORES", "DEFAULT_CONF"):
        if hasattr(module, attr):
            assert GOLDEN_DIR in Path(getattr(module, attr)).resolve().parents, f"{name}.{attr}"
