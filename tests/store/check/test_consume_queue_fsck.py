"""``fsck`` checks every consume queue entry against its CommitLog record (Java stores are clean)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from store.check import consume_queues
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


def _damage(config: StoreConfig, how: str) -> None:
    a, b = _queue_file(config, "TopicA", 1), _queue_file(config, "TopicB", 1)
    da, db = bytearray(a.read_bytes()), bytearray(b.read_bytes())
    if how == "tags":
        da[7 * 20 + 12 + 7] ^= 1
    elif how == "lost":
        da[490 * 20 :] = bytes(len(da) - 490 * 20)
    elif how == "other queue's":
        da[5 * 20 : 6 * 20] = db[5 * 20 : 6 * 20]
    elif how == "swapped":
        da[10 * 20 : 12 * 20] = da[11 * 20 : 12 * 20] + da[10 * 20 : 11 * 20]
    elif how == "zeroed":
        da[100 * 20 : 140 * 20] = bytes(40 * 20)
    a.write_bytes(bytes(da))


@pytest.mark.parametrize("how", ["tags", "lost", "other queue's", "swapped", "zeroed"])
def test_the_bulk_comparison_reports_what_the_entry_by_entry_check_reports(
    stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A queue's batch that matches its files is claimed at once; one that does not is checked entry
    by entry. Forcing every batch entry by entry must give the same report, line for line."""
    config = _copy(stores_dir, tmp_path)
    _damage(config, how)
    bulk = check_store(config)
    monkeypatch.setattr(consume_queues, "_same_entries", lambda *_args: False)
    one_by_one = check_store(config)
    assert bulk.problems and bulk.problems == one_by_one.problems
    assert bulk.notes == one_by_one.notes


def test_a_clean_queue_is_claimed_in_batches(
    stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _copy(stores_dir, tmp_path)
    single: list[int] = []
    real = consume_queues.Claims.claim

    def counting(self: consume_queues.Claims, i: int) -> None:
        single.append(i)
        real(self, i)

    monkeypatch.setattr(consume_queues.Claims, "claim", counting)
    assert check_store(config).problems == []
    assert single == []
