"""``TopicCounts``: the store's topics and queue counts kept current, each source re-read only when it
changed (issue 30: a scrape that re-read ``topics.json`` and the directories per topic was O(topics²)).

Expected values are written by hand next to the files the tests make, never taken from the code."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from store.consumequeue import topic_counts
from store.consumequeue.topic_counts import TopicCounts, TopicQueueNums


def write_topics(path: Path, table: dict[str, tuple[int, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "dataVersion": {"counter": 1, "timestamp": 1},
        "topicConfigTable": {
            name: {"topicName": name, "readQueueNums": r, "writeQueueNums": w}
            for name, (r, w) in table.items()
        },
    }
    tmp = path.with_name("topics.json.tmp")
    tmp.write_text(json.dumps(body), encoding="utf-8")
    tmp.replace(path)  # a new inode, as the broker's rename gives


def make_queue(root: Path, topic: str, queue_id: int) -> None:
    (root / topic / str(queue_id)).mkdir(parents=True, exist_ok=True)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "config" / "topics.json", tmp_path / "consumequeue"


def test_the_file_wins_over_directories_and_unlisted_topics_count_their_queue_ids(
    layout: tuple[Path, Path],
) -> None:
    topics_json, root = layout
    write_topics(topics_json, {"Listed": (8, 4)})
    for qid in (0, 1, 2):
        make_queue(root, "Listed", qid)
    make_queue(root, "Old", 0)
    make_queue(root, "Old", 5)
    (root / "Empty").mkdir(parents=True)
    counts = TopicCounts(topics_json, root)
    assert counts.counts() == {"Listed": TopicQueueNums(8, 4), "Old": TopicQueueNums(6, 6)}


def test_a_changed_file_and_new_directories_are_seen_at_the_next_look(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_counts, "RECHECK_EVERY", 0.0)
    topics_json, root = layout
    write_topics(topics_json, {"A": (4, 4)})
    make_queue(root, "A", 0)
    counts = TopicCounts(topics_json, root)
    assert set(counts.counts()) == {"A"}
    write_topics(topics_json, {"A": (4, 4), "B": (2, 2)})
    assert counts.counts()["B"] == TopicQueueNums(2, 2)
    make_queue(root, "C", 3)  # a new topic directory: the root's mtime changes
    assert counts.counts()["C"] == TopicQueueNums(4, 4)
    os.utime(root / "C", ns=(1, 1))
    make_queue(root, "C", 7)  # a new queue of an unlisted topic: that topic's directory changes
    assert counts.counts()["C"] == TopicQueueNums(8, 8)
    write_topics(topics_json, {"B": (2, 2)})  # A leaves the file: its directories count again
    assert counts.counts()["A"] == TopicQueueNums(1, 1)


def test_nothing_is_read_again_while_nothing_changed(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    topics_json, root = layout
    write_topics(topics_json, {f"T{i}": (4, 4) for i in range(50)})
    for i in range(50):
        make_queue(root, f"T{i}", 0)
    counts = TopicCounts(topics_json, root)
    first = counts.counts()
    reads: list[Path] = []
    scans: list[str] = []
    real_read, real_ids = topic_counts.read_topics_json, topic_counts._queue_ids
    monkeypatch.setattr(topic_counts, "read_topics_json", lambda p: reads.append(p) or real_read(p))
    monkeypatch.setattr(topic_counts, "_queue_ids", lambda p: scans.append(p) or real_ids(p))
    for _ in range(100):
        assert counts.counts() is first
    assert (reads, scans) == ([], [])


def test_a_live_table_and_the_builders_new_queues_patch_the_answer(layout: tuple[Path, Path]) -> None:
    topics_json, root = layout
    make_queue(root, "Gone", 1)
    counts = TopicCounts(topics_json, root)
    counts.follow_table({"A": (4, 4), "Gone": (4, 4)})
    answer = counts.counts()
    assert answer == {"A": TopicQueueNums(4, 4), "Gone": TopicQueueNums(4, 4)}
    counts.table_changed("B", (1, 2))
    counts.note_queue("NoConfig", 2)
    counts.table_changed("Gone", None)  # deleted: its queue directories still count
    counts.table_changed("A", None)
    assert counts.counts() is answer  # patched, not rebuilt
    assert answer == {
        "B": TopicQueueNums(1, 2),
        "NoConfig": TopicQueueNums(3, 3),
        "Gone": TopicQueueNums(2, 2),
    }
    # a live table's file is ours: never read back
    write_topics(topics_json, {"FromFile": (9, 9)})
    assert "FromFile" not in counts.counts()


def test_unlisted_topics_directories_are_looked_at_once_a_second_not_per_call(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store without ``topics.json`` (every topic unlisted): a call costs three ``stat``s (the
    file, its journal, the consumequeue directory), not one per topic."""
    _, root = layout
    for i in range(50):
        make_queue(root, f"T{i}", 0)
    counts = TopicCounts(root.parent / "config" / "topics.json", root)
    assert len(counts.counts()) == 50
    stats: list[object] = []
    real_stamp = topic_counts._stamp
    monkeypatch.setattr(topic_counts, "_stamp", lambda p: stats.append(p) or real_stamp(p))
    for _ in range(100):
        counts.counts()
    assert len(stats) <= 3 * 100 + 50  # the file, its journal and the root each call, the topics once


