"""The fixed part of a settle that covers one SEND: what it asks the kernel, and what it still catches.

A lone SEND pays a whole settle. When the span it covers is the writer's own (``refresh_written``),
the CommitLog's tail is checked with one ``fstat`` of the writer's descriptor instead of a ``stat``
of the path and a look for a next file, and the resident pages are looked at every
``RSS_CHECK_EVERY_DISPATCHED`` records dispatched instead of after every put. The checks must still
refuse a file replaced under the writer between its append and the settle (a file cut there:
``test_append_settle.py``).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
from pathlib import Path

import pytest

import store.index.service as index_service
import store.message_store as message_store_module
from server.broker.put_message import StoreUnavailable
from server.broker.writable_store import WritableStore
from store.commitlog import mapped_files
from store.config.store_config import StoreConfig
from store.index.index_file import IndexFile
from store.write.writer import StoreRecord


def _open(root: Path) -> WritableStore:
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=1 << 20)
    store = WritableStore(config, clock=itertools.count(1_700_000_000_000, 3).__next__)
    store.create_topic("T", 4)
    return store


def _record(i: int) -> StoreRecord:
    return StoreRecord("T", b"body-%d" % i, f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i:031d}\x02", queue_id=i % 4)


def test_a_file_replaced_under_the_writer_before_the_settle_acknowledges_nothing(tmp_path: Path) -> None:
    """The path now names a copy that lacks the appended record (a restore of an older copy, by
    rename): the writer's descriptor still reads its own bytes, but they are in an unlinked file a
    restart would never see. The settle must not take them."""
    root = tmp_path / "s"
    with _open(root) as store:
        (kept,) = store.put([_record(0)])
        fresh = store.append([_record(1)])[0]
        path = root / "commitlog" / f"{0:020d}"
        spare = path.with_name("spare")
        shutil.copyfile(path, spare)
        fd = os.open(spare, os.O_WRONLY)
        try:
            os.pwrite(fd, bytes(fresh.size), fresh.offset)
        finally:
            os.close(fd)
        os.replace(spare, path)
        with pytest.raises(StoreUnavailable):
            store.settle()
        assert store.not_writable is not None
        assert store.reader.max_offset("T", 1) == 0
        assert store.reader.query_message("T", "k1", 32, 0, 2**63 - 1).buffers == []
        assert store.reader.commitlog.read_record(kept.offset) is not None


def test_a_lone_put_asks_no_commitlog_path_and_reads_proc_once_per_256_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    commitlog_dir = str(root / "commitlog")
    with _open(root) as store:
        store.put([_record(0)])
        monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 1e9)  # no periodic full check here
        looked: list[str] = []
        real_stat, real_exists = os.stat, os.path.exists

        def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
            if isinstance(path, (str, Path)) and str(path).startswith(commitlog_dir):
                looked.append(f"stat {path}")
            return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

        def exists(path: object) -> bool:
            if isinstance(path, (str, Path)) and str(path).startswith(commitlog_dir):
                looked.append(f"exists {path}")
            return real_exists(path)  # type: ignore[arg-type]

        reads: list[int] = []
        real_resident = message_store_module.resident_file_bytes

        def resident() -> int | None:
            reads.append(1)
            return real_resident()

        monkeypatch.setattr(os, "stat", stat)
        monkeypatch.setattr(os.path, "exists", exists)
        monkeypatch.setattr(message_store_module, "resident_file_bytes", resident)
        every = message_store_module.RSS_CHECK_EVERY_DISPATCHED
        for i in range(1, 2 * every + 1):
            store.put([_record(i)])
        monkeypatch.undo()
        assert looked == []
        assert len(reads) == 2
        for i in range(2 * every + 1):  # and each was readable when its put returned (checked again here)
            assert len(store.reader.query_message("T", f"k{i}", 32, 0, 2**63 - 1).buffers) == 1


def test_a_lone_put_looks_at_the_index_file_being_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settle's audit ``stat``s the last index file's path; the builder's ``begin`` then needs
    to know the same map is whole before it writes through it. One look answers both: no ``fstat``
    of the map's descriptor (``IndexFile.intact``) after the audit vouched for it."""
    root = tmp_path / "s"
    with _open(root) as store:
        store.put([_record(0)])
        index_dir = str(root / "index")
        stats: list[str] = []
        intact: list[int] = []
        real_facts = index_service.path_facts  # the audit's stat (``store.platform.file_facts``)
        real_intact = IndexFile.intact

        def facts(path: str | Path) -> tuple[int, int, int]:
            if str(path).startswith(index_dir):
                stats.append(str(path))
            return real_facts(path)

        def counted_intact(self: IndexFile) -> bool:
            intact.append(1)
            return real_intact(self)

        monkeypatch.setattr(index_service, "path_facts", facts)
        monkeypatch.setattr(IndexFile, "intact", counted_intact)
        for i in range(1, 33):
            store.put([_record(i)])
        monkeypatch.undo()
        assert len(stats) == 32, "the audit's one stat of the file being written, per put"
        assert intact == [], "and no second look at the same file by the builder"
        for i in range(33):
            assert len(store.reader.query_message("T", f"k{i}", 32, 0, 2**63 - 1).buffers) == 1


def test_an_index_file_cut_under_a_writable_store_stops_indexing_and_keeps_the_sends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The index file being written is cut short between two puts: writing through its map would
    fault (SIGBUS). The audit's look finds it cut, so the builder sits out (nothing vouched) and
    the puts are still stored, acknowledged and in their consume queues; said once."""
    root = tmp_path / "s"
    with _open(root) as store:
        store.put([_record(0)])
        (path,) = [p for p in (root / "index").iterdir() if p.name.isdigit()]
        builder = store.reader._builder  # the test looks inside on purpose
        assert builder is not None
        keys = builder.keys_indexed
        os.truncate(path, 100)
        with caplog.at_level(logging.WARNING):
            for i in range(1, 5):
                (done,) = store.put([_record(i)])
                assert store.reader.commitlog.read_record(done.offset) is not None
        assert sum(store.reader.max_offset("T", q) for q in range(4)) == 5
        assert builder.keys_indexed == keys, "no write through the cut file's map"
        cut = [r.getMessage() for r in caplog.records if "cut short to 100" in r.getMessage()]
        assert len(cut) == 1, cut


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (bytes(40), "zeroed or overwritten (its header's indexCount went down)"),
        # another file's begin timestamp and offset, this one's counts and ends (as a copy would give)
        (None, "overwritten with another file's bytes (its header's begin values changed)"),
    ],
    ids=["zeroed", "other-begins"],
)
def test_an_index_header_changed_under_a_writable_store_is_said_at_the_next_put(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, header: bytes | None, said: str
) -> None:
    """The settle's audit compares the index file's header on disk with the writer's own; when the
    bytes are the writer's it takes them as they are (``IndexFile.index_count_as_written``), so a
    header changed under it (zeroed, or another file's begin values) must still be told apart at the
    next put's audit."""
    root = tmp_path / "s"
    with _open(root) as store:
        for i in range(3):
            store.put([_record(i)])
        (path,) = [p for p in (root / "index").iterdir() if p.name.isdigit()]
        if header is None:
            ours = bytearray(path.read_bytes()[:40])
            ours[0:8] = (1).to_bytes(8, "big")  # beginTimestamp
            ours[16:24] = (7).to_bytes(8, "big")  # beginPhyOffset
            header = bytes(ours)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, header, 0)
        finally:
            os.close(fd)
        with caplog.at_level(logging.WARNING):
            store.put([_record(3)])
        told = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        assert len(told) == 1, [r.getMessage() for r in caplog.records]
