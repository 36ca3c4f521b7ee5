"""The installed package is ``protocol``, ``store``, ``server`` and ``clients``: no benchmark, no test.

``pyproject.toml``'s ``packages.find`` decides what a wheel holds. This builds the package's
modules the way the wheel build does (setuptools' ``build_py``, reading the same ``pyproject.toml``
and ``MANIFEST.in``) from a copy of the tree, and checks the result file by file: nothing of
``benchmarks/`` or ``tests/`` (or anything else at the top) goes in, and every file of the four
packages does (a directory that lost its ``__init__.py`` would silently drop out of the wheel).

``build_py`` rather than a whole wheel: a wheel build needs the ``wheel`` package (not a test
dependency) and compiles every C accelerator, which takes longer than the rest of this file; the
pure-Python part of a wheel is exactly what ``build_py`` writes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

INSTALLED = ("protocol", "store", "server", "clients")

#: Left out of the copy: what git ignores, and build output that is not source.
_NOT_SOURCE = (".git", "build", "dist", "*.so", "__pycache__", "node_modules", ".pytest_cache",
               ".ruff_cache", ".hypothesis", "*.egg-info", ".venv")  # fmt: skip


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_package_holds_the_four_packages_and_nothing_else(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    lib = tmp_path / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    built = _files(lib)
    assert {name.partition("/")[0] for name in built} == set(INSTALLED)
    assert not [name for name in built if "benchmarks" in name.split("/") or "tests" in name.split("/")]
    expected = {f"{package}/{name}" for package in INSTALLED for name in _files(source / package)}
    assert built == expected, (sorted(expected - built)[:10], sorted(built - expected)[:10])
