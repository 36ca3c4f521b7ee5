"""A decode task walks its range with the sequential builder's loop, and finds what the per-record walk finds.

``decode_range`` hands runs of whole records to ``index_range`` (compiled, or its pure-Python
reference) and leaves only the positions it stops at to ``range_walk``'s per-record step. On the Java
store with each kind of damage, cut into small ranges so that damage falls inside, between and across
them, three walks must give the same ``RangeEntries`` (entries, records, runs, bad bytes, file end):
the compiled loop, the reference loop, and the per-record walk alone (the decode before the loop was
used). No Spark: the task's code runs in this process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from store.commitlog import record
from store.commitlog.mapped_files import CommitLog
from store.consumequeue import consume_queue_build
from store.consumequeue.consume_queue import delay_level_table
from store.index import index_range
from store.spark import consume_queue_rebuild as cq_rebuild
from store.spark import decode, ranges
from store.spark.decode import RangeEntries, decode_range, decode_range_to_file, entries_path
from store.spark.range_walk import walk_range
from store.spark.ranges import list_files, plan_file
from store.spark.rebuild import decode_plan, sampled_plan_holds
from store.spark.synthetic import write_commitlog
from tests.support.gap_damage import DAMAGES, STORE, copy_store


def _decode_all(config_root: Path) -> list[RangeEntries]:
    plans = [plan_file(f, 1 << 16) for f in list_files(config_root / "commitlog")]
    return [decode_range(r) for r in decode_plan(plans)]


def _walks(monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[], None]]:
    def compiled() -> None:
        pass  # as the module loaded it: the compiled twin when built (else the reference)

    def reference() -> None:
        monkeypatch.setattr(decode, "index_range", index_range.index_range_reference)

    def per_record() -> None:
        monkeypatch.setattr(decode, "walk_range", lambda rng, visit, scan=None: walk_range(rng, visit))

    return {"compiled": compiled, "reference": reference, "per-record": per_record}


@pytest.mark.parametrize("damage", [None, *DAMAGES])
def test_three_walks_decode_a_damaged_store_alike(
    damage: str | None, stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    if damage is not None:
        DAMAGES[damage](config.store_path_root_dir, expected["messages"])
    got = {}
    for name, use in _walks(monkeypatch).items():
        use()
        got[name] = _decode_all(config.store_path_root_dir)
        monkeypatch.undo()
    assert got["compiled"] == got["reference"] == got["per-record"]
    assert sum(len(r.blob) for r in got["compiled"]) > 0


def test_the_entries_file_holds_the_blob(stores_dir: Path, tmp_path: Path) -> None:
    config = copy_store(stores_dir, tmp_path / "store")
    plans = [plan_file(f, 1 << 16) for f in list_files(config.store_path_commit_log)]
    (tmp_path / "entries").mkdir()
    for rng in decode_plan(plans)[:5]:
        summary, count = decode_range_to_file(rng, str(tmp_path / "entries"))
        whole = decode_range(rng)
        assert entries_path(tmp_path / "entries", rng.index).read_bytes() == whole.blob
        assert count == len(whole.blob) // 20 and summary.blob == b""
        assert summary == RangeEntries(
            whole.index, b"", whole.records, whole.bytes_read, whole.runs, whole.bad, whole.file_end
        )


# -- a sampled plan, and the decode's proof of it ---------------------------------------------------


def _plan_and_decode(log_dir: Path, target: int) -> tuple[list, list, list[RangeEntries]]:
    plans = [ranges.plan_file_sampled(f, target) for f in list_files(log_dir)]
    cut = decode_plan(plans)
    return plans, cut, [decode_range(r) for r in cut]


def test_sampled_cuts_are_record_boundaries_and_the_decode_proves_them(tmp_path: Path) -> None:
    write_commitlog(tmp_path / "commitlog", file_size=256 * 1024, messages=900)
    log_dir = tmp_path / "commitlog"
    hopped = [plan_file(f, 30_000) for f in list_files(log_dir)]
    plans, cut, decoded = _plan_and_decode(log_dir, 30_000)
    assert any(len(p.cuts) > 3 for p in plans)
    log = CommitLog(log_dir, 256 * 1024)
    boundaries = {offset for offset, _ in log.iter_records()}
    log.close()
    for sampled, hop in zip(plans, hopped, strict=True):
        assert set(sampled.cuts) <= boundaries | {sampled.file.start}
        assert (sampled.end, sampled.stop, sampled.detail) == (hop.end, hop.stop, hop.detail)
    assert sampled_plan_holds(plans, cut, decoded)
    whole = [decode_range(r) for r in decode_plan(hopped)]
    assert b"".join(r.blob for r in decoded) == b"".join(r.blob for r in whole)


def test_a_cut_inside_a_record_is_not_proven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message body holding a record that checks at its own offset would give a cut inside a
    record: the range before it cannot end there, so the plan is refused (and the job plans again)."""
    write_commitlog(tmp_path / "commitlog", file_size=256 * 1024, messages=900)
    real = ranges._first_record
    monkeypatch.setattr(
        ranges, "_first_record", lambda mm, pos, stop, base: (real(mm, pos, stop, base) or 0) + 40
    )
    plans, cut, decoded = _plan_and_decode(tmp_path / "commitlog", 30_000)
    assert not sampled_plan_holds(plans, cut, decoded)


