"""``config/consumerOffset.json`` read and written as the 4.9.7 broker does."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from store.config.consumer_offsets import SNAPSHOT_SLICE, ConsumerOffsetTable
from store.errors import StoreError
from tests.support.paths import STORES_DIR

#: As fastjson pretty-prints the broker's ConcurrentHashMap<String, ConcurrentHashMap<Integer, Long>>:
#: integer keys bare, no line break between them, one before the closing brace.
BROKER_TEXT = (
    '{\n\t"offsetTable":{\n\t\t"%RETRY%g@g":{0:0\n\t\t},\n\t\t"T@g":{0:12,1:13,2:13,3:12\n\t\t}\n\t}\n}'
)


def test_the_empty_table_the_real_broker_wrote_is_read() -> None:
    path = STORES_DIR / "java-4.9.7-send" / "config" / "consumerOffset.json"
    table = ConsumerOffsetTable.load(path)
    assert table.offsets == {}
    assert path.read_text(encoding="utf-8") == table.text()


def test_the_broker_layout_is_read_and_written_back_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(BROKER_TEXT, encoding="utf-8")
    table = ConsumerOffsetTable.load(path)
    assert table.offsets == {"%RETRY%g@g": {0: 0}, "T@g": {0: 12, 1: 13, 2: 13, 3: 12}}
    assert table.query("g", "T", 1) == 13
    assert table.query("g", "T", 9) == -1 and table.query("other", "T", 0) == -1
    assert table.text() == BROKER_TEXT


def test_commits_are_saved_only_when_something_changed_and_keep_a_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    table = ConsumerOffsetTable.load(path)
    table.save()
    assert not path.exists()  # nothing committed, nothing written
    table.commit("g", "T", 3, 7)
    table.commit("g", "T", 0, 5)
    assert table.dirty
    table.save()
    assert not table.dirty
    assert path.read_text(encoding="utf-8") == '{\n\t"offsetTable":{\n\t\t"T@g":{0:5,3:7\n\t\t}\n\t}\n}'
    table.commit("g", "T", 0, 6)
    table.save()
    assert (tmp_path / "config" / "consumerOffset.json.bak").read_text(encoding="utf-8").count("0:5") == 1
    assert ConsumerOffsetTable.load(path).query("g", "T", 0) == 6


def test_a_missing_or_empty_file_falls_back_to_its_bak(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    (tmp_path / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{"2":9}}}', encoding="utf-8")
    assert ConsumerOffsetTable.load(path).query("g", "T", 2) == 9
    path.write_text("", encoding="utf-8")
    assert ConsumerOffsetTable.load(path).query("g", "T", 2) == 9


def test_a_file_that_is_not_json_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text("{oops", encoding="utf-8")
    with pytest.raises(StoreError, match=r"consumerOffset\.json"):
        ConsumerOffsetTable.load(path)


def test_groups_and_topics_are_found_and_removed(tmp_path: Path) -> None:
    table = ConsumerOffsetTable(tmp_path / "c.json")
    table.commit("g", "T", 0, 1)
    table.commit("h", "T", 0, 1)
    table.commit("g", "U", 0, 1)
    assert table.groups_of_topic("T") == {"g", "h"}
    assert table.topics_of_group("g") == {"T", "U"}
    table.remove_group("g")
    assert table.groups_of_topic("T") == {"h"} and table.topics_of_group("g") == set()
    table.remove_topic("T")
    assert table.offsets == {}


def test_groups_and_topics_are_indexed_as_keys_come_and_go(tmp_path: Path) -> None:
    """Which topics a group committed in and which groups a topic has are read from indexes kept
    with the table (issue 30), through loading, commits and both removals."""
    path = tmp_path / "consumerOffset.json"
    path.write_text(BROKER_TEXT, encoding="utf-8")
    table = ConsumerOffsetTable.load(path)
    assert table.topics_of_group("g") == {"%RETRY%g", "T"}
    assert table.groups_of_topic("T") == {"g"}
    table.commit("h", "T", 0, 5)
    table.commit("h", "U", 1, 7)
    table.commit("a@b", "T", 0, 1)  # split at the first "@", as every reader splits the key
    assert table.groups_of_topic("T") == {"g", "h", "a@b"}
    assert table.topics_of_group("a@b") == {"T"}
    assert table.sorted_groups() == ["a@b", "g", "h"]
    table.remove_topic("T")
    assert set(table.offsets) == {"%RETRY%g@g", "U@h"}
    assert table.groups_of_topic("T") == set()
    assert table.sorted_groups() == ["g", "h"]
    table.remove_group("h")
    assert set(table.offsets) == {"%RETRY%g@g"}
    assert table.topics_of_group("h") == set() and table.groups_of_topic("U") == set()
    assert table.sorted_groups() == ["g"]


def test_a_group_sorted_list_is_kept_while_no_group_appears(tmp_path: Path) -> None:
    table = ConsumerOffsetTable(tmp_path / "consumerOffset.json")
    for i in range(100):
        table.commit(f"g{i:03d}", "T", 0, i)
    first = table.sorted_groups()
    table.commit("g001", "T", 0, 99)  # a commit of a known group: the same list
    assert table.sorted_groups() is first
    table.commit("g100", "T", 0, 1)
    assert table.sorted_groups()[-1] == "g100"


class _CountedLock:
    """The table's lock, counting its holds (``holds``: how many times it was taken so far)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holds = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self.holds += 1

    def __exit__(self, *_: object) -> None:
        self._lock.release()


