"""The whole tree stays `ruff` clean: linting is part of the test suite, so CI enforces it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT


def test_ruff_check_is_clean() -> None:
    if shutil.which("ruff") is None:
        pytest.fail("ruff is not installed (it is part of the `test` extra)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    """The project's rule is ``ruff check`` *and* ``ruff format`` clean. Markdown is left out: ruff
    0.17 also formats Python blocks inside ``*.md``, which are prose examples, not code of the tree."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "--extend-exclude", "*.md", "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
