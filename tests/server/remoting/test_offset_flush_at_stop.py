"""The stop's save of the committed offsets waits for a periodic save still under way.

The periodic flush runs on an executor thread; the stop cancelled the wait for it, not the flush,
and the stop's own save then wrote ``consumerOffset.json`` at the same time (one of them logged
``cannot write ... consumerOffset.json.tmp: No such file or directory``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path

import pytest

import server.remoting.write_path as write_path_module
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import WritePath
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig


async def test_the_stop_saves_offsets_after_the_periodic_save_not_alongside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_path_module, "OFFSET_FLUSH_MS", 20)
    config = StoreConfig.for_store(tmp_path, mapped_file_size_commit_log=1 << 20)
    store = WritableStore(config, clock=itertools.count(1_700_000_000_000).__next__)
    hook = WritePath(store)
    server = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=hook)
    broker = hook.broker
    real_flush = broker.flush
    guard = threading.Lock()
    started = threading.Event()
    counts = {"active": 0, "most": 0, "calls": 0}

    def tracked_flush() -> None:
        with guard:
            counts["active"] += 1
            counts["most"] = max(counts["most"], counts["active"])
            counts["calls"] += 1
            first = counts["calls"] == 1
        try:
            if first:
                started.set()
                time.sleep(0.3)  # a slow disk: the stop comes while this save is under way
            real_flush()
        finally:
            with guard:
                counts["active"] -= 1

    broker.flush = tracked_flush  # type: ignore[method-assign]
    await server.start()
    try:
        broker.commit_offset("G", "T", 0, 5)
        for _ in range(500):
            if started.is_set():
                break
            await asyncio.sleep(0.01)
        assert started.is_set()
        broker.commit_offset("G", "T", 0, 9)  # after the periodic save's snapshot
    finally:
        await server.stop()
        store.close()
    assert counts["most"] == 1
    assert counts["calls"] == 2
    saved = ConsumerOffsetTable.load(tmp_path / "config" / "consumerOffset.json")
    assert saved.query("G", "T", 0) == 9
