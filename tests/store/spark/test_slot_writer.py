"""Write tasks owning ranges of hash slots: together, the files the single writer writes."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store.spark import slot_writer
from store.spark.assign import per_file
from store.spark.decode import entries_path
from store.spark.entries import pack_entries
from store.spark.index_stream import IndexStreamWriter

SLOTS, INDEX_NUM = 7, 40  # 39 keys a file: the 100 entries below fill 2 files and part of a third


def _entry_files(directory: Path, seed: int) -> list[int]:
    """Range entry files in ``directory`` (empty ranges, one crossing two file boundaries); their counts."""
    rng = random.Random(seed)
    offset, ts = 1000, 1_700_000_000_000
    counts = []
    for index, size in enumerate((0, 17, 30, 1, 0, 52)):
        entries = []
        for _ in range(size):
            offset += rng.randrange(100, 2000)
            ts += rng.randrange(-1500, 3000)  # store times may go back: time differences clamp
            entries.append((rng.randrange(0, 1 << 31), offset, ts))
        entries_path(directory, index).write_bytes(pack_entries(entries))
        counts.append(size)
    return counts


def _single_writer(tmp_path: Path, entries: Path, counts: list[int]) -> list:
    out = tmp_path / "single"
    out.mkdir()
    writer = IndexStreamWriter(out, entries, len(counts), per_file(INDEX_NUM), SLOTS, INDEX_NUM)
    writer.start()
    writer.join(timeout=30)
    assert writer.error is None
    return writer.written


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 9])
def test_slot_range_writers_write_the_single_writers_files(tmp_path: Path, parts: int) -> None:
    entries = tmp_path / "entries"
    entries.mkdir()
    counts = _entry_files(entries, 5 + parts)
    expected = _single_writer(tmp_path, entries, counts)
    out = tmp_path / "slots"
    out.mkdir()
    keys_per_file = per_file(INDEX_NUM)
    assert slot_writer.create_files(out, entries, counts, keys_per_file, SLOTS, INDEX_NUM) == 3
    ranges = slot_writer.slot_ranges(SLOTS, parts)
    assert len(ranges) == min(parts, SLOTS) and ranges[0][0] == 0 and ranges[-1][1] == SLOTS
    states = [
        slot_writer.write_slot_range(
            str(out), str(entries), counts, keys_per_file, SLOTS, INDEX_NUM, lo, hi, slot_writer.kernel_id()
        )
        for lo, hi in reversed(ranges)  # in any order: they write disjoint bytes
    ]
    written = slot_writer.finish_files(out, entries, counts, keys_per_file, SLOTS, INDEX_NUM, states)
    assert [w.keys for w in written] == [39, 39, 22]
    for got, want in zip(written, expected, strict=True):
        assert Path(got.path).read_bytes() == Path(want.path).read_bytes()
        assert (got.file_no, got.keys, got.first_timestamp, got.end_phy_offset, got.end_timestamp) == (
            want.file_no,
            want.keys,
            want.first_timestamp,
            want.end_phy_offset,
            want.end_timestamp,
        )


def test_a_task_on_another_kernel_writes_nothing(tmp_path: Path) -> None:
    entries = tmp_path / "entries"
    entries.mkdir()
    counts = _entry_files(entries, 3)
    out = tmp_path / "slots"
    out.mkdir()
    slot_writer.create_files(out, entries, counts, per_file(INDEX_NUM), SLOTS, INDEX_NUM)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    got = slot_writer.write_slot_range(
        str(out), str(entries), counts, per_file(INDEX_NUM), SLOTS, INDEX_NUM, 0, SLOTS, "another host"
    )
    assert got is None
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


class _TasksHere:
    """Enough of a SparkContext to run a stage's tasks in this process, in order."""

    def parallelize(self, items: list, _slices: int) -> _TasksHere:
        self.items = list(items)
        return self

    def map(self, fn: Callable[[Any], Any]) -> _TasksHere:
        self.items = [fn(item) for item in self.items]
        return self

    def collect(self) -> list:
        return self.items


def test_the_driver_writes_the_slots_of_tasks_on_another_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store.spark import rebuild

    entries = tmp_path / "entries"
    entries.mkdir()
    counts = _entry_files(entries, 11)
    expected = _single_writer(tmp_path, entries, counts)
    out = tmp_path / "slots"
    out.mkdir()
    calls: list[tuple[bool, bool]] = []  # (a task's call, it wrote)
    real = rebuild.write_slot_range

    def counted(*args: object) -> object:
        got = real(*args)  # type: ignore[arg-type]
        calls.append((len(args) == 9, got is not None))
        return got

    monkeypatch.setattr(rebuild, "write_slot_range", counted)
    # The driver's kernel is not the tasks': every task declines, and the driver writes its slots.
    monkeypatch.setattr(rebuild, "kernel_id", lambda: "the driver's host")
    written = rebuild._write_by_slots(
        _TasksHere(), out, str(entries), counts, per_file(INDEX_NUM), SLOTS, INDEX_NUM, 3
    )
    assert calls == [(True, False)] * 3 + [(False, True)] * 3
    assert [Path(w.path).read_bytes() for w in written] == [Path(w.path).read_bytes() for w in expected]
