"""What a remote executor receives is enough to run every pipeline task on its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from store.spark.session import package_archive


def test_the_shipped_archive_alone_imports_every_task_module(tmp_path: Path) -> None:
    archive = package_archive(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import store.spark.decode, store.spark.index_writer, store.spark.key_table, store.spark.ranges;"
        "assert store.spark.decode.__file__.startswith(sys.argv[1]), store.spark.decode.__file__"
    )
    # -I: isolated, so neither the checkout nor PYTHONPATH can supply the packages.
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, str(archive)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
