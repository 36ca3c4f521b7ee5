"""Resident memory while serving stays within the store's budget even for small records.

Each record read through a map faults in up to 64 KiB around it (the kernel's fault-around), so the
served-bytes count alone lets small records pile up many times the budget; the store also asks the
kernel (``store.platform.resident``) every ``RSS_CHECK_EVERY_RECORDS`` records. Index pages are handed back
too, including those of a writable file (``serve --build-index``), whose data must survive that.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from store import message_store as message_store_module
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.index.index_file import IndexFile
from store.message_store import RSS_CHECK_EVERY_RECORDS, MessageStore
from store.platform.resident import resident_file_bytes
from store.write.writer import StoreWriter

MAX = 2**63 - 1


@pytest.fixture(scope="module")
def small_records(tmp_path_factory: pytest.TempPathFactory) -> tuple[StoreConfig, list[int]]:
    root = tmp_path_factory.mktemp("rss") / "store"
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=1 << 20, max_hash_slot_num=64, max_index_num=2000
    )
    with StoreWriter(config) as writer:
        offsets = [writer.append("Small", bytes(100), keys=f"s-{i}").offset for i in range(600)]
    return config, offsets


def test_resident_file_bytes_reads_the_kernel() -> None:
    resident = resident_file_bytes()
    assert resident is not None and resident > 0  # the interpreter's own mapped files at least


#: The two record reads: the store's view, and the copy the server's VIEW takes (its own accounting).
READS: dict[str, Callable[[MessageStore, int], object]] = {
    "view_message": lambda store, offset: store.view_message(offset),
    "view_message_copy": lambda store, offset: store.view_message_copy(offset, 1 << 24),
}


@pytest.mark.parametrize("read", READS.values(), ids=list(READS))
def test_small_records_trim_on_measured_residency(
    small_records: tuple[StoreConfig, list[int]],
    monkeypatch: pytest.MonkeyPatch,
    read: Callable[[MessageStore, int], object],
) -> None:
    config, offsets = small_records
    trims: list[int] = []
    real_release_all = CommitLog.release_all

    def counting_release_all(self: CommitLog) -> None:
        trims.append(1)
        real_release_all(self)

    monkeypatch.setattr(CommitLog, "release_all", counting_release_all)
    monkeypatch.setattr(message_store_module, "resident_file_bytes", lambda: 1 << 40)
    with MessageStore.open(config) as store:  # the default 128 MiB budget: bytes alone never reach it
        for offset in offsets[: RSS_CHECK_EVERY_RECORDS - 1]:
            assert read(store, offset) is not None
        assert trims == []
        assert read(store, offsets[RSS_CHECK_EVERY_RECORDS - 1]) is not None
        assert trims == [1], "measured residency past the budget trims"
        monkeypatch.setattr(message_store_module, "resident_file_bytes", lambda: 0)
        for offset in offsets[RSS_CHECK_EVERY_RECORDS : 2 * RSS_CHECK_EVERY_RECORDS]:
            read(store, offset)
        assert trims == [1], "no trim while residency is within the budget"


@pytest.mark.parametrize("read", READS.values(), ids=list(READS))
def test_served_bytes_past_the_budget_trim(
    small_records: tuple[StoreConfig, list[int]],
    monkeypatch: pytest.MonkeyPatch,
    read: Callable[[MessageStore, int], object],
) -> None:
    """Each read counts its record plus a page (4096 + 100 + the record's header here)."""
    config, offsets = small_records
    trims: list[int] = []
    real_release_all = CommitLog.release_all

    def counting_release_all(self: CommitLog) -> None:
        trims.append(1)
        real_release_all(self)

    monkeypatch.setattr(CommitLog, "release_all", counting_release_all)
    monkeypatch.setattr(message_store_module, "resident_file_bytes", lambda: 0)
    with MessageStore.open(config, rss_trim_bytes=10 * 4096) as store:
        for offset in offsets[:9]:
            assert read(store, offset) is not None
        assert trims == []
        read(store, offsets[9])  # 10 x (4096 + record) >= 10 pages
        assert trims == [1]
        for offset in offsets[10:19]:
            read(store, offset)
        assert trims == [1], "the count starts again after a trim"
        read(store, -1)  # no record still counts its page: 9 x (4096 + record) + 4096
        assert trims == [1, 1]


def test_release_keeps_the_data_of_a_writable_index_file(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20261121000000000", 16, 64)
    try:
        for n in range(40):
            assert f.put_key(f"T#k{n}", 1000 + n, 1_700_000_000_000 + n)
        before = bytes(f.buffer)
        f.release()
        assert bytes(f.buffer) == before
        assert f.put_key("T#after", 5000, 1_700_000_000_100)
        out: list[int] = []
        f.select_phy_offsets(out, "T#k7", 64, 0, MAX)
        assert out == [1007]
    finally:
        f.close()
    reopened = IndexFile.open(tmp_path / "20261121000000000", 16, 64)
    try:
        assert reopened.header.index_count == 42
        out = []
        reopened.select_phy_offsets(out, "T#after", 64, 0, MAX)
        assert out == [5000]
    finally:
        reopened.close()


def test_release_hands_back_the_written_pages_of_a_writable_file(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20261121000000001", 1000, 200_000)  # ~4 MiB
    try:
        mm = f.buffer
        start = 40 + 1000 * 4
        mm[start:] = b"\x5a" * (len(mm) - start)  # dirty every page, as a long build does
        before = resident_file_bytes()
        f.release()
        after = resident_file_bytes()
        assert before is not None and after is not None
        assert before - after >= 3 << 20, (before, after)
        assert mm[start:].count(b"\x5a") == len(mm) - start, "written data survives the release"
    finally:
        f.close()
    assert (tmp_path / "20261121000000001").read_bytes()[-10:] == b"\x5a" * 10


def test_indexing_without_queries_hands_back_pages_past_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=1 << 20, max_hash_slot_num=64, max_index_num=2000
    )
    with StoreWriter(
        StoreConfig.for_store(root, mapped_file_size_commit_log=1 << 20, message_index_enable=False)
    ) as w:
        for i in range(300):
            w.append("Built", bytes(100), keys=f"b-{i}")
    released: list[int] = []
    real_release_all = CommitLog.release_all

    def counting_release_all(self: CommitLog) -> None:
        released.append(1)
        real_release_all(self)

    monkeypatch.setattr(CommitLog, "release_all", counting_release_all)
    with MessageStore.open(config, build_index=True, catch_up=False) as store:
        monkeypatch.setattr(message_store_module, "resident_file_bytes", lambda: 0)
        assert store.refresh(max_records=100) is True
        assert released == [], "within the budget nothing is released"
        monkeypatch.setattr(message_store_module, "resident_file_bytes", lambda: 1 << 40)
        assert store.refresh(max_records=100) is True
        assert released == [1], "a slice of indexing past the budget hands the pages back"
        assert store.refresh(max_records=1000) is False
        assert store.query_message("Built", "b-299", 64, 0, MAX).buffers, "the written index survives"


def test_index_entries_a_query_visits_count_toward_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key query that returns one record may read index entries all over every IndexFile (issue
    22): the entries it visits count toward the next look at resident memory, as records do."""
    config = StoreConfig.for_store(tmp_path / "s", max_hash_slot_num=1, max_index_num=2000)
    with StoreWriter(config) as writer:
        for i in range(400):
            writer.append("Chain", b"x", keys=f"c-{i}")
    looks: list[int] = []
    monkeypatch.setattr(MessageStore, "_resident_over_limit", lambda self: looks.append(1) or False)
    with MessageStore.open(config) as store:
        result = store.query_message("Chain", "c-0", 1, 0, MAX)  # every key in one slot: a long walk
        assert len(result.buffers) == 1
        assert result.visited >= RSS_CHECK_EVERY_RECORDS
    assert looks, "one query visiting hundreds of entries is due a look"


def test_every_key_query_is_due_a_look(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key query reads a slot in every IndexFile it walks, and the kernel may map a whole large
    folio for each (issue 22): even a one-entry walk is due a look at resident memory."""
    config = StoreConfig.for_store(tmp_path / "s")
    with StoreWriter(config) as writer:
        for i in range(10):
            writer.append("Few", b"x", keys=f"f-{i}")
    looks: list[int] = []
    monkeypatch.setattr(MessageStore, "_resident_over_limit", lambda self: looks.append(1) or False)
    with MessageStore.open(config) as store:
        for i in range(3):
            result = store.query_message("Few", f"f-{i}", 1, 0, MAX)
            assert len(result.buffers) == 1 and result.visited < RSS_CHECK_EVERY_RECORDS
            assert len(looks) == i + 1
