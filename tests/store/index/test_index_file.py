"""IndexFile rules, one by one, as the Java broker applies them (IndexFile.putKey/selectPhyOffset)."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path

import pytest

from protocol.index_key import index_key_hash
from store.config.store_config import StoreConfig, index_file_size
from store.errors import IndexGeometryError
from store.index.index_file import ENTRY, SLOT, IndexFile, IndexHeader, is_time_matched
from store.index.service import IndexService

SLOTS = 8
ENTRIES = 6
MAX = 2**63 - 1


def _new(tmp_path: Path, **kw: int) -> IndexFile:
    return IndexFile.create(tmp_path / "20260101000000000", SLOTS, ENTRIES, **kw)


def test_size_is_fixed_and_preallocated(tmp_path: Path) -> None:
    f = _new(tmp_path)
    assert f.path.stat().st_size == index_file_size(SLOTS, ENTRIES) == 40 + 8 * 4 + 6 * 20
    f.close()
    with pytest.raises(IndexGeometryError, match="maxHashSlotNum=9"):
        IndexFile.open(tmp_path / "20260101000000000", 9, ENTRIES)


def test_put_and_select_follow_the_broker(tmp_path: Path) -> None:
    f = _new(tmp_path)
    assert f.header.index_count == 1  # entry 0 is never used
    assert f.put_key("T#a", 100, 10_000)
    h = f.header
    assert (h.begin_timestamp, h.begin_phy_offset, h.end_phy_offset, h.index_count) == (10_000, 100, 100, 2)
    assert f.entry(1) == (index_key_hash("T#a"), 100, 0, 0)
    assert f.put_key("T#a", 200, 12_999)  # 2.999 s later: timeDiff truncates to 2 s
    assert f.entry(2)[2:] == (2, 1)  # prevIndex links to the older entry
    assert f.header.hash_slot_count == 1, "hashSlotCount only counts slots that were empty"
    out: list[int] = []
    f.select_phy_offsets(out, "T#a", 64, 0, MAX)
    assert out == [200, 100]  # newest first
    out = []
    f.select_phy_offsets(out, "T#a", 64, 12_000, 12_000)  # timeRead = begin + 2 s
    assert out == [200]
    out = []
    f.select_phy_offsets(out, "T#a", 1, 0, MAX)
    assert out == [200]
    out = []
    f.select_phy_offsets(out, "T#b", 64, 0, MAX)
    assert out == []


def test_time_diff_clamps(tmp_path: Path) -> None:
    f = _new(tmp_path)
    f.put_key("T#first", 1, 1_000_000)
    f.put_key("T#past", 2, 5)  # before beginTimestamp: clamped to 0
    f.put_key("T#far", 3, 1_000_000 + (2**31 + 5) * 1000)  # beyond int32 seconds: Integer.MAX_VALUE
    assert f.entry(2)[2] == 0
    assert f.entry(3)[2] == 2**31 - 1


def test_first_put_after_inherited_begin_uses_it_for_time_diff(tmp_path: Path) -> None:
    f = _new(tmp_path, end_phy_offset=500, end_timestamp=10_000)
    h = f.header
    assert (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset) == (
        10_000,
        10_000,
        500,
        500,
    )
    f.put_key("T#k", 600, 13_500)
    assert f.entry(1)[2] == 3, "timeDiff is computed before begin takes this message's values"
    assert f.header.begin_timestamp == 13_500 and f.header.begin_phy_offset == 600


def test_full_file_refuses_and_reports_full(tmp_path: Path) -> None:
    f = _new(tmp_path)
    for i in range(ENTRIES - 1):
        assert f.put_key(f"T#{i}", i, 1000 + i)
    assert f.is_write_full()
    assert not f.put_key("T#more", 99, 2000)
    assert f.header.index_count == ENTRIES


def test_slot_pointing_past_index_count_counts_as_empty(tmp_path: Path) -> None:
    f = _new(tmp_path)
    slot_pos = 40 + (index_key_hash("T#x") % SLOTS) * 4
    SLOT.pack_into(f._mm, slot_pos, 5)  # garbage: beyond indexCount
    out: list[int] = []
    f.select_phy_offsets(out, "T#x", 64, 0, MAX)
    assert out == []
    f.put_key("T#x", 7, 1000)
    assert f.entry(1)[3] == 0, "an invalid slot value is not linked"
    assert f.header.hash_slot_count == 1


def test_corrupt_chain_cannot_loop(tmp_path: Path) -> None:
    f = _new(tmp_path)
    for i in range(4):
        f.put_key("T#loop", 10 + i, 1000)
    entries_at = 40 + SLOTS * 4
    h = index_key_hash("T#loop")
    # 4 -> 3 -> 2 -> 4 -> ... : a forward pointer makes a cycle.
    ENTRY.pack_into(f._mm, entries_at + 2 * 20, h, 11, 0, 4)
    out: list[int] = []
    visited = f.select_by_hash(out, h, 64, 0, MAX)
    assert out == [13, 12, 11]
    assert visited == 3


def test_is_time_matched() -> None:
    h = IndexHeader(100, 200, 0, 0, 0, 2)
    assert is_time_matched(h, 50, 250)  # covers
    assert is_time_matched(h, 150, 999)  # begin inside
    assert is_time_matched(h, 0, 100)  # end on the boundary
    assert not is_time_matched(h, 0, 99)
    assert not is_time_matched(h, 201, 300)
    assert is_time_matched(h, 150, 120), "begin > end still matches when begin lies inside (as in Java)"


def test_problem_follows_the_header_it_is_asked_about(tmp_path: Path) -> None:
    f = _new(tmp_path)
    try:
        good = IndexHeader(1000, 2000, 0, 100, 1, ENTRIES)
        assert f.problem(good, last=False) is None
        assert f.problem(good, last=False) is None  # the remembered verdict
        not_full = good._replace(index_count=ENTRIES - 1)
        assert (
            f.problem(not_full, last=False)
            == f"indexCount {ENTRIES - 1} in an older file, which must be full ({ENTRIES})"
        )
        assert f.problem(not_full, last=True) is None  # the newest file may be filling
        assert (
            f.problem(good._replace(begin_timestamp=-1), last=True)
            == "negative timestamp or offset in the header"
        )
        assert f.problem(good, last=False) is None
    finally:
        f.close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_size_check_descriptor_lives_exactly_as_long_as_the_map(tmp_path: Path) -> None:
    """``IndexFile.fd`` (the query's size check) names the mapped inode, closes with the map, and
    stays open while a view keeps the map alive (its number must not be reused while the map can be
    read); the map's collection closes it then."""
    f = IndexFile.create(tmp_path / "idx", 4, 8)
    size = f.size
    fd = f.fd
    assert os.lseek(fd, 0, os.SEEK_END) == size and os.fstat(fd).st_ino == f.inode
    f.close()
    assert not _is_open(fd)

    g = IndexFile.open(tmp_path / "idx", 4, 8)
    fd = g.fd
    view = memoryview(g.buffer)  # the map cannot be closed while this exists
    g.close()
    assert _is_open(fd), "the map is still mapped: its descriptor stays"
    del g, view
    gc.collect()
    assert not _is_open(fd), "the map was collected: so is its descriptor"


def test_a_cut_file_is_left_out_of_queries_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Through ``IndexService``: the size check (by the descriptor) sees the cut, the file is left
    out, the warning comes once for many queries, and the other file still answers."""
    config = StoreConfig(
        store_path_root_dir=tmp_path,
        store_path_commit_log=tmp_path / "commitlog",
        max_hash_slot_num=4,
        max_index_num=8,
    )
    service = IndexService(config, writable=True)
    older = service.create_file(1_000_000)
    for n in range(1, 8):
        older.put_key("T#k", 100 * n, 1_000_000 + n)
    newer = service.create_file(2_000_000)
    newer.put_key("T#k", 5000, 2_000_000)
    reader = IndexService(config)
    assert sorted(reader.query_offsets("T", "k", 64, 0, 2**63 - 1).phy_offsets) == [
        100,
        200,
        300,
        400,
        500,
        600,
        700,
        5000,
    ]
    os.truncate(newer.path, 100)
    with caplog.at_level(logging.WARNING, logger="store.index"):
        for _ in range(5):
            answer = reader.query_offsets("T", "k", 64, 0, 2**63 - 1)
            assert sorted(answer.phy_offsets) == [100, 200, 300, 400, 500, 600, 700]
            assert (answer.index_last_update_timestamp, answer.index_last_update_phyoffset) == (0, 0)
    said = [r.getMessage() for r in caplog.records if "shorter than" in r.getMessage()]
    assert len(said) == 1 and newer.name in said[0]
    reader.close()
    service.close()
