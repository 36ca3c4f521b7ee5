"""Output is swapped in whole or not at all: a failing job leaves the previous index untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.staging import staged_output


def test_success_replaces_the_old_directory(tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "old").write_bytes(b"old")
    with staged_output(target) as staging:
        (staging / "new").write_bytes(b"new")
        assert (target / "old").exists()
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["index"]


def test_failure_keeps_the_old_directory_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "old").write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), staged_output(target) as staging:
        (staging / "half").write_bytes(b"half")
        raise RuntimeError("boom")
    assert (target / "old").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["index"]


def test_missing_target_is_created(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "out"
    with staged_output(target) as staging:
        (staging / "f").write_bytes(b"x")
    assert (target / "f").read_bytes() == b"x"


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_jobs_leftovers_are_cleaned_up_and_an_aside_index_restored(tmp_path: Path) -> None:
    # Killed between its two renames: index/ is gone, the old index sits aside; and a staging
    # directory of another killed job still holds half-written files.
    dead = _dead_pid()
    target = tmp_path / "index"
    aside = tmp_path / f".index.old-{dead}-1"
    aside.mkdir()
    (aside / "old").write_bytes(b"old")
    (tmp_path / f".index.tmp-{dead}-2").mkdir()
    (tmp_path / f".index.tmp-{dead}-2" / "half").write_bytes(b"half")
    live = tmp_path / f".index.tmp-{os.getpid()}-3"  # a job still running: not ours to touch
    live.mkdir()
    (tmp_path / f".other.tmp-{dead}-4").mkdir()  # another destination's leftovers: not this job's
    with pytest.raises(RuntimeError, match="boom"), staged_output(target):
        assert (target / "old").read_bytes() == b"old"
        raise RuntimeError("boom")
    assert (target / "old").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["index", live.name, f".other.tmp-{dead}-4"])


def test_an_aside_copy_is_dropped_when_the_new_index_made_it(tmp_path: Path) -> None:
    dead = _dead_pid()
    target = tmp_path / "index"
    target.mkdir()
    (target / "new").write_bytes(b"new")
    (tmp_path / f".index.old-{dead}-1").mkdir()  # killed while deleting the replaced index
    with staged_output(target) as staging:
        (staging / "newer").write_bytes(b"newer")
    assert [p.name for p in tmp_path.iterdir()] == ["index"]
    assert [p.name for p in target.iterdir()] == ["newer"]
