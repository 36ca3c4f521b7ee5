"""The consume queues a served store builds are synced off the event loop (issue 33's end-to-end p99).

Once the store's refresh catches up it syncs the consume queue files it wrote and records
``logicsMsgTimestamp``. Run on the event loop, those fsyncs held every SEND and held pull for up to
tens of milliseconds once a second (strace of ``serve --writable`` under 200 msgs/s: 128 fsyncs on
the loop's thread in 16 s, the longest 25 ms). The server's refresh loop now runs the sync in the
default executor, and the builder holds its lock only to note what to sync, so a dispatch on the loop
never waits for the disk either.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutContext, single_record
from server.broker.writable_store import WritableStore
from server.refresh import refresh_forever
from store.checkpoint import UPDATE_LOCK, Checkpoint
from store.config.store_config import StoreConfig
from store.consumequeue import builder as builder_module
from store.consumequeue.builder import ConsumeQueueBuilder

_CTX = PutContext("DefaultCluster", 4096, "127.0.0.1", 9)


def _record(i: int, queue_id: int) -> object:
    header = SendMessageRequestHeader("g", "T", "TBW102", 4, queue_id, 0, 1_700_000_000_000 + i, 0, "")
    return single_record(header, b"body-%d" % i, _CTX)


def _store(root: Path) -> WritableStore:
    store = WritableStore(StoreConfig.for_store(root, mapped_file_size_commit_log=64 * 1024))
    store.set_store_address("127.0.0.1", 10911)
    store.create_topic("T", 2)
    return store


async def test_the_refresh_loop_syncs_the_queues_on_another_thread(tmp_path: Path, monkeypatch) -> None:
    store = _store(tmp_path / "store")
    loop_thread = threading.get_ident()
    synced_on: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced_on.append(threading.get_ident())
        real_fsync(fd)

    try:
        monkeypatch.setattr(builder_module.os, "fsync", fsync)
        refreshing = asyncio.ensure_future(refresh_forever(store.reader, 0.01))
        appended = [store.put([_record(i, i % 2)])[0] for i in range(6)]
        for _ in range(500):  # the passes catch up, then one syncs (at most 5 s)
            await asyncio.sleep(0.01)
            if synced_on and not store.reader.flush_due:
                break
        refreshing.cancel()
        await asyncio.gather(refreshing, return_exceptions=True)
        assert synced_on, "no consume queue was synced"
        assert loop_thread not in synced_on
        checkpoint = Checkpoint.read_or_default(store.config.checkpoint_path)
        assert checkpoint.logics_msg_timestamp == appended[-1].store_timestamp
        assert not store.reader.defer_flush  # a close after the loop syncs on its own thread again
    finally:
        store.close()


def test_a_flush_holds_the_builders_lock_only_around_its_syncs(tmp_path: Path, monkeypatch) -> None:
    store = _store(tmp_path / "store")
    try:
        for i in range(4):
            store.put([_record(i, i % 2)])
        builder = store.reader._cq_builder
        assert isinstance(builder, ConsumeQueueBuilder)
        held_during_sync: list[bool] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            held_during_sync.append(builder._lock.locked())
            real_fsync(fd)

        monkeypatch.setattr(builder_module.os, "fsync", fsync)
        store.reader.flush_queues()
        assert held_during_sync and not any(held_during_sync)
    finally:
        store.close()


def test_a_flush_rewrites_the_checkpoint_under_the_shared_lock(tmp_path: Path) -> None:
    """The checkpoint page is rewritten whole by each writer: the flush, now on an executor thread,
    takes ``UPDATE_LOCK`` as the index builder does on the loop, so neither puts back the other's field."""
    store = _store(tmp_path / "store")
    try:
        appended = [store.put([_record(i, i % 2)])[0] for i in range(4)]
        path = store.config.checkpoint_path
        assert Checkpoint.read_or_default(path).logics_msg_timestamp != appended[-1].store_timestamp
        flushing = threading.Thread(target=store.reader.flush_queues)
        with UPDATE_LOCK:
            flushing.start()
            flushing.join(0.3)
            assert flushing.is_alive()  # synced, and waiting to rewrite the page
            assert Checkpoint.read_or_default(path).logics_msg_timestamp != appended[-1].store_timestamp
        flushing.join(10)
        assert not flushing.is_alive()
        assert Checkpoint.read_or_default(path).logics_msg_timestamp == appended[-1].store_timestamp
    finally:
        store.close()
