"""``fsck`` checks every consume queue entry against its CommitLog record (Java stores are clean)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from store.check.store_check import check_store
from store.config.store_config import StoreConfig


def _copy(stores_dir: Path, tmp_path: Path) -> StoreConfig:
    dst = tmp_path / "s"
    shutil.copytree(stores_dir / "java-4.9.7-a", dst)
    for p in [dst, *dst.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return StoreConfig.load(
        stores_dir / "java-4.9.7-a.broker.conf",
        overrides={"store_path_root_dir": dst, "store_path_commit_log": dst / "commitlog"},
    )


def _queue_file(config: StoreConfig, topic: str = "TopicA", qid: int = 1) -> Path:
    return config.consume_queue_dir / topic / str(qid) / ("0" * 20)


def test_java_stores_consume_queues_are_clean(stores_dir: Path, tmp_path: Path) -> None:
    report = check_store(_copy(stores_dir, tmp_path))
    assert report.problems == []
    assert any("12 queues, 4980 of 5000 records get an entry, 4980 entries" in n for n in report.notes)


def test_a_wrong_entry_is_named(stores_dir: Path, tmp_path: Path) -> None:
    config = _copy(stores_dir, tmp_path)
    path = _queue_file(config)
    data = bytearray(path.read_bytes())
    data[7 * 20 + 12 + 7] ^= 1  # entry 7's tagsCode
    path.write_bytes(bytes(data))
    problems = check_store(config).problems
    assert len(problems) == 1 and problems[0].startswith("consume queue TopicA/1: offset 7 holds (")
    assert "its record says" in problems[0]


def test_lost_entries_are_reported_as_behind(stores_dir: Path, tmp_path: Path) -> None:
    config = _copy(stores_dir, tmp_path)
    path = _queue_file(config)
    data = bytearray(path.read_bytes())
    data[490 * 20 :] = bytes(len(data) - 490 * 20)  # the last 8 of its 498 entries are gone
    path.write_bytes(bytes(data))
    problems = check_store(config).problems
    assert problems[0].startswith("consume queue TopicA/1: no entry at offset 490 for the record at ")
    assert problems[-1] == "consume queue TopicA/1: ... and 3 more missing problems"


def test_an_entry_no_record_claims_is_reported(stores_dir: Path, tmp_path: Path) -> None:
    config = _copy(stores_dir, tmp_path)
    a, b = _queue_file(config, "TopicA", 1), _queue_file(config, "TopicB", 1)
    da, db = bytearray(a.read_bytes()), bytearray(b.read_bytes())
    da[5 * 20 : 6 * 20] = db[5 * 20 : 6 * 20]  # TopicA/1 offset 5 now points at TopicB's record
    a.write_bytes(bytes(da))
    problems = check_store(config).problems
    assert len(problems) == 1 and problems[0].startswith("consume queue TopicA/1: offset 5 holds (")


def test_a_file_of_the_wrong_size_stops_the_check_with_the_reason(stores_dir: Path, tmp_path: Path) -> None:
    config = _copy(stores_dir, tmp_path)
    with open(_queue_file(config), "r+b") as f:
        f.truncate(10_000)
    problems = check_store(config).problems
    assert len(problems) == 1 and "has 10000 bytes but mappedFileSizeConsumeQueue gives 20000" in problems[0]
