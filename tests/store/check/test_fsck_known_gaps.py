"""``fsck`` after ``rebuild-index --index-around-gaps``: the gap is known, the rest is checked.

Copies of the Java store with a middle CommitLog file removed, a middle file cut short mid-record,
or one record corrupted (``gap_damage``), rebuilt around the gap. Before, fsck's walk stopped at the
gap, so every consume-queue entry after it was reported as pointing at no record. Now the gap is
reported once as a known gap (its records are lost), the report is otherwise clean, and a queue
entry that points into the gap or at another record than its own is still a problem. Expected
values: the gap bounds and lost records from ``java-4.9.7-a.expected.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clients.cli import main
from store.check.store_check import check_store
from store.consumequeue.consume_queue import entry_bytes
from tests.support.gap_damage import DAMAGES, ENTRY, STORE, copy_store


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


def _rebuilt_around(stores_dir: Path, root: Path, expected: dict, damage: str):
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    assert main(["rebuild-index", "--store", str(root), "--index-around-gaps"]) == 0
    return config, d


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_gap_built_around_is_a_known_gap_and_the_report_is_otherwise_clean(
    damage: str, stores_dir: Path, tmp_path: Path, expected: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    config, d = _rebuilt_around(stores_dir, tmp_path / "store", expected, damage)
    report = check_store(config, deep=True)
    assert report.problems == []
    assert len(report.known_gaps) == 1
    assert f"whole records stop at offset {d.start} and resume at offset {d.resume}" in report.known_gaps[0]
    # Every record on both sides of the gap was read and checked.
    assert report.records == len(expected["messages"]) - len(d.lost)
    capsys.readouterr()
    assert main(["fsck", "--store", str(config.store_path_root_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("KNOWN GAP: ") == 1 and "PROBLEM" not in out
    assert out.rstrip().endswith("OK (1 known CommitLog gap(s): data lost, built around)")


def _entries_of(config, name: str) -> list[tuple[Path, int, tuple[int, int, int]]]:
    """(file, byte in file, entry) of every written entry of queue ``name`` (``TopicA/1``)."""
    out = []
    for path in sorted((config.consume_queue_dir / name).iterdir()):
        data = path.read_bytes()
        for at in range(0, len(data), ENTRY):
            e = (
                int.from_bytes(data[at : at + 8], "big", signed=True),
                int.from_bytes(data[at + 8 : at + 12], "big", signed=True),
                int.from_bytes(data[at + 12 : at + 20], "big", signed=True),
            )
            if e != (0, 0, 0):
                out.append((path, at, e))
    return out


def _overwrite(path: Path, at: int, entry: tuple[int, int, int]) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(entry_bytes(*entry))


def test_an_entry_at_a_different_record_after_the_gap_is_still_a_problem(
    stores_dir: Path, tmp_path: Path, expected: dict
) -> None:
    config, d = _rebuilt_around(stores_dir, tmp_path / "store", expected, "missing-file")
    entries = _entries_of(config, "TopicA/1")
    after = [x for x in entries if x[2][0] >= d.resume]
    path, at, (_offset, _size, code) = after[5]
    other = next(
        m for m in expected["messages"] if m["commitLogOffset"] >= d.resume and m["topic"] == "TopicB"
    )
    _overwrite(path, at, (other["commitLogOffset"], other["size"], code))
    report = check_store(config)
    assert any(
        p.startswith("consume queue TopicA/1: ") and f"{other['commitLogOffset']}" in p
        for p in report.problems
    ), report.problems
    assert len(report.known_gaps) == 1  # the gap itself is still the one built around


def test_an_entry_pointing_into_the_gap_is_a_problem_and_the_gap_not_known(
    stores_dir: Path, tmp_path: Path, expected: dict
) -> None:
    config, d = _rebuilt_around(stores_dir, tmp_path / "store", expected, "missing-file")
    entries = _entries_of(config, "TopicA/1")
    blank = next(x for x in entries if x[2][1] == 2**31 - 1 and x[1] > 0)  # a lost record's blank
    lost = next(
        m
        for m in expected["messages"]
        if m["commitLogOffset"] in d.lost and (m["topic"], m["queueId"]) == ("TopicA", 1)
    )
    _overwrite(blank[0], blank[1], (lost["commitLogOffset"], lost["size"], 0))
    report = check_store(config)
    assert report.known_gaps == []
    assert any(f"whole records stop at offset {d.start}" in p for p in report.problems)
    assert any(
        p.startswith("consume queue TopicA/1: ") and f"points at CommitLog {lost['commitLogOffset']}" in p
        for p in report.problems
    ), report.problems
