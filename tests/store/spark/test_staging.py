"""Output is swapped in whole or not at all: a failing job leaves the previous index untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.spark.staging import staged_output


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
