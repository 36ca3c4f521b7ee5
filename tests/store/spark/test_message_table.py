"""``spark.read.format("rocketmq")``: the messages of the real broker's golden stores as a table.

Each row is checked against what the real 4.9.7 store wrote (the golden ``expected.json`` files, made
by the Java broker and client) and against the sequential walk (``CommitLog.iter_records``, the walk
``dump-messages`` uses), row for row; the filtered reads against the same rows filtered in Python.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from store.spark.message_plan import open_store, plan_store
from store.spark.message_rows import COLUMN_NAMES, RowFilter, range_rows, record_rows
from tests.support.golden_tables import STORES, copy_golden, sequential_rows


@pytest.fixture(scope="module")
def golden_copies(stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both golden stores and their broker.conf files, copied."""
    return copy_golden(stores_dir, tmp_path_factory.mktemp("golden"))


def _expected(stores_dir: Path, name: str) -> dict:
    return json.loads((stores_dir / f"{name}.expected.json").read_text(encoding="utf-8"))


def table_rows(conf: Path, row_filter: RowFilter | None = None) -> list[tuple]:
    """The rows the Spark reader's tasks give, without Spark (the planner, ``range_rows`` and
    ``record_rows``), in task order."""
    tasks, _warnings = plan_store(open_store(conf), row_filter or RowFilter())
    rows: list[tuple] = []
    for t in tasks:
        if t.offsets is None:
            rows.extend(range_rows(t.rng, t.broker, row_filter=t.row_filter))
        else:
            rows.extend(record_rows(t.rng, t.offsets, t.broker, row_filter=t.row_filter))
    return rows


def _col(name: str) -> int:
    return COLUMN_NAMES.index(name)


