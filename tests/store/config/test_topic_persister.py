"""``TopicPersister``: ``config/topics.json`` written on its own thread, batched, failures survived.

What the send path relies on: ``saved(n)`` completes only once a write holding change ``n`` is on
disk; changes made while a write is under way go out together; a failed write is said once, does
not hang the SENDs waiting on it, and is made good at ``close``.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from store.config.topics import TopicConfig, TopicPersister, TopicTable


def test_changes_made_during_an_append_go_out_together_and_saved_waits_for_them(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    table = TopicTable(path, {}, 0, 0)
    gate = threading.Event()
    appends: list[int] = []
    real_append = table.journal.append

    def slow_append(lines: list[bytes]) -> None:
        gate.wait(10)  # the first append is held until the test has made more changes
        appends.append(len(lines))
        real_append(lines)

    table.journal.append = slow_append  # type: ignore[method-assign]
    persister = TopicPersister(table)
    try:
        table.put(TopicConfig("A", 4, 4, 6), 1)
        first = persister.saved(persister.request())
        for name in "BCDE":
            table.put(TopicConfig(name, 4, 4, 6), 2)
            last = persister.request()
        later = persister.saved(last)
        assert not first.done() and not later.done()
        gate.set()
        later.result(timeout=10)
        # durable: a load without a close (a kill -9 now) finds them all, from the journal
        assert set(TopicTable.load(path).topics) == set("ABCDE")
        assert len(appends) <= 2  # 5 changes, at most 2 appends: the four made meanwhile batched
    finally:
        gate.set()
        persister.close()
    assert table.persister is None


def test_a_failed_write_is_said_once_releases_its_waiters_and_is_made_good_at_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "config"
    blocker.write_text("not a directory", encoding="utf-8")  # the table's directory cannot be made
    table = TopicTable(blocker / "topics.json", {}, 0, 0)
    persister = TopicPersister(table)
    with caplog.at_level(logging.ERROR):
        for name in "AB":
            table.put(TopicConfig(name, 4, 4, 6), 1)
            persister.saved(persister.request()).result(timeout=10)  # completes despite the failure
    assert sum("cannot write" in r.getMessage() for r in caplog.records) == 1
    blocker.unlink()
    persister.close()
    assert set(TopicTable.load(blocker / "topics.json").topics) == {"A", "B"}


def test_a_bug_in_a_save_is_logged_and_the_thread_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a disk error but a bug: its waiters are released and later changes are still written
    (a dead thread would leave every later topic-creating SEND waiting forever)."""
    table = TopicTable(tmp_path / "topics.json", {}, 0, 0)
    persister = TopicPersister(table)
    real_save, real_journal = table.save, table.write_journal
    bug = lambda: (_ for _ in ()).throw(RuntimeError("a bug"))  # noqa: E731
    monkeypatch.setattr(table, "save", bug)
    monkeypatch.setattr(table, "write_journal", bug)
    with caplog.at_level(logging.ERROR):
        table.put(TopicConfig("A", 4, 4, 6), 1)
        persister.saved(persister.request()).result(timeout=10)
    assert any(r.exc_info for r in caplog.records)
    monkeypatch.setattr(table, "save", real_save)
    monkeypatch.setattr(table, "write_journal", real_journal)
    table.put(TopicConfig("B", 4, 4, 6), 1)
    persister.saved(persister.request()).result(timeout=10)
    persister.close()
    assert set(TopicTable.load(tmp_path / "topics.json").topics) == {"A", "B"}


def test_changes_made_while_held_go_out_in_one_write_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat creating many groups and retry topics holds the persister: nothing is written
    meanwhile, then one write holds every change, and their ``saved`` complete only then."""
    monkeypatch.setattr("store.config.persister.WHOLE_WRITE_AFTER_S", 60.0)  # the journal kept
    path = tmp_path / "topics.json"
    table = TopicTable(path, {}, 0, 0)
    persister = TopicPersister(table)
    try:
        with persister.held():
            for i in range(50):
                table.put(TopicConfig(f"T{i}", 4, 4, 6), 1)
                last = persister.request()
            waiting = persister.saved(last)
            time.sleep(0.2)  # time for a write, were one allowed to start
            assert not waiting.done() and not path.exists() and not table.journal.path.exists()
        waiting.result(timeout=10)
        assert table.journal.lines == 50  # one append held them all
        assert len(TopicTable.load(path).topics) == 50
    finally:
        persister.close()


def test_a_write_after_changes_equals_a_table_written_whole(tmp_path: Path) -> None:
    """The kept layout (issue 30: a creation no longer orders and formats every topic again) gives
    the bytes of the same table written from scratch, through puts, replacements, removals, a
    removal and put again (to the end of its bucket, as the broker's map does) and the table's
    bucket count doubling (from scratch in the order of the table's map model: the map's order
    depends on its history, ``test_concurrent_map``)."""
    import random

    rng = random.Random(7)
    table = TopicTable(tmp_path / "kept.json", {}, 0, 0)
    names = [f"Topic-{i}" for i in range(2500)]
    for step in range(60):
        for _ in range(rng.randrange(1, 160)):
            name = rng.choice(names)
            roll = rng.random()
            if roll < 0.85:
                table.put(TopicConfig(name, rng.randrange(1, 9), rng.randrange(1, 9), 6), step)
            elif roll < 0.93:
                table.remove(name, step)
            else:
                table.remove(name, step)
                table.put(TopicConfig(name, 4, 4, 6), step)
        table.save()
        whole = TopicTable(tmp_path / "whole.json", dict(table.topics), table.counter, table.timestamp)
        whole.order = table.order
        whole.save()
        kept_text = (tmp_path / "kept.json").read_text(encoding="utf-8")
        assert kept_text == (tmp_path / "whole.json").read_text(encoding="utf-8"), step
    assert len(table.topics) >= 2048 * 3 // 4  # the table's buckets doubled on the way (2048 -> 4096)
