"""The Spark consume-queue rebuild finds the sequential builder's gaps and builds the same queues.

One copy of the Java store with three gaps (file 4 cut short, record 2000 corrupt, file 12 missing):
both engines refuse with the same ``CommitLogGapError`` and leave ``consumequeue/`` as Java wrote
it; with ``--index-around-gaps`` both write the same bytes, which hold Java's entries at their queue
offsets except the destroyed records' (blank entries). Two Spark jobs only: they are slow. The plan,
decode and gap stages are plain Python, so each damage is also checked against the sequential walk
without Spark.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from clients.cli import main
from store.commitlog.gaps import CommitLogGapError
from store.config.store_config import StoreConfig
from store.consumequeue.builder import rebuild_consume_queues
from store.consumequeue.consume_queue import delay_level_table
from store.spark.consume_queue_rebuild import decode_cq_range, rebuild_consume_queues_spark
from tests.support.gap_damage import (
    DAMAGES,
    STORE,
    Damage,
    check_queues_around,
    copy_store,
    corrupt_middle_record,
    leftovers,
    queue_entries,
    remove_middle_file,
    spark_gaps_in_process,
    tree_bytes,
    truncate_middle_file,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def three_gaps(stores_dir: Path, tmp_path: Path) -> tuple[StoreConfig, list[Damage]]:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    root = config.store_path_root_dir
    messages = expected["messages"]
    damages = [
        truncate_middle_file(root, messages, 4),
        corrupt_middle_record(root, messages, 2000),
        remove_middle_file(root, messages, 12),
    ]
    return config, damages


def test_both_engines_refuse_the_same_gap_and_keep_the_queues(
    spark: SparkSession, three_gaps: tuple[StoreConfig, list[Damage]]
) -> None:
    config, damages = three_gaps
    java = tree_bytes(config.consume_queue_dir)
    checkpoint = config.checkpoint_path.read_bytes()
    with pytest.raises(CommitLogGapError) as sequential:
        rebuild_consume_queues(config)
    with pytest.raises(CommitLogGapError) as parallel:
        rebuild_consume_queues_spark(config, spark=spark, range_bytes=1 << 16, progress_out=io.StringIO())
    first = damages[0]
    assert sequential.value.gap == parallel.value.gap
    assert (parallel.value.gap.start, parallel.value.gap.resume) == (first.start, first.resume)
    assert str(sequential.value) == str(parallel.value)
    assert tree_bytes(config.consume_queue_dir) == java
    assert config.checkpoint_path.read_bytes() == checkpoint
    assert leftovers(config.store_path_root_dir) == []


def test_both_engines_build_the_same_queues_around_the_gaps(
    spark: SparkSession,
    stores_dir: Path,
    three_gaps: tuple[StoreConfig, list[Damage]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, damages = three_gaps
    root = config.store_path_root_dir
    builder = rebuild_consume_queues(config, around_gaps=True)
    assert [(g.start, g.resume) for g in builder.gaps] == [(d.start, d.resume) for d in damages]
    sequential = tree_bytes(config.consume_queue_dir)
    capsys.readouterr()
    args = ["rebuild-index", "--store", str(root), "--engine", "spark", "--only", "consumequeue"]
    assert main([*args, "--range-mib", "1", "--index-around-gaps"]) == 0
    err = capsys.readouterr().err
    for d in damages:
        assert (
            f"consume queues built around it: CommitLog gap: whole records stop at offset {d.start} " in err
        )
    assert tree_bytes(config.consume_queue_dir) == sequential
    java = queue_entries(stores_dir / STORE / "consumequeue")
    assert check_queues_around(java, config.consume_queue_dir, *damages) > 300, "entries after the last gap"
    assert leftovers(root) == []


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_spark_queue_stages_find_the_gap_the_sequential_walk_finds(
    damage: str, stores_dir: Path, tmp_path: Path
) -> None:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    d = DAMAGES[damage](config.store_path_root_dir, expected["messages"])
    with pytest.raises(CommitLogGapError) as sequential:
        rebuild_consume_queues(config)
    delays = delay_level_table(config.message_delay_level)
    gaps, _warnings = spark_gaps_in_process(config, lambda r: decode_cq_range(r, delays))
    assert gaps == [sequential.value.gap]
    assert (gaps[0].start, gaps[0].resume) == (d.start, d.resume)
