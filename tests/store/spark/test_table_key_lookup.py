"""The ``key`` option and ``uniqueKey = ...`` of ``format("rocketmq")``: records found through the
IndexFiles (issue 36). PySpark passes no ``array_contains`` filter to a Python reader, so the option
says it; the rows must equal the full read filtered by ``array_contains`` (less the rolled-back
transaction records, which the broker does not index: the documented rule).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.spark.message_plan import open_store, plan_store
from store.spark.message_rows import COLUMN_NAMES, RowFilter, range_rows, record_rows
from store.write.writer import StoreWriter
from tests.support.golden_tables import copy_golden

FILE_SIZE = 64 * 1024
CONF = "mapedFileSizeCommitLog=65536\nmaxHashSlotNum=64\nmaxIndexNum=2048\n"


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=FILE_SIZE, max_hash_slot_num=64, max_index_num=2048
    )


def _store(root: Path) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    """400 indexed records over three topics (every 7th holds key ``k``), then 40 more a writer
    without an index appended (every 4th holds ``k``): ``(offset, size, keys)`` of each part."""
    root.mkdir()
    (root / "broker.conf").write_text(CONF)
    indexed, later = [], []
    with StoreWriter(_config(root)) as writer:
        for i in range(400):
            keys = f"x-{i} k" if i % 7 == 0 else f"x-{i} kk"
            done = writer.append(f"T{i % 3}", b"b" * (50 + i % 90), keys=keys, queue_id=i % 2)
            indexed.append((done.offset, done.size, keys))
    with StoreWriter(_config(root), index=False) as writer:
        for i in range(40):
            keys = f"y-{i} k" if i % 4 == 0 else f"y-{i}"
            done = writer.append(f"T{i % 3}", b"c" * 70, keys=keys)
            later.append((done.offset, done.size, keys))
    return indexed, later


def _read(root: Path, row_filter: RowFilter) -> list[int]:
    tasks, _warnings = plan_store(open_store(root), row_filter, range_bytes=16 * 1024)
    offsets: list[int] = []
    for t in tasks:
        rows = (
            range_rows(t.rng, t.broker, ("commitLogOffset",), t.row_filter)
            if t.offsets is None
            else record_rows(t.rng, t.offsets, t.broker, ("commitLogOffset",), t.row_filter)
        )
        offsets.extend(r[0] for r in rows)
    return sorted(offsets)


def test_key_lookup_reads_only_the_indexed_records_and_the_tail(tmp_path: Path) -> None:
    """Every indexed record without key ``k`` is overwritten with 0xFF: the lookup never reads it,
    and still finds the ``k`` records the index lacks (appended after it) by reading the tail."""
    root = tmp_path / "store"
    indexed, later = _store(root)
    want = sorted(off for off, _size, keys in indexed + later if "k" in keys.split(" "))
    assert len(want) == 58 + 10
    for off, size, keys in indexed:
        if "k" not in keys.split(" "):
            start = off - off % FILE_SIZE
            fd = os.open(root / "commitlog" / f"{start:020d}", os.O_RDWR)
            try:
                os.pwrite(fd, b"\xff" * size, off - start)
            finally:
                os.close(fd)
    assert _read(root, RowFilter(keys=frozenset({"k"}), indexed_only=True)) == want
    # The same damage fails a read that walks the CommitLog: it is real.
    from store.spark.errors import PipelineError

    with pytest.raises(PipelineError):
        _read(root, RowFilter(keys=frozenset({"k"})))


def test_key_lookup_without_an_index_reads_everything(tmp_path: Path) -> None:
    root = tmp_path / "store"
    indexed, later = _store(root)
    for path in (root / "index").iterdir():
        path.unlink()
    want = sorted(off for off, _size, keys in indexed + later if "k" in keys.split(" "))
    assert _read(root, RowFilter(keys=frozenset({"k"}), indexed_only=True)) == want


@pytest.fixture(scope="module")
def rocketmq(spark):  # type: ignore[no-untyped-def]
    from store.spark.message_source import register

    register(spark)
    return spark


def test_key_option_equals_array_contains_on_the_java_store(
    rocketmq, stores_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The real broker's store and index: keys held 500 times (past the broker's 64-offset cap),
    keys whose ``topic#key`` hashes collide (``Aa``/``BB``), a key of rolled-back records (``k-25``).
    Each read is labelled and all are unioned, so the comparison costs two Spark jobs; each branch
    loads the store itself (one loaded DataFrame read twice keeps one pushdown for both: docs)."""
    from functools import reduce

    from pyspark.sql import functions as F

    conf = str(copy_golden(stores_dir, tmp_path)["java-4.9.7-a"])

    def read():  # type: ignore[no-untyped-def]
        return rocketmq.read.format("rocketmq")  # a new reader: .option() changes the reader itself

    def full():  # type: ignore[no-untyped-def]
        return read().load(conf)

    assert full().columns == list(COLUMN_NAMES)
    unrolled = F.col("transactionState") != "ROLLBACK"
    keys = ("common", "Aa", "k-25", "\U0001d11emusic", "slot-106")
    uniques = [
        r.uniqueKey for r in full().filter("transactionState = 'NOT'").select("uniqueKey").limit(2).collect()
    ]
    cases = {  # label: (the reader's answer, the full read filtered by Spark alone)
        "keys": (
            read().option("key", " ".join(keys)).load(conf),
            full().filter(reduce(lambda a, b: a | b, [F.array_contains("keys", k) for k in keys]) & unrolled),
        ),
        "k-25 no index": (
            read().option("key", "k-25").option("useIndex", "false").load(conf),
            full().filter(F.array_contains("keys", "k-25")),
        ),
        # uniqueKey IN (...) is pushed down; on the other side a Not keeps it from the reader.
        "uniqueKey": (
            full().filter(F.col("uniqueKey").isin(uniques)),
            full().filter(~(~F.col("uniqueKey").isin(uniques))),
        ),
    }

    def labelled(side: int):  # type: ignore[no-untyped-def]
        return reduce(
            lambda a, b: a.unionByName(b), [c[side].withColumn("case", F.lit(k)) for k, c in cases.items()]
        )

    got, want = {}, {}
    for side, into in ((0, got), (1, want)):
        for row in labelled(side).collect():
            values = tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)
            into.setdefault(values[-1], []).append(values[:-1])
    for label in cases:
        assert want.get(label), label
        assert len(got.get(label, [])) == len(want[label]), label
        assert sorted(got.get(label, []), key=repr) == sorted(want[label], key=repr), label
    by_key = {k: sum(1 for r in want["keys"] if k in r[COLUMN_NAMES.index("keys")]) for k in keys}
    assert min(by_key.values()) > 0 and by_key["common"] > 64  # past the broker's 64-offset cap
    rolled_back = [
        r for r in want["k-25 no index"] if r[COLUMN_NAMES.index("transactionState")] == "ROLLBACK"
    ]
    assert rolled_back  # in the store, and left out of the index's answer
    assert not [r for r in got["keys"] if r[COLUMN_NAMES.index("transactionState")] == "ROLLBACK"]
    assert len(got["uniqueKey"]) >= 2
