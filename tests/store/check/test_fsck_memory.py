"""``fsck`` streams: its memory does not grow with the store it checks (issue 22).

Issue 22 measured ``fsck --deep`` at 8.1 GB of resident memory on a 7.4 GiB store: every entry of an
IndexFile held as a tuple, one flag per consume queue entry, and every CommitLog, IndexFile and
consume queue page the walks touched left mapped. These tests check each part on synthetic stores
small enough to be quick: what the queue check holds is the same for a store eight times larger, the
scan of one IndexFile holds one byte per entry and a chunk, the queue check's flags stay a chunk per
queue, and the pages behind a walk leave the process's resident set.
"""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest

from store.check import consume_queues, index_scan, store_check
from store.check.consume_queues import Claims
from store.check.index_files import scan_index_file
from store.check.store_check import check_store
from store.config.store_config import INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, StoreConfig
from store.consumequeue.consume_queue import ConsumeQueue
from store.index.index_file import ENTRY, IndexFile
from store.write.writer import StoreWriter
from tests.support.peak_rss import reset_peak, status_bytes

SMALL = 1_000
LARGE = 8 * SMALL


def _store(root: Path, records: int, body: int = 100, file_size: int = 16 << 20) -> StoreConfig:
    # One IndexFile holds every entry of either store: a per-entry structure of its scan shows.
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=file_size, max_hash_slot_num=4096, max_index_num=3 * LARGE
    )
    with StoreWriter(config) as writer:
        for i in range(records):
            writer.append("Mem", bytes(body), keys=f"k-{i}", queue_id=i % 4)
    return config


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[StoreConfig, StoreConfig]:
    base = tmp_path_factory.mktemp("fsck-mem")
    return _store(base / "small", SMALL), _store(base / "large", LARGE)


def _held_by_the_check(config: StoreConfig, monkeypatch: pytest.MonkeyPatch) -> int:
    """Bytes the check's own modules hold when the consume queue check ends (its per-queue state
    is all alive then: the queues are closed last)."""
    held: list[int] = []
    real_close = ConsumeQueue.close

    def measuring_close(self: ConsumeQueue) -> None:
        if not held:
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(True, str(Path(consume_queues.__file__).parent / "*"))]
            )
            held.append(sum(stat.size for stat in snapshot.statistics("filename")))
        real_close(self)

    check_store(config)  # imports and first-call allocations out of the way
    monkeypatch.setattr(ConsumeQueue, "close", measuring_close)
    tracemalloc.start()
    try:
        report = check_store(config)
    finally:
        tracemalloc.stop()
        monkeypatch.undo()
    assert report.ok, report.problems
    return held[0]


