"""Every consume-queue answer the real Java 4.9.7 store gave (``*.cq-expected.json``), reproduced
through ``MessageStore``: min/max, earliest time, offset by time, getMessage probes and walks (raw
record hashes), topic stats, unknown queues and the store-wide earliest time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from store.commitlog import record
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue, CqEntry, tags_code
from store.message_store import GetMessageStatus, MessageStore


def _cq_golden(stores_dir: Path) -> list[tuple[StoreConfig, dict]]:
    out = []
    for path in sorted(stores_dir.glob("*.cq-expected.json")):
        name = path.name[: -len(".cq-expected.json")]
        out.append(
            (StoreConfig.load(stores_dir / f"{name}.broker.conf"), json.loads(path.read_text("utf-8")))
        )
    return out


@pytest.fixture(scope="module")
def cq_golden(stores_dir: Path) -> list[tuple[StoreConfig, dict]]:
    found = _cq_golden(stores_dir)
    assert found, "no cq-expected.json golden data"
    return found


def _queues(expected: dict):
    for topic in expected["topics"]:
        for queue in topic["queues"]:
            yield topic["topic"], queue


def _result_fields(result) -> dict:
    return {
        "status": result.status.name,
        "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
        "messageCount": result.message_count,
        "bufferTotalSize": result.buffer_total_size,
        "suggestPullingFromSlave": result.suggest_pulling_from_slave,
    }


def test_config_reads_the_consume_queue_geometry(cq_golden) -> None:
    for config, expected in cq_golden:
        msc = expected["messageStoreConfig"]
        assert config.consume_queue_file_size == msc["mappedFileSizeConsumeQueue"]
        assert config.max_transfer_count_on_message_in_memory == msc["maxTransferCountOnMessageInMemory"]
        assert config.max_transfer_bytes_on_message_in_memory == msc["maxTransferBytesOnMessageInMemory"]
        assert config.max_transfer_count_on_message_in_disk == msc["maxTransferCountOnMessageInDisk"]
        assert config.max_transfer_bytes_on_message_in_disk == msc["maxTransferBytesOnMessageInDisk"]
        assert config.access_message_in_memory_max_ratio == msc["accessMessageInMemoryMaxRatio"]


def test_min_max_earliest_and_store_times(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, q in _queues(expected):
                qid = q["queueId"]
                label = f"{topic}/{qid}"
                assert store.min_offset(topic, qid) == q["minOffsetInQueue"], label
                assert store.max_offset(topic, qid) == q["maxOffsetInQueue"], label
                assert store.earliest_message_time(topic, qid) == q["earliestMessageTime"], label
                lo, hi = q["minOffsetInQueue"], q["maxOffsetInQueue"]
                assert store.message_store_timestamp(topic, qid, lo) == q["storeTimeOfMinOffset"], label
                assert store.message_store_timestamp(topic, qid, hi - 1) == q["storeTimeOfMaxOffsetMinus1"]
                assert store.message_store_timestamp(topic, qid, hi) == q["storeTimeOfMaxOffset"], label
                times = [store.message_store_timestamp(topic, qid, n) for n in range(lo, hi)]
                assert times == q["storeTimestamps"], label


def test_queue_files_and_entries(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, q in _queues(expected):
                queue = store.queues.get(topic, q["queueId"])
                assert isinstance(queue, ConsumeQueue)
                assert queue.min_logic_offset == q["cqMinLogicOffset"]
                assert queue.file_starts == [f["fileFromOffset"] for f in q["cqMappedFiles"]]
                first = queue.entry(q["minOffsetInQueue"])
                last = queue.entry(q["maxOffsetInQueue"] - 1)
                assert first is not None and last is not None
                assert first.commit_log_offset == q["commitLogOffsetOfMinOffset"]
                assert last.commit_log_offset == q["commitLogOffsetOfMaxOffsetMinus1"]
                assert last.commit_log_offset + last.size == q["cqMaxPhysicOffset"]
                assert queue.entry(q["maxOffsetInQueue"]) is None
                assert queue.entry(-1) is None
                walked = [m for step in q["walk"] for m in step["messages"]]
                entries = queue.entries(q["minOffsetInQueue"], q["maxOffsetInQueue"] + 5)
                assert len(entries) == q["maxOffsetInQueue"] - q["minOffsetInQueue"]
                assert [(e.commit_log_offset, e.size) for e in entries] == [(m[1], m[2]) for m in walked]
                assert entries[0] == first and isinstance(first, CqEntry)
                assert queue.entries(q["maxOffsetInQueue"], 3) == []
                assert CQ_STORE_UNIT_SIZE == 20


def test_offset_by_time_all_answers(cq_golden) -> None:
    checked = 0
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, q in _queues(expected):
                for timestamp, want in q["offsetByTime"]:
                    got = store.offset_by_time(topic, q["queueId"], timestamp)
                    assert got == want, (topic, q["queueId"], timestamp)
                    checked += 1
    assert checked >= 9000


def test_get_message_probes(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, q in _queues(expected):
                for probe in q["getMessage"]:
                    result = store.get_message(topic, q["queueId"], probe["offset"], probe["maxMsgNums"])
                    want = {k: probe[k] for k in _result_fields(result)}
                    assert _result_fields(result) == want, (topic, q["queueId"], probe["label"])
                    got = [hashlib.sha256(b).hexdigest() for b in result.buffers]
                    assert got == [m["rawSha256"] for m in probe["messages"]]
                    offsets = [int.from_bytes(b[28:36], "big") for b in result.buffers]
                    assert offsets == [m["commitLogOffset"] for m in probe["messages"]]


def test_get_message_walks(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, q in _queues(expected):
                offset = q["minOffsetInQueue"]
                for step in q["walk"]:
                    assert step["offset"] == offset
                    result = store.get_message(topic, q["queueId"], offset, step["maxMsgNums"])
                    want = {k: step[k] for k in _result_fields(result)}
                    assert _result_fields(result) == want
                    got = [
                        [
                            int.from_bytes(b[20:28], "big"),
                            int.from_bytes(b[28:36], "big"),
                            len(b),
                            record.store_timestamp(b, 0),
                            hashlib.sha256(b).hexdigest(),
                        ]
                        for b in result.buffers
                    ]
                    assert got == step["messages"]
                    offset = result.next_begin_offset
                assert offset == q["maxOffsetInQueue"]


def test_topic_stats_and_queue_counts(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for topic, rows in expected["topicStats"].items():
                want = [
                    (r["queueId"], r["minOffset"], r["maxOffset"], r["lastUpdateTimestamp"]) for r in rows
                ]
                assert store.topic_stats(topic) == want
            # java-4.9.7-a has no config/topics.json: counts come from the consumequeue directories.
            assert store.queue_nums() == {t: len(rows) for t, rows in expected["topicStats"].items()}
            assert store.topic_stats("NoSuchTopic") == []


def test_unknown_queues_are_empty(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            for u in expected["unknownQueues"]:
                topic, qid = u["topic"], u["queueId"]
                assert store.min_offset(topic, qid) == u["minOffsetInQueue"]
                assert store.max_offset(topic, qid) == u["maxOffsetInQueue"]
                assert store.earliest_message_time(topic, qid) == u["earliestMessageTime"]
                assert store.message_store_timestamp(topic, qid, 0) == u["storeTimeOfOffset0"]
                for timestamp, want in u["offsetByTime"]:
                    assert store.offset_by_time(topic, qid, timestamp) == want
                for probe in u["getMessage"]:
                    result = store.get_message(topic, qid, probe["offset"], probe["maxMsgNums"])
                    want = {k: probe[k] for k in _result_fields(result)}
                    assert _result_fields(result) == want
                    assert result.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
            # Made-up names are not kept (no memory per bogus request), and cannot escape the store.
            assert store.max_offset("../TopicA", 0) == 0
            assert store.max_offset("TopicA", -1) == 0
            assert ("NoSuchTopic", 0) not in store.queues._queues


def test_store_wide_earliest_message_time(cq_golden) -> None:
    for config, expected in cq_golden:
        with MessageStore.open(config) as store:
            assert store.commitlog.min_offset == expected["store"]["minPhyOffset"]
            assert store.commitlog.max_offset == expected["store"]["maxPhyOffset"]
            assert store.store_earliest_message_time() == expected["store"]["earliestMessageTime"]


def test_tags_code_as_the_broker_computes_it(stores_dir: Path) -> None:
    """``java-4.9.7-send``: the tagsCode of every normal record's consume queue entry is the broker's."""
    expected = json.loads((stores_dir / "java-4.9.7-send.expected.json").read_text("utf-8"))
    checked = 0
    for rec in expected["records"]:
        if rec["topic"] == "SCHEDULE_TOPIC_XXXX":
            continue  # its tagsCode is the delivery time, not a hash (the builder's test covers it)
        props = dict(rec["properties"])
        assert tags_code(props.get("TAGS")) == rec["expectedTagsCode"] == rec["consumeQueueEntry"]["tagsCode"]
        checked += 1
    assert checked >= 10
    assert tags_code(None) == tags_code("") == 0
    assert tags_code("Aa") == tags_code("BB") == 2112
    assert tags_code("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 units, as String.hashCode counts
