"""``rmq-query export``: the golden stores' messages as Parquet and JSON lines, by both engines, equal
to the sequential walk's rows (``test_message_table.sequential_rows``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clients.cli import main
from store.spark.message_rows import COLUMN_NAMES
from tests.support.golden_tables import STORES, copy_golden, sequential_rows


@pytest.fixture(scope="module")
def golden_copies(stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both golden stores and their broker.conf files, copied."""
    return copy_golden(stores_dir, tmp_path_factory.mktemp("golden"))


def _parquet_rows(out: Path) -> list[tuple]:
    rows = []
    for part in sorted(out.glob("*.parquet")):
        for rec in pq.read_table(part).to_pylist():
            rec["properties"] = dict(rec["properties"])  # pyarrow gives a map as (key, value) pairs
            rows.append(tuple(rec[name] for name in COLUMN_NAMES))
    return rows


def _json_rows(out: Path) -> list[tuple]:
    rows = []
    for part in sorted([*out.glob("*.jsonl"), *out.glob("*.json")]):
        for line in part.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            rec["body"] = base64.b64decode(rec["body"])
            rows.append(tuple(rec.get(name) for name in COLUMN_NAMES))
    return rows


def _by_offset(rows: list[tuple]) -> list[tuple]:
    at = COLUMN_NAMES.index("commitLogOffset")
    return sorted(rows, key=lambda r: (r[0], r[at], repr(r)))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_sequential_export_of_two_stores(golden_copies: dict[str, Path], tmp_path: Path, fmt: str) -> None:
    confs = [golden_copies[name] for name in STORES]
    out = tmp_path / "out"
    argv = ["export", "--store", str(confs[0]), "--store", str(confs[1]), "--out", str(out), "--format", fmt]
    assert main(argv) == 0
    got = _parquet_rows(out) if fmt == "parquet" else _json_rows(out)
    want = [row for conf in confs for row in sequential_rows(conf, "broker-a")]
    assert len(got) == 5013
    assert got == want  # the sequential engine keeps CommitLog order, store by store


def test_sequential_export_of_one_topic_and_window(golden_copies: dict[str, Path], tmp_path: Path) -> None:
    conf = golden_copies["java-4.9.7-a"]
    everything = sequential_rows(conf, "broker-a")
    col = COLUMN_NAMES.index
    stamps = sorted({r[col("storeTimestamp")] for r in everything})
    begin, end = stamps[100], stamps[-100]
    out = tmp_path / "out"
    argv = ["export", "--store", str(conf), "--out", str(out), "--format", "jsonl", "--topic", "TopicA"]
    assert main([*argv, "--begin", str(begin), "--end", str(end)]) == 0
    want = [
        r
        for r in everything
        if r[col("topic")] == "TopicA"
        and begin <= r[col("storeTimestamp")] <= end
        and r[col("transactionState")] not in ("PREPARED", "ROLLBACK")
    ]
    assert want and _json_rows(out) == want


def test_sequential_export_by_key(golden_copies: dict[str, Path], tmp_path: Path) -> None:
    """``--key`` (repeatable) through the real broker's IndexFiles: the rows whose keys hold one of
    them, as the sequential walk decodes them, less rolled-back records (not indexed);
    ``--no-index`` reads every record and keeps those too."""
    conf = golden_copies["java-4.9.7-a"]
    everything = sequential_rows(conf, "broker-a")
    col = COLUMN_NAMES.index
    held = [r for r in everything if {"k-25", "Aa"} & set(r[col("keys")])]
    argv = ["export", "--store", str(conf), "--format", "jsonl", "--key", "k-25", "--key", "Aa"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    want = [r for r in held if r[col("transactionState")] != "ROLLBACK"]
    assert want and _by_offset(_json_rows(tmp_path / "a")) == _by_offset(want)
    assert main([*argv, "--no-index", "--out", str(tmp_path / "b")]) == 0
    assert len(held) > len(want) and _by_offset(_json_rows(tmp_path / "b")) == _by_offset(held)
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "--store", str(conf), "--out", str(tmp_path / "c"), "--key", "two keys"])
    assert exit_info.value.code == 2


def test_export_refuses_bad_input_with_an_exit_code(
    golden_copies: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = str(golden_copies["java-4.9.7-a"])
    out = tmp_path / "out"
    assert main(["export", "--store", str(tmp_path / "missing"), "--out", str(out)]) == 1
    assert "no store at" in capsys.readouterr().err and not out.exists()
    assert main(["export", "--store", conf, "--out", str(out), "--columns", "topic,nope"]) == 2
    assert "unknown column(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "--store", conf, "--out", str(out), "--begin", "20", "--end", "10"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["export", "--store", conf, "--out", str(out), "--begin", "yesterday"])
    with pytest.raises(SystemExit):
        main(["export", "--store", conf, "--out", str(out), "--master", "local[1]"])  # needs --engine spark


def test_iso_times_are_utc_milliseconds() -> None:
    from clients.cli.export_messages import time_arg

    assert time_arg("1795216834250") == 1795216834250
    assert time_arg("2026-11-20T12:00:00Z") == 1795176000000
    assert time_arg("2026-11-20T12:00:00") == 1795176000000
    assert time_arg("2026-11-20T13:00:00+01:00") == 1795176000000


def test_spark_export_equals_the_sequential_export(
    spark, golden_copies: dict[str, Path], tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from store.spark.message_export import export_messages_spark

    confs = [str(golden_copies[name]) for name in STORES]
    result = export_messages_spark(
        confs,
        tmp_path / "pq",
        "parquet",
        columns=COLUMN_NAMES,
        topics=None,
        begin=None,
        end=None,
        spark=spark,
    )
    want = [row for conf in confs for row in sequential_rows(Path(conf), "broker-a")]
    assert result.rows == 5013
    assert _by_offset(_parquet_rows(tmp_path / "pq")) == _by_offset(want)
    col = COLUMN_NAMES.index
    export_messages_spark(
        confs[:1],
        tmp_path / "js",
        "jsonl",
        columns=COLUMN_NAMES,
        topics=["topic_c-1"],
        begin=None,
        end=None,
        use_queues=False,
        spark=spark,
    )
    want_topic = [r for r in want[:5000] if r[col("topic")] == "topic_c-1"]
    assert _by_offset(_json_rows(tmp_path / "js")) == _by_offset(want_topic)