def test_the_queue_check_holds_the_same_for_a_larger_store(
    two_stores: tuple[StoreConfig, StoreConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = two_stores
    grown = _held_by_the_check(large, monkeypatch) - _held_by_the_check(small, monkeypatch)
    # 7,000 more entries: a flag per entry kept to the end would be 7,000 bytes more (a few hundred
    # bytes move with dict and set sizes).
    assert grown < 2048, grown


def test_index_scan_holds_a_flag_per_entry_not_the_entries(
    two_stores: tuple[StoreConfig, StoreConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    _small, large = two_stores
    monkeypatch.setattr(index_scan, "CHUNK", 1024)  # the reference's chunk (the compiled loops hold none)
    (path,) = sorted(large.index_dir.iterdir())
    f = IndexFile.open(path, large.max_hash_slot_num, large.max_index_num)
    try:
        count = f.header.index_count
        assert count > 2 * LARGE
        tracemalloc.start()
        try:
            assert scan_index_file(f) == []
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        f.close()
    # The flags (count bytes) and one chunk of slots or entries read; the entries as tuples would
    # be ~190 bytes each.
    assert peak < count + 1024 * 20 + 64 * 1024, peak


def test_claims_of_a_queue_in_order_keep_one_chunk() -> None:
    total = 50 * Claims.CHUNK + 17
    claims = Claims(total)
    most = 0
    for i in range(total):
        claims.claim(i)
        most = max(most, claims.open_chunks())
    assert most == 1
    assert claims.open_chunks() == 0
    assert list(claims.unclaimed()) == []


def test_claims_out_of_order_report_what_a_flag_per_entry_reports() -> None:
    rng = random.Random(22)
    total = 5 * Claims.CHUNK + 100
    claimed = [rng.randrange(total) for _ in range(4 * total)]
    claimed += list(range(2 * Claims.CHUNK, 3 * Claims.CHUNK))  # one chunk whole, claimed twice over
    rng.shuffle(claimed)
    claims = Claims(total)
    flags = bytearray(total)
    for i in claimed:
        claims.claim(i)
        flags[i] = 1
    assert list(claims.unclaimed()) == [i for i, flag in enumerate(flags) if not flag]
    assert 2 in claims.full


def test_walks_hand_the_pages_behind_them_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not reset_peak():
        pytest.skip("no /proc/self/clear_refs to reset the peak resident set")
    # 96 MiB of CommitLog in 16 MiB files; the walks release every 4 MiB.
    config = _store(tmp_path / "s", 24_000, body=4000)
    monkeypatch.setattr(store_check, "RELEASE_BYTES", 4 << 20)
    monkeypatch.setattr(consume_queues, "RELEASE_BYTES", 4 << 20)
    store_bytes = sum(p.stat().st_size for p in config.store_path_commit_log.iterdir())
    data = 24_000 * 4000
    check_store(config, deep=True)
    assert reset_peak()
    before = status_bytes("VmRSS")
    report = check_store(config, deep=True)
    grown = status_bytes("VmHWM") - before
    assert report.ok, report.problems
    assert store_bytes >= data
    # Each walk keeps 4 MiB behind it (and the kernel's read-around): far below the data it read.
    assert grown < data // 3, (grown, data)


def test_deep_check_names_each_entry_that_misses_its_record(tmp_path: Path) -> None:
    """The deep check reads a record once for the run of entries pointing at it: every entry is
    still checked and named on its own."""
    config = _store(tmp_path / "s", 50)
    (path,) = sorted(config.index_dir.iterdir())
    f = IndexFile.open(path, config.max_hash_slot_num, config.max_index_num)
    try:
        entries = [f.entry(n) for n in range(1, f.header.index_count)]
        at = INDEX_HEADER_SIZE + config.max_hash_slot_num * INDEX_SLOT_SIZE
    finally:
        f.close()
    data = bytearray(path.read_bytes())
    # Entries 3 and 4 are the two keys (UNIQ_KEY, k-1) of the second record.
    assert entries[2][1] == entries[3][1]
    ENTRY.pack_into(data, at + 4 * 20, entries[3][0] ^ 1, *entries[3][1:])  # entry 4: a wrong hash
    ENTRY.pack_into(data, at + 9 * 20, entries[8][0], entries[8][1] + 1, *entries[8][2:])  # 9: mid-record
    path.write_bytes(bytes(data))
    problems = check_store(config, deep=True).problems
    assert f"index file {path.name}: entry 4 hash matches no key of record {entries[3][1]}" in problems
    assert f"index file {path.name}: entry 9 points at {entries[8][1] + 1}, not a record" in problems


def test_claiming_ranges_reports_what_claiming_each_offset_reports() -> None:
    rng = random.Random(2222)
    total = 6 * Claims.CHUNK + 300
    ranges = [(0, Claims.CHUNK)]  # one whole chunk at once: it never gets flags
    ranges += [(a, min(a + rng.randrange(1, 3 * Claims.CHUNK), total)) for a in rng.sample(range(total), 40)]
    by_range, by_offset = Claims(total), Claims(total)
    for start, stop in ranges:
        by_range.claim_range(start, stop)
        for i in range(start, stop):
            by_offset.claim(i)
    assert list(by_range.unclaimed()) == list(by_offset.unclaimed())
    assert by_range.full == by_offset.full
    assert 0 in by_range.full