class _SeenUnder(dict):  # type: ignore[type-arg]
    """A queue map noting, when a snapshot copies it, which hold of the lock that was in."""

    lock: _CountedLock
    seen: list[int]

    def items(self):  # type: ignore[no-untyped-def]
        self.seen.append(self.lock.holds)
        return super().items()


def test_a_save_snapshot_holds_the_lock_one_slice_at_a_time(tmp_path: Path) -> None:
    """The event loop's commits take the table's lock: a save's snapshot (on its own thread) holds it
    for ``SNAPSHOT_SLICE`` entries at a time, not for the whole table (50,000 groups: 130 ms)."""
    table = ConsumerOffsetTable(tmp_path / "consumerOffset.json")
    for i in range(2_000):
        table.commit(f"g{i}", f"T{i}", 0, i)
    lock = table._lock = _CountedLock()  # type: ignore[assignment]
    seen: list[int] = []
    for key, queues in list(table.offsets.items()):
        copy = table.offsets[key] = _SeenUnder(queues)
        copy.lock, copy.seen = lock, seen
    snapshot = table.snapshot()
    assert snapshot == {f"T{i}@g{i}": [(0, i)] for i in range(2_000)}
    assert len(seen) == 2_000
    per_hold = Counter(seen)
    assert max(per_hold.values()) <= SNAPSHOT_SLICE
    assert len(per_hold) >= 2_000 // SNAPSHOT_SLICE


def test_commits_and_new_groups_while_a_save_runs_are_kept_by_the_next(tmp_path: Path) -> None:
    """A thread saves over and over while this one commits to new and old groups (the interpreter
    switching threads every 10 us, so the two interleave inside a snapshot): no save fails (a copy
    of the table iterated while a commit adds a group would), and the last save after the commits
    holds every one of them."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    path = tmp_path / "consumerOffset.json"
    table = ConsumerOffsetTable(path)
    for i in range(3_000):
        table.commit(f"g{i}", "T", i % 4, i)
    errors: list[BaseException] = []
    done = threading.Event()

    def save_over_and_over() -> None:
        try:
            while not done.is_set():
                table.save()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    saver = threading.Thread(target=save_over_and_over)
    saver.start()
    try:
        for i in range(3_000):
            table.commit(f"new{i}", "T", 0, i)
            table.commit(f"g{i}", "T", i % 4, 10_000 + i)
    finally:
        done.set()
        saver.join(30)
        sys.setswitchinterval(interval)
    assert not errors and not saver.is_alive()
    table.save()
    saved = ConsumerOffsetTable.load(path)
    assert saved.offsets == table.offsets
    assert saved.query("new2999", "T", 0) == 2999 and saved.query("g7", "T", 3) == 10_007
