"""Spark rebuilds index files byte-identical to the Java broker's and to the sequential builder's."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from clients.cli import main
from store.checkpoint import Checkpoint
from store.commitlog.gaps import CommitLogGapError
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.index.builder import IndexBuilder, rebuild_index
from store.spark import ranges as ranges_module
from store.spark.rebuild import rebuild_index_spark
from store.spark.synthetic import write_commitlog

SHARED_STORE = "java-4.9.7-a"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _contents(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir())]


def test_rebuild_index_engine_spark_equals_the_java_broker_index(
    spark: SparkSession, stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index"
    args = ["rebuild-index", "--store", str(stores_dir / SHARED_STORE)]
    args += ["--conf", str(stores_dir / f"{SHARED_STORE}.broker.conf")]
    assert main([*args, "--engine", "spark", "--out", str(out), "--range-mib", "1"]) == 0
    java = _contents(stores_dir / SHARED_STORE / "index")
    assert len(java) == 6
    assert _contents(out) == java
    captured = capsys.readouterr()
    # five full files of maxIndexNum - 1 keys, and the last one's indexCount - 1
    assert f"indexed {5 * 2047 + 1415} keys of 5000 records" in captured.out
    assert "into 6 index files" in captured.out
    lines = captured.err.splitlines()
    assert any(line.startswith("decode records") and "100.0%" in line and "done in" in line for line in lines)
    # The sampled plan and the write (as the ranges decode) run in the driver: no Spark tasks.
    for stage in ("plan ranges", "write index files"):
        assert any(line.startswith(stage) and line.endswith("by the driver") for line in lines)


def test_out_needs_the_spark_engine(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["rebuild-index", "--store", str(stores_dir / SHARED_STORE), "--out", str(tmp_path / "x")]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert "argument --out: needs --engine spark" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _generated(tmp_path: Path, *, file_size: int = 256 * 1024, messages: int = 3000) -> StoreConfig:
    root = tmp_path / "store"
    write_commitlog(root / "commitlog", file_size=file_size, messages=messages)
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=file_size, max_hash_slot_num=61, max_index_num=400
    )


def test_rebuild_equals_the_sequential_builder_on_a_multi_file_log(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = _generated(tmp_path)
    sequential = tmp_path / "sequential"
    builder = IndexBuilder(config, index_dir=sequential, checkpoint_path=tmp_path / "seq-checkpoint")
    builder.run_once()
    builder.close()
    assert len(list((config.store_path_commit_log).iterdir())) >= 5

    result = rebuild_index_spark(config, spark=spark, range_bytes=100_000, progress_out=io.StringIO())
    expected = _contents(sequential)
    assert len(expected) >= 10
    assert _contents(config.index_dir) == expected
    assert result.keys_indexed == builder.keys_indexed
    # Rebuilding the store's own index records the roll-over point exactly as the builder does.
    assert (
        Checkpoint.read(config.checkpoint_path).index_msg_timestamp
        == Checkpoint.read(tmp_path / "seq-checkpoint").index_msg_timestamp
    )


def test_rebuild_in_place_matches_the_java_checkpoint(
    spark: SparkSession, java_store_copy: StoreConfig
) -> None:
    java_checkpoint = Checkpoint.read(java_store_copy.checkpoint_path).index_msg_timestamp
    before = _contents(java_store_copy.index_dir)
    rebuild_index_spark(java_store_copy, spark=spark, range_bytes=1 << 20, progress_out=io.StringIO())
    assert _contents(java_store_copy.index_dir) == before
    assert Checkpoint.read(java_store_copy.checkpoint_path).index_msg_timestamp == java_checkpoint
    assert [p.name for p in java_store_copy.store_path_root_dir.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("field_at", "value", "reason"),
    [
        (4, b"\x00\x00\x00\x01", "MAGICCODE 0x00000001"),
        (84, b"\x00\x00\x7f\xff", "field lengths do not add up"),
        (90, b"\xff", "BODYCRC does not match"),
    ],
    ids=["bad-magic", "bad-body-length", "bad-body-crc"],
)
def test_a_corrupt_record_is_reported_and_the_old_index_kept(
    spark: SparkSession,
    tmp_path: Path,
    field_at: int,
    value: bytes,
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _generated(tmp_path, messages=1200)
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous").write_bytes(b"a good index")
    second = sorted(config.store_path_commit_log.iterdir())[1]
    start = int(second.name)
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    offsets = [offset for offset, _ in log.iter_records(start) if offset < start + 100_000]
    log.close()
    victim = offsets[len(offsets) // 2]
    with open(second, "r+b") as fh:
        fh.seek(victim - start + field_at)
        fh.write(value)

    args = ["rebuild-index", "--store", str(config.store_path_root_dir), "--engine", "spark"]
    args += ["--mapped-file-size", str(config.mapped_file_size_commit_log), "--out", str(out)]
    args += ["--max-hash-slot-num", "61", "--max-index-num", "400", "--range-mib", "1"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"CommitLog gap: whole records stop at offset {victim} and resume" in err
    assert f"at offset {victim} (file {second.name}, byte {victim - start}) are not a whole record" in err
    assert reason in err
    assert "--index-around-gaps" in err
    assert f"nothing was replaced; {out} is unchanged" in err
    assert [p.name for p in out.iterdir()] == ["previous"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "store"]


def _flip_body_byte(path: Path, file_start: int, offset: int) -> None:
    """Invert one body byte of the record at ``offset``: its BODYCRC no longer matches."""
    with open(path, "r+b") as fh:
        fh.seek(offset - file_start + 90)
        byte = fh.read(1)
        fh.seek(offset - file_start + 90)
        fh.write(bytes([byte[0] ^ 0xFF]))


def _last_file_offsets(config: StoreConfig) -> tuple[Path, int, list[int]]:
    last = sorted(config.store_path_commit_log.iterdir())[-1]
    start = int(last.name)
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    offsets = [offset for offset, _ in log.iter_records(start)]
    log.close()
    return last, start, offsets


def test_a_corrupt_record_inside_the_last_range_is_not_taken_for_a_torn_tail(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Whole records follow it: ending the log there would drop their keys without a word.
    config = _generated(tmp_path, messages=1200)
    last, start, offsets = _last_file_offsets(config)
    victim = offsets[len(offsets) // 2]
    _flip_body_byte(last, start, victim)
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous").write_bytes(b"a good index")
    with pytest.raises(CommitLogGapError) as info:
        rebuild_index_spark(config, spark=spark, out_dir=out, range_bytes=1 << 20, progress_out=io.StringIO())
    assert info.value.gap.start == victim and f"(file {last.name}, byte {victim - start})" in str(info.value)
    assert "BODYCRC does not match" in str(info.value)
    assert [p.name for p in out.iterdir()] == ["previous"]


def test_a_torn_last_record_ends_the_log_like_the_sequential_builder(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = _generated(tmp_path, messages=1200)
    last, start, offsets = _last_file_offsets(config)
    _flip_body_byte(last, start, offsets[-1])
    sequential = tmp_path / "sequential"
    builder = IndexBuilder(config, index_dir=sequential, checkpoint_path=tmp_path / "seq-checkpoint")
    builder.run_once()
    builder.close()
    out = tmp_path / "out"
    result = rebuild_index_spark(
        config, spark=spark, out_dir=out, range_bytes=1 << 20, progress_out=io.StringIO()
    )
    assert result.warnings == [
        f"CommitLog ends at a torn record at offset {offsets[-1]} (BODYCRC does not match the body)"
    ]
    assert result.keys_indexed == builder.keys_indexed
    assert _contents(out) == _contents(sequential)


def test_spark_rebuilds_consume_queues_byte_identical_to_java(
    spark: SparkSession, stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both engines write the Java broker's consume queue bytes (and its logicsMsgTimestamp)."""
    import json
    import shutil

    root = tmp_path / SHARED_STORE
    shutil.copytree(stores_dir / SHARED_STORE, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(root / "consumequeue")
    conf = stores_dir / f"{SHARED_STORE}.broker.conf"
    args = ["rebuild-index", "--store", str(root), "--conf", str(conf), "--only", "consumequeue"]
    assert main([*args, "--engine", "spark", "--range-mib", "1"]) == 0
    assert "built 4980 consume queue entries of 5000 records into 12 queues" in capsys.readouterr().out
    expected = json.loads((stores_dir / f"{SHARED_STORE}.cq-expected.json").read_text("utf-8"))
    got = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }
    assert got == {f["path"]: f["sha256"] for f in expected["consumequeueFiles"]}
    assert Checkpoint.read(root / "checkpoint") == Checkpoint.read(stores_dir / SHARED_STORE / "checkpoint")


