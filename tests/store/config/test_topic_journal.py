"""``topics.json``'s journal (issue 30: a topic creation < 20 ms at 50,000 topics).

A creation is durable once one small line is appended and synced; the 9 MB file is written whole
later, once per burst. What a crash may leave must load as the table was: every change whose
``saved`` completed, none twice, in the broker's map order, a torn last line ignored.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from store.config.journal import ConfigJournal
from store.config.topics import TopicConfig, TopicPersister, TopicTable


def _table(path: Path, n: int) -> TopicTable:
    table = TopicTable(path, {}, 0, 0)
    for i in range(n):
        table.put(TopicConfig(f"T{i}", 4, 4, 6), 1)
    table.save()
    return table


def test_a_creation_is_durable_before_the_whole_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("store.config.persister.WHOLE_WRITE_AFTER_S", 60.0)
    path = tmp_path / "topics.json"
    table = _table(path, 300)
    before = path.read_bytes()
    persister = TopicPersister(table)
    try:
        table.put(TopicConfig("Created", 8, 8, 6), 5)
        table.remove("T7", 6)
        table.put(TopicConfig("T3", 2, 2, 4), 7)  # a replacement
        persister.saved(persister.request()).result(timeout=10)
        assert path.read_bytes() == before  # not rewritten yet
        assert persister.writes == 0
        # a kill -9 now: the load replays the journal over the file
        crashed = TopicTable.load(path)
        assert crashed.replayed == 3
        assert crashed.counter == table.counter and crashed.timestamp == table.timestamp
        assert crashed.topics["Created"] == TopicConfig("Created", 8, 8, 6)
        assert crashed.topics["T3"] == TopicConfig("T3", 2, 2, 4)
        assert "T7" not in crashed.topics
        assert list(crashed.ordered_snapshot()[2]) == list(table.ordered_snapshot()[2])
    finally:
        persister.close()
    # a clean stop writes the file whole and empties the journal
    assert table.journal.path.stat().st_size == 0
    reloaded = TopicTable.load(path)
    assert reloaded.replayed == 0 and set(reloaded.topics) == set(table.topics)


def test_a_burst_is_written_whole_once_and_the_journal_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("store.config.persister.WHOLE_WRITE_AFTER_S", 0.3)
    path = tmp_path / "topics.json"
    table = _table(path, 100)
    persister = TopicPersister(table)
    try:
        for i in range(40):
            table.put(TopicConfig(f"Burst{i}", 4, 4, 6), 2)
            persister.saved(persister.request()).result(timeout=10)
        deadline = time.monotonic() + 10
        while persister.writes == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert persister.writes == 1  # 40 creations, one whole write
        assert table.journal.path.stat().st_size == 0
        # the file written from the kept layout equals the same table written from scratch
        whole = TopicTable(tmp_path / "whole.json", dict(table.topics), table.counter, table.timestamp)
        whole.order = table.order
        whole.save()
        assert path.read_bytes() == (tmp_path / "whole.json").read_bytes()
    finally:
        persister.close()


def test_lines_the_file_already_holds_are_not_replayed(tmp_path: Path) -> None:
    """A crash between the whole write and the journal's emptying: the lines are older than the
    file's data version and change nothing (a removal replayed would drop a topic put again)."""
    path = tmp_path / "topics.json"
    table = _table(path, 10)
    table.remove("T1", 2)
    table.write_journal()
    table.put(TopicConfig("T1", 6, 6, 6), 3)
    table.write_journal()
    kept = table.journal.path.read_bytes()
    table.save()  # holds both changes; then the crash "before" the emptying:
    table.journal.path.write_bytes(kept)
    loaded = TopicTable.load(path)
    assert loaded.replayed == 0
    assert loaded.topics["T1"] == TopicConfig("T1", 6, 6, 6)


def test_a_torn_last_line_ends_the_replay(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "topics.json"
    table = _table(path, 5)
    table.put(TopicConfig("Whole", 4, 4, 6), 2)
    table.write_journal()
    with open(table.journal.path, "ab") as f:
        f.write(b'{"v":99,"t":3,"put":"Torn","c":{"readQu')  # the append a crash cut
    loaded = TopicTable.load(path)
    assert "Whole" in loaded.topics and "Torn" not in loaded.topics
    assert loaded.replayed == 1
    assert any("torn" in r.getMessage() for r in caplog.records)


def test_a_failed_append_falls_back_to_the_whole_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "topics.json"
    table = _table(path, 5)

    def refuse(lines: list[bytes]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(table.journal, "append", refuse)
    persister = TopicPersister(table)
    try:
        table.put(TopicConfig("New", 4, 4, 6), 2)
        persister.saved(persister.request()).result(timeout=10)
        assert persister.writes == 1
        assert "New" in TopicTable.load(path).topics
    finally:
        persister.close()


def test_journal_read_skips_nothing_but_blank_lines(tmp_path: Path) -> None:
    journal = ConfigJournal(tmp_path / "x.json")
    journal.append([b'{"v":1,"t":1,"del":"A"}', b'{"v":2,"t":1,"put":"B","c":{}}'])
    journal.path.write_bytes(journal.path.read_bytes() + b"\n")
    assert [c.get("del", c.get("put")) for c in journal.read()] == ["A", "B"]
    assert journal.lines == 2
    journal.clear()
    assert journal.read() == [] and journal.lines == 0


def test_a_whole_write_that_keeps_failing_is_retried_at_its_pace_not_in_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk refuses the whole write while the journal still takes lines: the persister tries
    the file again every ``WHOLE_WRITE_AFTER_S``, it does not spin on it."""
    monkeypatch.setattr("store.config.persister.WHOLE_WRITE_AFTER_S", 0.05)
    path = tmp_path / "topics.json"
    table = _table(path, 5)
    attempts = 0

    def full(*args: object) -> None:
        nonlocal attempts
        attempts += 1
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(table, "save", full)
    persister = TopicPersister(table)
    try:
        table.put(TopicConfig("New", 4, 4, 6), 2)
        persister.saved(persister.request()).result(timeout=10)
        time.sleep(0.5)
        assert 1 <= attempts <= 20, attempts  # about one every 50 ms, not thousands
        assert "New" in TopicTable.load(path).topics  # durable through the journal all along
    finally:
        monkeypatch.undo()
        persister.close()
