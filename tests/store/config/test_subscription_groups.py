"""``config/subscriptionGroup.json``: the broker's system groups, auto-creation, its file layout."""

from __future__ import annotations

import time
from pathlib import Path

from store.config.subscription_groups import SYSTEM_GROUPS, SubscriptionGroupConfig, SubscriptionGroupTable

#: One group as fastjson pretty-prints a SubscriptionGroupConfig (fields sorted, tab-indented).
ONE_GROUP = """\t\t"G":{
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":true,
\t\t\t"consumeEnable":true,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"groupName":"G",
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":16,
\t\t\t"retryQueueNums":1,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}"""


def test_a_new_table_has_the_brokers_seven_system_groups(tmp_path: Path) -> None:
    table = SubscriptionGroupTable.load(tmp_path / "subscriptionGroup.json")
    assert set(table.groups) == {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
    }
    assert len(SYSTEM_GROUPS) == 7


def test_a_group_is_created_on_first_sight_only_when_auto_creation_is_on(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    table = SubscriptionGroupTable.load(path)
    assert table.find("G", auto_create=False) is None
    assert not path.exists()
    # System groups (CID_RMQ_SYS_ prefix) are created whatever the setting.
    assert table.find("CID_RMQ_SYS_TRANS", auto_create=False) is not None
    config = table.find("G", auto_create=True)
    assert config == SubscriptionGroupConfig("G")
    assert table.counter == 2
    text = path.read_text(encoding="utf-8")
    assert ONE_GROUP in text
    assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":2,\n\t\t"timestamp":')
    again = SubscriptionGroupTable.load(path)
    assert again.get("G") == config and again.counter == 0  # 4.9.7's decode keeps no version


def test_settings_survive_a_round_trip_and_bad_fields_keep_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(
        '{"subscriptionGroupTable":{"G":{"groupName":"G","retryMaxTimes":2,"consumeEnable":false,'
        '"retryQueueNums":"x","consumeBroadcastEnable":1}},"dataVersion":{"counter":5,"timestamp":9}}',
        encoding="utf-8",
    )
    table = SubscriptionGroupTable.load(path)
    config = table.get("G")
    assert config is not None
    assert (config.retry_max_times, config.consume_enable) == (2, False)
    assert (config.retry_queue_nums, config.consume_broadcast_enable) == (1, True)
    # 4.9.7's decode keeps the table, not the file's version (golden: the consume-side recording's
    # foreign files and many_topics' afterRestart answer counter 0): a new one, made at load
    assert table.counter == 0 and abs(table.timestamp - time.time() * 1000) < 60_000
    assert table.delete("G") and not table.delete("G")
    assert SubscriptionGroupTable.load(path).get("G") is None


def test_a_5x_orderly_group_keeps_its_flag_and_a_4x_group_is_written_without_it(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(
        '{"subscriptionGroupTable":{"F":{"groupName":"F","consumeMessageOrderly":true},'
        '"N":{"groupName":"N","consumeMessageOrderly":"yes"}},"dataVersion":{"counter":1,"timestamp":1}}',
        encoding="utf-8",
    )
    table = SubscriptionGroupTable.load(path)
    fifo, normal = table.get("F"), table.get("N")
    assert fifo is not None and normal is not None
    assert (fifo.consume_message_orderly, normal.consume_message_orderly) == (True, False)
    # fields in fastjson's sorted order, the 5.x one among them only where it is set
    assert list(fifo.to_json()) == sorted(fifo.to_json()) and fifo.to_json()["consumeMessageOrderly"] is True
    assert "consumeMessageOrderly" not in normal.to_json()
    assert '"consumeMessageOrderly":true' in table.text()


def test_a_text_after_changes_equals_the_table_written_whole(tmp_path: Path) -> None:
    """The kept layout (issue 30) gives the text of the same table made from scratch (in the order
    its map model has: a map's order depends on its history, ``test_concurrent_map``), through
    creations, replacements, deletions and a delete then put (to the end of its bucket)."""
    import random

    from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable

    rng = random.Random(11)
    table = SubscriptionGroupTable.load(tmp_path / "subscriptionGroup.json")
    names = [f"Group-{i}" for i in range(2500)]
    for step in range(60):
        for _ in range(rng.randrange(1, 160)):
            name = rng.choice(names)
            roll = rng.random()
            if roll < 0.6:
                table.find(name, auto_create=True)
            elif roll < 0.85:
                table.put(SubscriptionGroupConfig(name, retry_max_times=rng.randrange(1, 20)))
            elif roll < 0.93:
                table.delete(name)
            else:
                table.delete(name)
                table.put(SubscriptionGroupConfig(name))
        whole = SubscriptionGroupTable(
            tmp_path / "whole.json", dict(table.groups), table.counter, table.timestamp
        )
        whole.order = table.order
        assert table.text() == whole.text(), step
    assert len(table.groups) >= 2048 * 3 // 4  # the buckets doubled on the way
