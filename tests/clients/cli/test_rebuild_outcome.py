"""``rebuild-index``'s exit code says whether the new index is in place, and nothing is left behind.

0: in place; 1: nothing replaced; 3: in place, but a step after the swap failed (the message says
which, and where a leftover is). Each case runs the real command line on a copy of the Java store:
the new index must then be byte-identical to the Java broker's, whatever the exit code says.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.cli import main
from tests.support.gap_damage import copy_store, leftovers, run_cli


def index_bytes(root: Path) -> list[bytes]:
    """The index files' contents in name order (a rebuild names files by its own creation time)."""
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


@pytest.fixture
def store(stores_dir: Path, tmp_path: Path) -> tuple[Path, list[bytes]]:
    root = tmp_path / "store"
    copy_store(stores_dir, root)
    return root, index_bytes(root)


def test_a_read_only_index_directory_is_replaced_cleanly(store: tuple[Path, list[bytes]]) -> None:
    # Until this change: the swap succeeded, deleting the old (read-only) directory failed, exit 1 with
    # "[Errno 13] Permission denied: '20261120232036390'" and .index.old-* left beside the new index.
    root, java = store
    (root / "index").chmod(0o555)
    result = run_cli("rebuild-index", "--store", str(root))
    assert result.returncode == 0, result.stderr
    assert index_bytes(root) == java
    assert leftovers(root) == []


@pytest.fixture
def immutable(store: tuple[Path, list[bytes]]) -> Iterator[Path]:
    """An index file nobody can delete (``chattr +i``), so the replaced index cannot be removed."""
    root, _ = store
    victim = sorted((root / "index").iterdir())[0]
    if subprocess.run(["chattr", "+i", str(victim)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root on ext2/3/4, xfs or btrfs)")
    yield victim
    for path in root.rglob(victim.name):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)


def test_an_old_index_that_cannot_be_removed_is_named_and_the_exit_says_in_place(
    store: tuple[Path, list[bytes]], immutable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, java = store
    capsys.readouterr()
    code = main(["rebuild-index", "--store", str(root)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert index_bytes(root) == java  # the new index is in place
    (left,) = leftovers(root)
    assert left.startswith(".index.old-")
    assert f"the replaced index could not be removed: it is left at {root / left}" in err
    assert f"the new index is in place in {root / 'index'}" in err


def test_a_checkpoint_that_cannot_be_written_leaves_the_new_index_in_place_with_exit_3(
    store: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Until this change: exit 1 with "cannot read checkpoint", though the new index was in place.
    root, java = store
    (root / "checkpoint").unlink()
    (root / "checkpoint").mkdir()
    capsys.readouterr()
    code = main(["rebuild-index", "--store", str(root)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "the checkpoint's indexMsgTimestamp was not set to" in err and "Is a directory" in err
    assert f"the new index is in place in {root / 'index'}" in err
    assert index_bytes(root) == java
    assert leftovers(root) == []


def test_a_store_whose_index_cannot_be_replaced_says_nothing_was_replaced(
    store: tuple[Path, list[bytes]],
) -> None:
    # The store root is read-only: no staging directory, no swap. The old index is kept, exit 1.
    root, java = store
    root.chmod(0o555)
    try:
        result = run_cli("rebuild-index", "--store", str(root))
    finally:
        root.chmod(0o755)
    assert result.returncode == 1
    assert f"nothing was replaced; {root / 'index'} is unchanged" in result.stderr
    assert "Traceback" not in result.stderr
    assert index_bytes(root) == java
    assert leftovers(root) == []
