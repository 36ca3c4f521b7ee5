"""The Spark rebuild follows the sequential builder's rule for CommitLog gaps, byte for byte.

One copy of the Java store carries three gaps at once: a middle file cut short mid-record (file 4), a
record whose BODYCRC fails (message 2000, file 6) and a missing file (file 12). Both engines refuse it
with the same message (the first gap) and leave the Java index untouched; with
``--index-around-gaps`` both write the same index files and report the same three gaps, and that
index answers Java's queries minus exactly the destroyed records. Two Spark jobs in all (Spark is slow
here); the refusal and the per-damage messages are pinned without Spark in
tests/store/reput/test_rebuild_gaps.py.
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
from store.index.builder import rebuild_index
from store.spark.decode import decode_range
from store.spark.rebuild import rebuild_index_spark
from tests.support.gap_damage import (
    DAMAGES,
    STORE,
    Damage,
    check_answers_around,
    copy_store,
    corrupt_middle_record,
    index_bytes,
    leftovers,
    remove_middle_file,
    run_cli,
    run_cli_python,
    spark_gaps_in_process,
    truncate_middle_file,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def three_gaps(stores_dir: Path, tmp_path: Path) -> tuple[StoreConfig, list[Damage], dict]:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    root = config.store_path_root_dir
    messages = expected["messages"]
    damages = [
        truncate_middle_file(root, messages, 4),
        corrupt_middle_record(root, messages, 2000),
        remove_middle_file(root, messages, 12),
    ]
    return config, damages, expected


def test_both_engines_refuse_the_same_gap_and_keep_the_index(
    spark: SparkSession, three_gaps: tuple[StoreConfig, list[Damage], dict]
) -> None:
    config, damages, _ = three_gaps
    root = config.store_path_root_dir
    java_index = index_bytes(root)
    with pytest.raises(CommitLogGapError) as sequential:
        rebuild_index(config)
    with pytest.raises(CommitLogGapError) as parallel:
        rebuild_index_spark(config, spark=spark, range_bytes=1 << 16, progress_out=io.StringIO())
    first = damages[0]
    assert sequential.value.gap == parallel.value.gap
    assert (parallel.value.gap.start, parallel.value.gap.resume) == (first.start, first.resume)
    assert str(sequential.value) == str(parallel.value)
    for phrase in first.phrases:
        assert phrase in str(parallel.value)
    assert index_bytes(root) == java_index
    assert leftovers(root) == []


def test_both_engines_index_around_the_same_gaps(
    spark: SparkSession,
    three_gaps: tuple[StoreConfig, list[Damage], dict],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, damages, expected = three_gaps
    root = config.store_path_root_dir
    builder = rebuild_index(config, around_gaps=True)
    sequential = index_bytes(root)
    out = tmp_path / "spark-index"
    capsys.readouterr()
    args = ["rebuild-index", "--store", str(root), "--engine", "spark", "--out", str(out)]
    assert main([*args, "--range-mib", "1", "--index-around-gaps"]) == 0
    err = capsys.readouterr().err
    for d in damages:
        assert f"warning: indexed around it: CommitLog gap: whole records stop at offset {d.start} " in err
    assert [p.read_bytes() for p in sorted(out.iterdir())] == list(sequential.values())
    assert [(g.start, g.resume) for g in builder.gaps] == [(d.start, d.resume) for d in damages]
    lost = set().union(*(d.lost for d in damages))
    _found, after = check_answers_around(config, expected, lost)
    assert after > 500, "the records after the last gap answer"
    assert leftovers(root) == [] and leftovers(tmp_path) == []


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_spark_stages_find_the_gap_the_sequential_walk_finds(
    damage: str, stores_dir: Path, tmp_path: Path
) -> None:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    d = DAMAGES[damage](config.store_path_root_dir, expected["messages"])
    with pytest.raises(CommitLogGapError) as sequential:
        rebuild_index(config)
    gaps, _warnings = spark_gaps_in_process(config, decode_range)
    assert gaps == [sequential.value.gap]
    assert (gaps[0].start, gaps[0].resume) == (d.start, d.resume)


def test_a_file_created_ahead_and_zeros_after_the_last_record_are_no_gap(
    stores_dir: Path, tmp_path: Path
) -> None:
    # A running broker's layout: the current file is zeros after its last record, the next file
    # exists already, all zeros. That is the end of the log, not a gap, for both engines.
    config = copy_store(stores_dir, tmp_path / "store")
    java = index_bytes(config.store_path_root_dir)
    last = sorted(config.store_path_commit_log.iterdir())[-1]
    ahead = config.store_path_commit_log / f"{int(last.name) + config.mapped_file_size_commit_log:020d}"
    ahead.write_bytes(bytes(config.mapped_file_size_commit_log))
    assert spark_gaps_in_process(config, decode_range) == ([], [])
    builder = rebuild_index(config)
    assert builder.gaps == [] and builder.after_swap == []
    assert list(index_bytes(config.store_path_root_dir).values()) == list(java.values())


_STAGES = """
import sys
from store.config.store_config import StoreConfig
from store.spark.decode import decode_range
from store.spark.ranges import list_files, plan_file
from store.spark.rebuild import decode_plan, find_gaps
config = StoreConfig.load(sys.argv[1] + "/broker.conf", overrides={"store_path_root_dir": sys.argv[1]})
plans = [plan_file(f, 1 << 16) for f in list_files(config.store_path_commit_log)]
ranges = decode_plan(plans)
gaps, _ = find_gaps([decode_range(r) for r in ranges], ranges, plans, config.mapped_file_size_commit_log)
print("\\n".join(g.describe() for g in gaps))
"""


def test_an_unreadable_file_is_the_same_gap_for_both_engines(stores_dir: Path, tmp_path: Path) -> None:
    # Run without CAP_DAC_OVERRIDE (as any operator who is not root) so chmod 000 really bites.
    config = copy_store(stores_dir, tmp_path / "store")
    root = config.store_path_root_dir
    victim = config.store_path_commit_log / f"{8 * config.mapped_file_size_commit_log:020d}"
    victim.chmod(0)
    sequential = run_cli("rebuild-index", "--store", str(root))
    assert sequential.returncode == 1, sequential.stderr
    assert f"file {victim.name} cannot be read: Permission denied" in sequential.stderr
    stages = run_cli_python("-c", _STAGES, str(root))
    assert stages.returncode == 0, stages.stderr
    (line,) = stages.stdout.splitlines()
    assert f"rebuild-index: {line}. An index or consume queue built" in sequential.stderr