def test_damage_in_a_sampled_file_is_not_proven(stores_dir: Path, tmp_path: Path) -> None:
    write_commitlog(tmp_path / "commitlog", file_size=256 * 1024, messages=900)
    first = sorted((tmp_path / "commitlog").iterdir())[0]
    raw = bytearray(first.read_bytes())
    raw[70_000] ^= 0xFF  # inside some record of the first file: a bad CRC or a broken header
    first.write_bytes(raw)
    plans, cut, decoded = _plan_and_decode(tmp_path / "commitlog", 30_000)
    assert not sampled_plan_holds(plans, cut, decoded)


# -- the consume queues' decode: the same three walks ------------------------------------------------


@pytest.mark.parametrize("damage", [None, *DAMAGES])
def test_three_walks_decode_consume_queue_entries_alike(
    damage: str | None, stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``decode_cq_range``: compiled ``whole_run`` + ``extract_entries``, their references, and the
    per-record ``dispatch_entry`` walk give the same per-queue parts, runs and bad bytes."""
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    config = copy_store(stores_dir, tmp_path / "store")
    if damage is not None:
        DAMAGES[damage](config.store_path_root_dir, expected["messages"])
    delays = delay_level_table(config.message_delay_level)
    plans = [plan_file(f, 1 << 16) for f in list_files(config.store_path_commit_log)]
    cut = decode_plan(plans)

    def reference() -> None:
        monkeypatch.setattr(cq_rebuild, "extract_entries", consume_queue_build.extract_entries_reference)
        monkeypatch.setattr(record, "whole_run", record.whole_run_reference)

    def per_record() -> None:
        monkeypatch.setattr(cq_rebuild, "walk_range", lambda rng, visit, scan=None: walk_range(rng, visit))

    got = {}
    for name, use in (("compiled", lambda: None), ("reference", reference), ("per-record", per_record)):
        use()
        got[name] = [cq_rebuild.decode_cq_range(r, delays) for r in cut]
        monkeypatch.undo()
    assert got["compiled"] == got["reference"] == got["per-record"]
    assert sum(len(part[0]) for r in got["compiled"] for _key, part in r.entries) > 0
    # Each queue's parts expand to its entries in CommitLog order.
    for key in {key for r in got["compiled"] for key, _ in r.entries}:
        parts = [(r.index, part) for r in got["compiled"] for k, part in r.entries if k == key]
        offsets = [entry[0] for entry in cq_rebuild.queue_entries(parts)]
        assert offsets == sorted(offsets)
