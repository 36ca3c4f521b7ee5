"""export-keys: the Parquet key table holds exactly the Java store's index entries, from either engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from clients.cli import main
from protocol.message import MessageExt
from store.spark.key_table import COLUMN_NAMES, STORE_TIME
from store.spark.synthetic import write_commitlog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STORE = "java-4.9.7-a"


def _expected_rows(stores_dir: Path) -> list[tuple[Any, ...]]:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    rows = []
    for m in sorted(expected["messages"], key=lambda m: m["commitLogOffset"]):
        if m["sysFlag"] & 0xC == 0xC:
            continue  # rolled back: not in the index
        common = (
            m["offsetMsgId"],
            m["commitLogOffset"],
            m["size"],
            m["storeTimestamp"],
            m["tags"],
            m["queueId"],
            m["queueOffset"],
        )
        if m["uniqKey"] is not None:
            rows.append((m["topic"], m["uniqKey"], "UNIQ_KEY", m["uniqKey"], *common))
        for key in (m["keys"] or "").split(" "):
            if key:
                rows.append((m["topic"], key, "KEYS", m["uniqKey"], *common))
    return rows


def _table_rows(path: Path) -> list[tuple[Any, ...]]:
    table = pq.read_table(path)
    assert table.column_names == [*COLUMN_NAMES, STORE_TIME]
    times = table.column(STORE_TIME).to_pylist()
    stamps = table.column("store_timestamp").to_pylist()
    assert all(int(t.timestamp() * 1000) == s for t, s in zip(times, stamps, strict=True))
    return list(zip(*(table.column(name).to_pylist() for name in COLUMN_NAMES), strict=True))


def _args(stores_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "export-keys",
        "--store",
        str(stores_dir / STORE),
        "--conf",
        str(stores_dir / f"{STORE}.broker.conf"),
        "--out",
        str(out),
        *extra,
    ]


def test_local_export_matches_every_indexed_record(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "keys"
    assert main(_args(stores_dir, out)) == 0
    expected = _expected_rows(stores_dir)
    assert len(expected) == 11650  # the keys the Java broker indexed
    assert _table_rows(out) == expected
    assert "exported 11650 keys" in capsys.readouterr().out


def test_spark_export_equals_the_local_export(
    spark: SparkSession, stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "keys"
    assert main(_args(stores_dir, out, "--engine", "spark", "--range-mib", "1")) == 0
    assert _table_rows(out) == _expected_rows(stores_dir)
    captured = capsys.readouterr()
    assert "exported 11650 keys" in captured.out
    assert "export keys" in captured.err and "100.0%" in captured.err
    # The shared session was reused, not stopped.
    assert spark.sparkContext.parallelize([1, 2]).count() == 2


def test_a_failed_export_keeps_the_previous_output(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "keys"
    out.mkdir()
    (out / "previous.parquet").write_bytes(b"kept")
    missing = tmp_path / "no-store"
    (missing / "commitlog").mkdir(parents=True)
    code = main(["export-keys", "--store", str(missing), "--out", str(out)])
    assert code == 1
    assert "no CommitLog files" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["previous.parquet"]


def test_a_corrupt_record_stops_the_export_with_its_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    write_commitlog(root / "commitlog", file_size=64 * 1024, messages=400)
    first = sorted((root / "commitlog").iterdir())[0]
    with open(first, "r+b") as fh:  # flip a body byte of the first record: its BODYCRC no longer matches
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 0xFF]))
    out = tmp_path / "keys"
    code = main(
        ["export-keys", "--store", str(root), "--mapped-file-size", str(64 * 1024), "--out", str(out)]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert f"corrupt CommitLog record at offset 0 in {first}: BODYCRC does not match the body" in err
    assert not out.exists()


def _expected_from_written(written: list[MessageExt]) -> list[tuple[Any, ...]]:
    expected = []
    for m in written:
        if m.sys_flag & 0xC == 0xC:
            continue
        uniq = m.properties.get("UNIQ_KEY")
        common = (
            f"7F00000100002A9F{m.commit_log_offset:016X}",
            m.commit_log_offset,
            m.store_size,
            m.store_timestamp,
            m.properties.get("TAGS"),
            m.queue_id,
            m.queue_offset,
        )
        if uniq is not None:
            expected.append((m.topic, uniq, "UNIQ_KEY", uniq, *common))
        for key in m.properties.get("KEYS", "").split(" "):
            if key:
                expected.append((m.topic, key, "KEYS", uniq, *common))
    return expected


def test_both_engines_export_a_generated_multi_file_log_exactly(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    written: list[MessageExt] = []
    log = write_commitlog(root / "commitlog", file_size=64 * 1024, messages=700, written=written)
    assert log.files >= 4
    expected = _expected_from_written(written)
    assert any(m.sys_flag & 0xC == 0xC for m in written)  # rollbacks are there, and left out
    base = ["export-keys", "--store", str(root), "--mapped-file-size", str(64 * 1024), "--range-mib", "1"]
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    assert _table_rows(tmp_path / "local") == expected
    assert main([*base, "--out", str(tmp_path / "spark"), "--engine", "spark"]) == 0
    assert _table_rows(tmp_path / "spark") == expected
    assert capsys.readouterr().out.count(f"exported {len(expected)} keys") == 2


def test_a_torn_last_record_ends_the_export_with_a_warning(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A broker killed mid-write leaves its last record torn: the rebuild ends the log there, so must
    # the export (not refuse the store), while a bad record with records after it still fails it.
    root = tmp_path / "store"
    written: list[MessageExt] = []
    write_commitlog(root / "commitlog", file_size=64 * 1024, messages=700, written=written)
    torn = written[-1]
    last = sorted((root / "commitlog").iterdir())[-1]
    with open(last, "r+b") as fh:  # flip a body byte: BODYCRC no longer matches
        fh.seek(torn.commit_log_offset - int(last.name) + 90)  # the body's third byte
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    expected = _expected_from_written(written[:-1])
    base = ["export-keys", "--store", str(root), "--mapped-file-size", str(64 * 1024), "--range-mib", "1"]
    for engine in ("local", "spark"):
        out = tmp_path / engine
        assert main([*base, "--out", str(out), "--engine", engine]) == 0
        assert _table_rows(out) == expected
        captured = capsys.readouterr()
        assert f"exported {len(expected)} keys" in captured.out
        assert (
            f"export-keys: warning: CommitLog ends at a torn record at offset {torn.commit_log_offset}"
            " (BODYCRC does not match the body)"
        ) in captured.err
