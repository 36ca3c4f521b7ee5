"""``rebuild-index`` never replaces an index with one that stops at a gap in the CommitLog.

Copies of the Java store with a middle CommitLog file removed, a middle file cut short mid-record,
and a record corrupted in the middle of the log. By default the rebuild refuses (exit 1, the Java
index untouched byte for byte, the gap named by its offsets and files); with ``--index-around-gaps``
it indexes around the gap, and every query the Java broker answered returns Java's records minus
exactly those the damage destroyed, the records before and after the gap included. Expected offsets
come from ``java-4.9.7-a.expected.json`` (what the Java broker stored), not from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clients.cli import main
from tests.support.gap_damage import DAMAGES, STORE, check_answers_around, copy_store, index_bytes, leftovers


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_gap_is_refused_and_the_old_index_kept(
    damage: str,
    stores_dir: Path,
    tmp_path: Path,
    expected: dict,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    java_index = index_bytes(root)
    checkpoint = config.checkpoint_path.read_bytes()
    capsys.readouterr()

    assert main(["rebuild-index", "--store", str(root)]) == 1

    err = capsys.readouterr().err
    assert f"CommitLog gap: whole records stop at offset {d.start} and resume at offset {d.resume}" in err
    for phrase in d.phrases:
        assert phrase in err
    assert "--index-around-gaps" in err
    assert f"nothing was replaced; {config.index_dir} is unchanged" in err
    assert not [r for r in caplog.records if "still answer" in r.getMessage()]  # false at a gap
    assert index_bytes(root) == java_index
    assert config.checkpoint_path.read_bytes() == checkpoint
    assert leftovers(root) == []


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_index_around_gaps_answers_the_records_before_and_after_it(
    damage: str, stores_dir: Path, tmp_path: Path, expected: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    capsys.readouterr()

    assert main(["rebuild-index", "--store", str(root), "--index-around-gaps"]) == 0

    err = capsys.readouterr().err
    assert f"warning: indexed around it: CommitLog gap: whole records stop at offset {d.start}" in err
    assert leftovers(root) == []
    _found, after = check_answers_around(config, expected, d.lost)
    assert after > 1000, "the records after the gap answer"
