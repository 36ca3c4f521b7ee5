"""``key_columns``: a stretch of records' key rows as Arrow buffers, the compiled twin against the
reference, and both (through ``export.range_table``) against the row path ``record_rows``."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from store.commitlog import record
from store.config.store_config import StoreConfig
from store.spark import export
from store.spark.export import _arrow_schema, export_ranges, range_table
from store.spark.job import commitlog_files
from store.spark.key_columns import BUDGET, END, SPECIAL, key_columns, key_columns_reference
from store.spark.key_table import COLUMN_NAMES, record_rows
from store.spark.ranges import plan_file
from store.write.writer import StoreWriter


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    """Records with every shape of keys: several, spaces around and between, none, no UNIQ_KEY, tags
    or not, a rolled-back one, and non-ASCII text (the row path's)."""
    config = StoreConfig.for_store(tmp_path_factory.mktemp("kc") / "s", mapped_file_size_commit_log=1 << 20)
    with StoreWriter(config) as w:
        for i in range(40):
            w.append("T", b"x" * i, keys=f"k{i} j{i}", tags="TagA" if i % 2 else None, queue_id=i % 3)
        w.append("T", b"b", keys="  a   b  ", unique_key=False)
        w.append("T", b"b", keys=None, tags="t")
        w.append("T", b"b", keys=None, unique_key=False)
        w.append("T", b"b", keys="r", sys_flag=0xC)  # rolled back: no rows
        w.append("Tópico", b"b", keys="k")
        w.append("T", b"b", keys="ключ x")
        w.append("T", b"b", keys="k", properties={"E": "", "KEYS2": "no"})
        for i in range(30):
            w.append("U", b"y", keys=[f"m{i}", f"n{i}", f"o{i}"])
    return config


def _expected(config: StoreConfig) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for f in commitlog_files(config):
        with open(f.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0
            while (size := record.check(mm, pos, len(mm), f.start + pos, check_crc=True)) > 0:
                rows += record_rows(mm, pos, f.start + pos, f.path)
                pos += size
    return rows


def _table_rows(config: StoreConfig) -> list[tuple[Any, ...]]:
    schema = _arrow_schema()
    ranges, _ = export_ranges([plan_file(f, 4096) for f in commitlog_files(config)])
    tables = [t for t in (range_table(rng, schema) for rng in ranges) if t is not None]
    table = pa.concat_tables(tables)
    return list(zip(*(table.column(name).to_pylist() for name in COLUMN_NAMES), strict=True))


@pytest.mark.parametrize("twin", ["installed", "reference"])
def test_range_tables_hold_what_the_row_path_yields(
    varied: StoreConfig, monkeypatch: pytest.MonkeyPatch, twin: str
) -> None:
    if twin == "reference":
        monkeypatch.setattr(export, "key_columns", key_columns_reference)
    expected = _expected(varied)
    assert len(expected) > 150
    assert any(row[0] == "Tópico" for row in expected) and any(row[1] == "ключ" for row in expected)
    assert _table_rows(varied) == expected


def test_the_compiled_twin_lays_out_what_the_reference_does(varied: StoreConfig) -> None:
    if key_columns is key_columns_reference:
        pytest.skip("the compiled twin is not built (or RMQ_PURE_PYTHON is set)")
    (f, *_) = commitlog_files(varied)
    with open(f.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        end, _n = record.whole_run(mm, 0, len(mm), f.start, len(mm), 1 << 62)
        stops = set()
        for max_rows in (1, 2, 3, 7, 1 << 20):
            pos = 0
            while pos < end:
                want = key_columns_reference(mm, pos, end, f.start, max_rows)
                assert key_columns(mm, pos, end, f.start, max_rows) == want, (pos, max_rows)
                stops.add(want[0])
                pos = want[1]
                if want[0] == SPECIAL:
                    pos += int.from_bytes(mm[pos : pos + 4], "big")
    assert stops == {END, SPECIAL, BUDGET}


@pytest.mark.parametrize("twin", [key_columns, key_columns_reference])
def test_a_stretch_out_of_the_view_is_refused(twin) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        twin(b"\0" * 100, 0, 101, 0, 10)


def test_rows_of_one_record_from_each_path(tmp_path: Path) -> None:
    """A record with two keys and a UNIQ_KEY: three rows, in the broker's put order."""
    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=1 << 20)
    with StoreWriter(config) as w:
        w.append("T", b"body", keys="a b", tags="tg", unique_key="U1", queue_id=2)
    rows = _table_rows(config)
    assert [(r[0], r[1], r[2], r[3], r[8], r[9]) for r in rows] == [
        ("T", "U1", "UNIQ_KEY", "U1", "tg", 2),
        ("T", "a", "KEYS", "U1", "tg", 2),
        ("T", "b", "KEYS", "U1", "tg", 2),
    ]
    assert rows[0][4] == "7F000001" + f"{rows[0][4][8:16]}" + f"{0:016X}"  # store host, port, offset 0