def _spark_rows(frame) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Spark's rows as the reader's tuples (bytearray bodies as bytes), in CommitLog order."""
    out = []
    for row in frame.collect():
        values = list(row)
        out.append(tuple(bytes(v) if isinstance(v, bytearray) else v for v in values))
    return sorted(out, key=lambda r: (r[0], r[_col("commitLogOffset")]))


def test_rows_match_what_the_java_store_wrote(golden_copies: dict[str, Path], stores_dir: Path) -> None:
    """java-4.9.7-a: 5000 messages (zlib/lz4/zstd bodies, IPv6 store hosts, prepared and rolled
    back transactions), every field ``expected.json`` records."""
    rows = table_rows(golden_copies["java-4.9.7-a"])
    expected = _expected(stores_dir, "java-4.9.7-a")["messages"]
    assert len(rows) == len(expected) == 5000
    by_offset = {r[_col("commitLogOffset")]: r for r in rows}
    for want in expected:
        row = by_offset[want["commitLogOffset"]]
        assert row[_col("brokerName")] == "broker-a"
        assert row[_col("topic")] == want["topic"]
        assert row[_col("queueId")] == want["queueId"]
        assert row[_col("queueOffset")] == want["queueOffset"]
        assert row[_col("storeSize")] == want["size"]
        assert row[_col("offsetMsgId")] == want["offsetMsgId"]
        assert row[_col("uniqueKey")] == want["uniqKey"]
        assert row[_col("tags")] == want["tags"]
        assert row[_col("keys")] == [k for k in (want["keys"] or "").split(" ") if k]
        assert row[_col("sysFlag")] == want["sysFlag"]
        assert row[_col("storeTimestamp")] == want["storeTimestamp"]
        body_sha = want.get("uncompressedBodySha256", want["bodySha256"])
        assert hashlib.sha256(row[_col("body")]).hexdigest() == body_sha, want["note"]
    states = {r[_col("transactionState")] for r in rows}
    assert states == {"NOT", "PREPARED", "ROLLBACK"}


def test_send_store_rows_match_the_broker_records(golden_copies: dict[str, Path], stores_dir: Path) -> None:
    """java-4.9.7-send: what the real broker stored for real client sends (a batch, a zlib body,
    a delayed message, a one-way send), every field of each record."""
    rows = table_rows(golden_copies["java-4.9.7-send"])
    records = _expected(stores_dir, "java-4.9.7-send")["records"]
    assert len(rows) == len(records)
    for row, want in zip(rows, records, strict=True):
        assert row[_col("commitLogOffset")] == want["commitLogOffset"]
        assert row[_col("topic")] == want["topic"]
        assert row[_col("queueId")] == want["queueId"]
        assert row[_col("queueOffset")] == want["queueOffset"]
        assert row[_col("flag")] == want["flag"]
        assert row[_col("sysFlag")] == want["sysFlag"]
        assert row[_col("bornTimestamp")] == want["bornTimestamp"]
        assert row[_col("storeTimestamp")] == want["storeTimestamp"]
        assert row[_col("bornHost")] == want["bornHost"]
        assert row[_col("storeHost")] == want["storeHost"]
        assert row[_col("reconsumeTimes")] == want["reconsumeTimes"]
        assert row[_col("preparedTransactionOffset")] == want["preparedTransactionOffset"]
        assert row[_col("offsetMsgId")] == want["offsetMsgId"]
        assert row[_col("properties")] == dict(want["properties"])  # a repeated name: the last wins
        if not want["sysFlag"] & 1:
            assert hashlib.sha256(row[_col("body")]).hexdigest() == want["bodySha256"]
    compressed = [r for r in rows if r[_col("sysFlag")] & 1]
    assert compressed, "the send store holds a zlib-compressed body"
    for row in compressed:  # inflated: the 5,000 bytes of text the client sent
        assert len(row[_col("body")]) == 5000
    batch = [r for r in rows if any(k.startswith("batch-") for k in r[_col("keys")])]
    assert [r[_col("keys")] for r in batch] == [["batch-1"], ["batch-2"], ["batch-3"]]


@pytest.mark.parametrize("name", STORES)
def test_planned_ranges_give_the_sequential_walk(golden_copies: dict[str, Path], name: str) -> None:
    assert table_rows(golden_copies[name]) == sequential_rows(golden_copies[name], "broker-a")


def test_topic_filter_reads_only_the_topic_ranges(golden_copies: dict[str, Path]) -> None:
    """The ConsumeQueues narrow the ranges: fewer bytes, the same rows the broker would queue."""
    conf = golden_copies["java-4.9.7-a"]
    everything = sequential_rows(conf, "broker-a")
    flt = RowFilter(frozenset({"TopicB"}), queued_only=True)
    tasks, _ = plan_store(open_store(conf), flt)
    full, _ = plan_store(open_store(conf), RowFilter())
    assert all(t.offsets is not None for t in tasks)  # the queues cover the whole log here
    want = [
        r
        for r in everything
        if r[_col("topic")] == "TopicB" and r[_col("transactionState")] not in ("PREPARED", "ROLLBACK")
    ]
    assert want and table_rows(conf, flt) == want
    # Only the topic's records are read: their bytes, not the whole CommitLog's.
    picked = sum(len(t.offsets or ()) for t in tasks)
    assert picked == len(want)
    read = sum(r[_col("storeSize")] for r in want)
    assert read < 0.5 * sum(t.rng.end - t.rng.start for t in full)


def test_topic_filter_reads_records_the_queues_do_not_hold_yet(
    golden_copies: dict[str, Path], tmp_path: Path
) -> None:
    """A store whose reput has dispatched nothing (no consume queues): the topic read walks the
    whole log and still gives exactly the records the broker would queue for the topic."""
    root = tmp_path / "store"
    shutil.copytree(golden_copies["java-4.9.7-a"].parent / "java-4.9.7-a", root)
    shutil.rmtree(root / "consumequeue")
    conf = tmp_path / "broker.conf"
    conf.write_text(
        golden_copies["java-4.9.7-a"].read_text().replace("java-4.9.7-a", "store"), encoding="utf-8"
    )
    everything = sequential_rows(conf, "broker-a")
    flt = RowFilter(frozenset({"TopicA"}), queued_only=True)
    tasks, _ = plan_store(open_store(conf), flt)
    assert all(t.offsets is None for t in tasks)
    want = [
        r
        for r in everything
        if r[_col("topic")] == "TopicA" and r[_col("transactionState")] not in ("PREPARED", "ROLLBACK")
    ]
    assert len(want) < len([r for r in everything if r[_col("topic")] == "TopicA"])
    assert table_rows(conf, flt) == want


def test_store_time_filter(golden_copies: dict[str, Path]) -> None:
    conf = golden_copies["java-4.9.7-a"]
    everything = sequential_rows(conf, "broker-a")
    stamps = sorted({r[_col("storeTimestamp")] for r in everything})
    lo, hi = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    flt = RowFilter(min_store_ts=lo, max_store_ts=hi)
    want = [r for r in everything if lo <= r[_col("storeTimestamp")] <= hi]
    assert 0 < len(want) < len(everything)
    assert table_rows(conf, flt) == want


def test_a_corrupt_record_fails_the_read_with_its_offset(
    golden_copies: dict[str, Path], tmp_path: Path
) -> None:
    """A record whose body no longer matches its CRC, mid-log: an error naming it, not a missing row."""
    root = tmp_path / "store"
    shutil.copytree(golden_copies["java-4.9.7-a"].parent / "java-4.9.7-a", root)
    conf = tmp_path / "broker.conf"
    conf.write_text(
        golden_copies["java-4.9.7-a"].read_text().replace("java-4.9.7-a", "store"), encoding="utf-8"
    )
    victim = sorted((root / "commitlog").iterdir())[3]
    data = bytearray(victim.read_bytes())
    data[400] ^= 0xFF  # inside the first record's body
    victim.write_bytes(bytes(data))
    from store.spark.errors import CorruptRecordError

    with pytest.raises(CorruptRecordError, match=f"offset {int(victim.name)}"):
        table_rows(conf)


# -- through Spark ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rocketmq(spark):  # type: ignore[no-untyped-def]
    from store.spark.message_source import register

    register(spark)
    return spark


def test_dataframe_equals_the_sequential_walk(rocketmq, golden_copies: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    """Two brokers' stores in one read (a list of paths), every row equal to the sequential walk's."""
    confs = [golden_copies[name] for name in STORES]
    frame = rocketmq.read.format("rocketmq").load([str(c) for c in confs])
    want = sorted(
        (row for c in confs for row in sequential_rows(c, "broker-a")),
        key=lambda r: (r[0], r[_col("commitLogOffset")]),
    )
    got = _spark_rows(frame)
    assert len(got) == len(want) == 5013
    # Both stores' broker.conf name broker-a: sort by offset alone leaves two rows per offset 0.
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert frame.rdd.getNumPartitions() > 1


def test_dataframe_pushdown_and_columns(rocketmq, golden_copies: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    conf = golden_copies["java-4.9.7-a"]
    everything = sequential_rows(conf, "broker-a")
    frame = rocketmq.read.format("rocketmq").option(
        "columns", "transactionState,topic,storeTimestamp,commitLogOffset"
    )
    assert frame.load(str(conf)).columns == [
        "topic",
        "commitLogOffset",
        "storeTimestamp",
        "transactionState",
    ]
    queued = frame.load(str(conf)).filter("topic = 'topic_c-1' and storeTimestamp >= 0")
    want = sorted(
        r[_col("commitLogOffset")]
        for r in everything
        if r[_col("topic")] == "topic_c-1" and r[_col("transactionState")] not in ("PREPARED", "ROLLBACK")
    )
    assert sorted(r.commitLogOffset for r in queued.collect()) == want
    every = frame.option("useConsumeQueues", "false").load(str(conf)).filter("topic = 'topic_c-1'")
    want_all = sorted(r[_col("commitLogOffset")] for r in everything if r[_col("topic")] == "topic_c-1")
    assert sorted(r.commitLogOffset for r in every.collect()) == want_all
    assert len(want_all) > len(want)


def test_v1_and_v2_records_side_by_side(tmp_path: Path) -> None:
    """MAGIC_CODE_V2 records (a 2-byte topic length: topics past 127 bytes) among V1 ones."""
    from protocol.message import MAGIC_CODE_V1, MAGIC_CODE_V2, MessageExt, body_crc, encode_message

    long_topic = "t" * 300
    log = bytearray()
    sent = []
    for i in range(6):
        magic = MAGIC_CODE_V2 if i % 2 else MAGIC_CODE_V1
        topic = long_topic if i % 2 else f"short-{i}"
        body = f"body {i}".encode()
        msg = MessageExt(
            magic=magic,
            body_crc=body_crc(body),
            queue_id=i % 3,
            queue_offset=i,
            commit_log_offset=len(log),
            store_timestamp=1_795_216_834_250 + i,
            body=body,
            topic=topic,
            properties={"KEYS": f"a-{i} b-{i}", "TAGS": "v2" if i % 2 else "v1"},
        )
        log += encode_message(msg)
        sent.append((len(log), topic, body))
    (tmp_path / "broker-v2" / "commitlog").mkdir(parents=True)
    (tmp_path / "broker-v2" / "commitlog" / f"{0:020d}").write_bytes(bytes(log) + bytes(65536 - len(log)))
    rows = table_rows(tmp_path / "broker-v2")
    assert [(r[_col("topic")], r[_col("body")]) for r in rows] == [(t, b) for _, t, b in sent]
    assert [r[_col("keys")] for r in rows] == [[f"a-{i}", f"b-{i}"] for i in range(6)]
    assert {r[_col("brokerName")] for r in rows} == {"broker-v2"}  # no broker.conf: the directory's name
