"""The config files the real 4.9.7 broker wrote (``golden/``, recorded by
``golden/record_config_files.py``) are read, and written again byte for byte, by ``store/config``;
and each file falls back to its ``.bak`` as the broker's ``ConfigManager.load`` does."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from store.config.config_file import concurrent_map_order
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.subscription_groups import SubscriptionGroupTable
from store.config.topics import TopicConfig, TopicTable
from store.errors import StoreError

GOLDEN = Path(__file__).parent / "golden"


def test_the_brokers_offsets_are_read_and_written_back_in_its_order() -> None:
    path = GOLDEN / "consumerOffset.json"
    table = ConsumerOffsetTable.load(path)
    assert table.queues("GroupA", "HandoverTopic") == {0: 1, 1: 2, 2: 3, 3: 0, 4: 1, 5: 2, 6: 3, 7: 3}
    assert table.queues("GroupB", "HandoverTopic") == {0: 2, 5: 1}
    table.offsets = dict(reversed(table.offsets.items()))  # the order is the map's buckets, not ours
    assert table.text() == path.read_text(encoding="utf-8")


def test_the_brokers_groups_are_read_and_written_back_in_its_order() -> None:
    path = GOLDEN / "subscriptionGroup.json"
    table = SubscriptionGroupTable.load(path)
    created = table.get("GroupB")
    assert created is not None
    assert (created.retry_max_times, created.consume_broadcast_enable) == (5, False)
    assert {"GroupA", "GroupC", "TOOLS_CONSUMER"} <= set(table.groups)
    # the file's counter is 3 (GroupB created, then GroupA and GroupC auto-created by heartbeats);
    # 4.9.7's decode keeps the table, not the version: counter 0 until the next change
    assert '"counter":3,' in path.read_text(encoding="utf-8") and table.counter == 0
    table.groups = dict(reversed(table.groups.items()))
    table.counter, table.timestamp = 3, 1795647836185
    assert '"timestamp":1795647836185' in path.read_text(encoding="utf-8")
    assert table.text() == path.read_text(encoding="utf-8")


def test_the_brokers_topics_are_read_and_written_back_in_its_order(tmp_path: Path) -> None:
    path = GOLDEN / "topics.json"
    table = TopicTable.load(path)
    assert table.get("HandoverTopic") == TopicConfig("HandoverTopic", 8, 8, 6)
    assert table.get("ReadOnlyTopic") == TopicConfig("ReadOnlyTopic", 2, 2, 4)
    assert table.get("%RETRY%GroupC") == TopicConfig("%RETRY%GroupC", 1, 1, 6)
    table.topics = dict(reversed(table.topics.items()))
    table.path = tmp_path / "topics.json"
    table.save()
    assert table.path.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_topics_json_is_saved_with_a_bak_of_the_previous_table(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    table = TopicTable(path, {}, 0, 0)
    table.put(TopicConfig("A", 4, 4, 6), 1)
    table.save()
    assert not path.with_name("topics.json.bak").exists()  # nothing to back up yet
    table.put(TopicConfig("B", 4, 4, 6), 2)
    table.save()
    assert set(TopicTable.load(path.with_name("topics.json.bak")).topics) == {"A"}
    assert set(TopicTable.load(path).topics) == {"A", "B"}


@pytest.mark.parametrize(
    ("name", "load", "present"),
    [
        ("consumerOffset.json", lambda p: ConsumerOffsetTable.load(p).offsets, "HandoverTopic@GroupA"),
        ("subscriptionGroup.json", lambda p: SubscriptionGroupTable.load(p).groups, "GroupB"),
        ("topics.json", lambda p: TopicTable.load(p).topics, "HandoverTopic"),
    ],
)
@pytest.mark.parametrize("damage", ["missing", "empty", "not JSON", "no table"])
def test_a_damaged_file_falls_back_to_its_bak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, load, present: str, damage: str
) -> None:
    """Missing, empty, undecodable, or without its table: the broker then loads ``.bak``
    (before: a corrupt file stopped the open, and ``topics.json`` had no ``.bak`` at all)."""
    path = tmp_path / name
    shutil.copyfile(GOLDEN / name, tmp_path / (name + ".bak"))
    if damage != "missing":
        path.write_text({"empty": "", "not JSON": '{"offsetTable": {', "no table": "{}"}[damage])
    with caplog.at_level(logging.WARNING):
        assert present in load(path)
    if damage in ("not JSON", "no table"):
        assert "loaded" in caplog.text and ".bak instead" in caplog.text


@pytest.mark.parametrize(
    "load", [ConsumerOffsetTable.load, SubscriptionGroupTable.load, TopicTable.load], ids=["o", "g", "t"]
)
def test_when_neither_copy_reads_the_open_fails_rather_than_start_empty(tmp_path: Path, load) -> None:
    path = tmp_path / "x.json"
    path.write_text("{not json")
    path.with_name("x.json.bak").write_text("{not json either")
    with pytest.raises(StoreError, match=r"x\.json: .*x\.json\.bak: "):
        load(path)


def test_the_map_order_follows_the_table_as_it_grows() -> None:
    """A ConcurrentHashMap(2) has 4 buckets and doubles when 3 entries are in: "a" (97) and "e"
    (101) share bucket 1 of 4 but not of 8, where "e" comes after "b" (98, bucket 2)."""
    assert concurrent_map_order(["e", "a"], 4) == ["e", "a"]  # bucket 1, insertion order
    assert concurrent_map_order(["e", "a", "b"], 4) == ["a", "b", "e"]  # 8 buckets: 1, 2, 5
