"""The consume-queue rebuild follows the index rebuild's gap rule (``store.commitlog.gaps``).

Copies of the Java store with a middle CommitLog file removed, a middle file cut short mid-record,
and a record corrupted in the middle of the log (``gap_damage``). By default ``rebuild-index`` (both
parts, or ``--only consumequeue``) refuses: exit 1, the gap named, ``index/`` and ``consumequeue/``
untouched byte for byte. With ``--index-around-gaps`` every queue entry Java wrote is rebuilt at its
queue offset, except those of the records the damage destroyed, which are blank entries (the
broker's ``(0, Integer.MAX_VALUE, 0)``) when entries follow them. Expected values: Java's own
consumequeue files and the damage's bounds from ``java-4.9.7-a.expected.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clients.cli import main
from tests.support.gap_damage import (
    DAMAGES,
    STORE,
    check_queues_around,
    copy_store,
    index_bytes,
    leftovers,
    queue_entries,
    tree_bytes,
)


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("only", [None, "consumequeue"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_gap_refuses_the_queue_rebuild_and_keeps_both_directories(
    damage: str,
    only: str | None,
    stores_dir: Path,
    tmp_path: Path,
    expected: dict,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    java_index = index_bytes(root)
    java_queues = tree_bytes(config.consume_queue_dir)
    checkpoint = config.checkpoint_path.read_bytes()
    capsys.readouterr()

    args = ["rebuild-index", "--store", str(root)] + (["--only", only] if only else [])
    assert main(args) == 1

    err = capsys.readouterr().err
    assert f"CommitLog gap: whole records stop at offset {d.start} and resume at offset {d.resume}" in err
    for phrase in d.phrases:
        assert phrase in err
    assert "--index-around-gaps" in err
    if only is None:
        assert f"{config.consume_queue_dir} was not rebuilt and is unchanged" in err
    else:
        assert f"nothing was replaced; {config.consume_queue_dir} is unchanged" in err
    assert tree_bytes(config.consume_queue_dir) == java_queues
    assert index_bytes(root) == java_index
    assert config.checkpoint_path.read_bytes() == checkpoint
    assert leftovers(root) == []


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_queues_around_gaps_keep_javas_entries_before_and_after_it(
    damage: str, stores_dir: Path, tmp_path: Path, expected: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    java = queue_entries(stores_dir / STORE / "consumequeue")
    d = DAMAGES[damage](root, expected["messages"])
    capsys.readouterr()

    assert main(["rebuild-index", "--store", str(root), "--only", "consumequeue", "--index-around-gaps"]) == 0

    err = capsys.readouterr().err
    assert f"consume queues built around it: CommitLog gap: whole records stop at offset {d.start}" in err
    assert leftovers(root) == []
    assert check_queues_around(java, config.consume_queue_dir, d) > 1000, "entries after the gap"
