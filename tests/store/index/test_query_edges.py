"""Edge cases of reads and queries: deleted CommitLog files (the broker's retry rule), garbage
offsets, views held across an RSS trim, and a builder following a CommitLog being written."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.index.builder import IndexBuilder, rebuild_index
from store.message_store import MessageStore
from store.reput.walk import Reput
from store.write.writer import StoreWriter
from tests.support.store_copy import writable_copy

MAX = 2**63 - 1


def _copy(config: StoreConfig, tmp_path: Path) -> StoreConfig:
    return writable_copy(config, tmp_path / "s")


def test_hits_in_deleted_commitlog_files(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    config, expected = golden_stores[0]
    copy = _copy(config, tmp_path)
    (copy.store_path_commit_log / f"{0:020d}").unlink()  # retention deleted the oldest file
    first = expected["messages"][0]
    with MessageStore.open(copy) as store:
        assert store.commitlog.min_offset == copy.mapped_file_size_commit_log
        assert store.view_message(first["commitLogOffset"]) is None
        # Only record 0 carries this unique key: its one hit is unreadable, so nothing is returned,
        # but the index fields are still reported (the broker sets them once offsets were found).
        result = store.query_message(first["topic"], first["uniqKey"], 32, 0, MAX)
        assert result.buffers == []
        assert (
            result.index_last_update_phyoffset
            == expected["storeInfoAfterReload"]["indexFiles"][-1]["endPhyOffset"]
        )
        # A key with hits on both sides of the gap returns the readable ones.
        q = next(
            q
            for q in expected["queries"]
            if q["label"] == "kN" and q["key"] == "k-0" and q["topic"] == "TopicA"
        )
        got = [
            int.from_bytes(b[28:36], "big") for b in store.query_message("TopicA", "k-0", 64, 0, MAX).buffers
        ]
        assert got == [r["commitLogOffset"] for r in q["results"] if r["commitLogOffset"] >= 262144]


def test_garbage_offsets_never_raise(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    config, _ = golden_stores[0]
    rng = random.Random(5)
    with MessageStore.open(config) as store:
        end = store.commitlog.max_offset
        for offset in [-1, -(2**63), 2**63 - 1, end, end - 1, *(rng.randrange(end) for _ in range(3000))]:
            buf = store.view_message(offset)
            if buf is not None:
                assert 0 < len(buf) and offset + len(buf) <= end


def test_views_stay_valid_across_rss_trims(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    config, expected = golden_stores[0]
    with MessageStore.open(config, rss_trim_bytes=1) as store:  # trim after every call
        held = []
        for q in expected["queries"][:80]:
            if "exception" in q:
                continue
            result = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            held.append((result.buffers, [r["rawSha256"] for r in q["results"]]))
        for buffers, want in held:
            assert [hashlib.sha256(b).hexdigest() for b in buffers] == want


def test_builder_follows_a_live_commitlog(tmp_path: Path) -> None:
    config = StoreConfig.for_store(
        tmp_path / "live", mapped_file_size_commit_log=8192, max_hash_slot_num=16, max_index_num=50
    )
    writer_config = StoreConfig.for_store(
        config.store_path_root_dir, mapped_file_size_commit_log=8192, message_index_enable=False
    )
    writer = StoreWriter(writer_config)
    writer.append("F", b"first", keys="a b")
    builder = IndexBuilder(config)
    stop = threading.Event()
    reput = Reput(builder.commitlog, [builder])
    thread = threading.Thread(target=reput.run_forever, args=(stop, 0.01), daemon=True)
    thread.start()
    try:
        for i in range(300):
            writer.append("F", b"x" * (i % 90), keys=f"k{i} shared")
            if i % 50 == 0:
                time.sleep(0.01)
        writer.close()
        deadline = time.monotonic() + 10
        while builder.records_indexed < 301 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)
    builder.close()
    assert builder.records_indexed == 301
    live = [p.read_bytes() for p in sorted(config.index_dir.iterdir())]
    rebuild_index(config)
    assert [p.read_bytes() for p in sorted(config.index_dir.iterdir())] == live