def test_a_damaged_file_cut_by_sampling_is_planned_again_by_the_hop(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Small ranges, so every file is cut by sampling; a record whose BODYCRC fails in a middle file
    makes the decode refuse the sampled plan: the job plans by the hop, decodes again and writes,
    around the gap, exactly the sequential builder's index."""
    config = _generated(tmp_path, messages=1500)
    middle = sorted(config.store_path_commit_log.iterdir())[2]
    start = int(middle.name)
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    offsets = [
        offset for offset, _ in log.iter_records(start) if offset < start + config.mapped_file_size_commit_log
    ]
    log.close()
    _flip_body_byte(middle, start, offsets[len(offsets) // 2])
    out = tmp_path / "spark"
    result = rebuild_index_spark(
        config, spark=spark, out_dir=out, range_bytes=40_000, progress_out=io.StringIO(), around_gaps=True
    )
    sequential = rebuild_index(config, around_gaps=True)
    assert _contents(out) == _contents(config.index_dir)
    assert result.keys_indexed == sequential.keys_indexed
    assert result.gaps == sequential.gaps and len(result.gaps) == 1


@pytest.mark.parametrize("damaged", [False, True])
def test_the_end_found_from_a_tail_sample_is_the_sequential_builders(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: bool
) -> None:
    """Each file's end hopped to from a record sampled near its end (a small ``TAIL_SAMPLE_BYTES``,
    as 16 MiB is to 1 GiB files), with the rebuild's default ranges: the index is the builder's;
    with a bad record in the last range of a middle file, the decode refuses that plan and the job
    plans again by the hop, and indexes around the gap as the builder does."""
    monkeypatch.setattr(ranges_module, "TAIL_SAMPLE_BYTES", 20_000)
    config = _generated(tmp_path, messages=1500)
    files = sorted(config.store_path_commit_log.iterdir())
    plans = [ranges_module.plan_file_sampled(f, 1 << 20) for f in ranges_module.list_files(files[0].parent)]
    assert any(p.sampled and len(p.cuts) == 1 for p in plans)  # sampled by the tail alone
    hopped = [ranges_module.plan_file(f, 1 << 20) for f in ranges_module.list_files(files[0].parent)]
    assert [(p.end, p.stop) for p in plans] == [(p.end, p.stop) for p in hopped]
    if damaged:
        middle = files[2]
        start = int(middle.name)
        log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
        offsets = [o for o, _ in log.iter_records(start) if o < start + config.mapped_file_size_commit_log]
        log.close()
        _flip_body_byte(middle, start, offsets[-3])
    out = tmp_path / "spark"
    result = rebuild_index_spark(
        config, spark=spark, out_dir=out, progress_out=io.StringIO(), around_gaps=damaged
    )
    sequential = rebuild_index(config, around_gaps=damaged)
    assert _contents(out) == _contents(config.index_dir)
    assert result.keys_indexed == sequential.keys_indexed
    assert len(result.gaps) == (1 if damaged else 0)