def test_has_dir_answers_from_the_last_look_and_looks_again_after_a_moment(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lets a reader skip the stat of each queue directory of a topic that has none."""
    topics_json, root = layout
    write_topics(topics_json, {"Listed": (4, 4)})
    make_queue(root, "WithQueues", 0)
    counts = TopicCounts(topics_json, root)
    counts.counts()
    assert counts.has_dir("WithQueues") and not counts.has_dir("Listed")
    make_queue(root, "Listed", 0)
    clock = [topic_counts.time.monotonic()]
    monkeypatch.setattr(topic_counts.time, "monotonic", lambda: clock[0])
    counts.counts()
    make_queue(root, "Late", 0)
    assert not counts.has_dir("Late")  # the last look is a moment old: answered from it
    clock[0] += 2 * topic_counts.HAS_DIR_LOOK_EVERY
    assert counts.has_dir("Late") and counts.has_dir("Listed")
    counts.follow_table({"Listed": (4, 4)})
    counts.note_queue("Told", 0)  # a writable store's builder: known at once
    assert counts.has_dir("Told")


def test_the_journal_of_a_writable_server_is_replayed_over_the_file(layout: tuple[Path, Path]) -> None:
    """A writable server appends each topic change to ``topics.json.journal`` first and rewrites the
    file later (never, after a kill -9): a reader sees the table the journal completes, and sees a
    change appended while it follows the store at its next look."""
    topics_json, root = layout
    write_topics(topics_json, {"Kept": (4, 4), "Gone": (2, 2), "Old": (8, 8)})
    journal = topics_json.with_name("topics.json.journal")
    lines = [
        {"v": 1, "t": 5, "put": "Stale", "c": {"readQueueNums": 3, "writeQueueNums": 3}},  # v <= file's
        {"v": 2, "t": 6, "put": "Made", "c": {"topicName": "Made", "readQueueNums": 6, "writeQueueNums": 5}},
        {"v": 3, "t": 7, "del": "Gone"},
        {"v": 4, "t": 8, "put": "Old", "c": {"topicName": "Old", "readQueueNums": 1, "writeQueueNums": 1}},
    ]
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    counts = TopicCounts(topics_json, root)
    assert counts.counts() == {
        "Kept": TopicQueueNums(4, 4),
        "Made": TopicQueueNums(6, 5),
        "Old": TopicQueueNums(1, 1),
    }
    with journal.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"v": 5, "t": 9, "put": "Later", "c": {"readQueueNums": 2, "writeQueueNums": 2}}))
        f.write("\n")
    assert counts.counts()["Later"] == TopicQueueNums(2, 2)


def test_a_missing_or_broken_file_falls_back_to_its_bak_as_the_broker_loads_it(
    layout: tuple[Path, Path],
) -> None:
    """``ConfigManager.load``: a missing, empty or unparsable file is read from ``topics.json.bak``
    (the broker's write renames the old file there before it renames the new one in)."""
    topics_json, root = layout
    write_topics(topics_json, {"FromBak": (3, 3)})
    topics_json.replace(topics_json.with_name("topics.json.bak"))
    make_queue(root, "OnlyDirs", 1)
    for broken in (None, "", '{"dataVersion": {"counter": 2}, "topicConfig'):
        if broken is None:
            topics_json.unlink(missing_ok=True)
        else:
            topics_json.write_text(broken, encoding="utf-8")
        counts = TopicCounts(topics_json, root)
        assert counts.counts() == {"FromBak": TopicQueueNums(3, 3), "OnlyDirs": TopicQueueNums(2, 2)}, broken
