"""Serving a store that keeps growing: read-only refresh, and ``--build-index`` behind the CommitLog.

A writer appends to the CommitLog while the server runs. Read-only, the server picks up the index
entries the writer's own indexing adds; with ``build_index`` the writer only appends records (like a
broker with ``messageIndexEnable=false``) and the server's index builder must index them, so new
keys and new topics become answerable within a few refresh intervals.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from server.app import QueryServer, ServerSettings
from server.refresh import INDEX_SLICE_RECORDS, refresh_forever
from store.config.store_config import StoreConfig
from store.errors import ConsumeQueueWriteError
from store.message_store import MessageStore
from store.write.writer import StoreWriter
from tests.support.harness import RawClient

REFRESH = 0.05


def small_config(root: Path, *, index: bool) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=256,
        message_index_enable=index,
        broker_name="live-broker",
        broker_ip1="127.0.0.1",
    )


def query(topic: str, key: str) -> dict[str, str]:
    return {
        "topic": topic,
        "key": key,
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": "9223372036854775807",
    }


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "the server did not catch up with the growing store"
        await asyncio.sleep(REFRESH)


async def _serve(store: MessageStore) -> QueryServer:
    server = QueryServer(store, ServerSettings(host="127.0.0.1", port=0, broker_name="live-broker"))
    await server.start()
    server.run_in_background(lambda: refresh_forever(store, REFRESH))
    return server


async def test_read_only_serving_follows_a_growing_store(tmp_path: Path) -> None:
    config = small_config(tmp_path / "store", index=True)
    writer = StoreWriter(config)
    try:
        for i in range(20):
            writer.append("Live", f"body {i}".encode(), keys=f"live-{i} both")
        writer.index()
        store = MessageStore.open(config)
        server = await _serve(store)
        client = await RawClient.connect("127.0.0.1", server.port)
        try:
            first = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, query("Live", "live-3")))
            assert first.code == ResponseCode.SUCCESS
            assert (
                await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, query("Live", "live-150")))
            ).code == ResponseCode.QUERY_NOT_FOUND
            for i in range(20, 400):  # enough to roll CommitLog files and IndexFiles
                writer.append("Live", f"body {i}".encode() * 20, keys=f"live-{i} both")
            writer.index()

            async def found() -> bool:
                answer = await client.call(
                    RawClient.request(RequestCode.QUERY_MESSAGE, query("Live", "live-399"))
                )
                return answer.code == ResponseCode.SUCCESS

            await eventually(found)
            both = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, query("Live", "both")))
            assert int((both.ext_fields or {})["indexLastUpdatePhyoffset"]) > 0
        finally:
            await client.close()
            await server.stop()
            store.close()
    finally:
        writer.close()


async def test_build_index_keeps_up_behind_the_commitlog(tmp_path: Path) -> None:
    root = tmp_path / "store"
    writer = StoreWriter(small_config(root, index=False))  # appends records, never indexes
    try:
        for i in range(30):
            writer.append("Built", f"body {i}".encode(), keys=f"built-{i}")
        store = MessageStore.open(small_config(root, index=True), build_index=True)
        server = await _serve(store)
        client = await RawClient.connect("127.0.0.1", server.port)
        try:
            answer = await client.call(
                RawClient.request(RequestCode.QUERY_MESSAGE, query("Built", "built-7"))
            )
            assert answer.code == ResponseCode.SUCCESS  # indexed at open
            for i in range(30, 300):
                writer.append(
                    "Built" if i % 2 else "BuiltLater", f"body {i}".encode() * 30, keys=f"built-{i}"
                )

            async def caught_up() -> bool:
                later = await client.call(
                    RawClient.request(RequestCode.QUERY_MESSAGE, query("BuiltLater", "built-298"))
                )
                route = await client.call(
                    RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "BuiltLater"})
                )
                return later.code == route.code == ResponseCode.SUCCESS

            await eventually(caught_up)
            assert (root / "index").is_dir() and any((root / "index").iterdir())
        finally:
            await client.close()
            await server.stop()
            store.close()
    finally:
        writer.close()


async def test_refresh_indexes_a_backlog_in_slices_with_the_loop_free_between() -> None:
    class BackloggedStore:
        def __init__(self) -> None:
            self.calls: list[int | None] = []
            self.ticks_seen: list[int] = []

        def refresh(self, max_records: int | None = None) -> bool:
            self.calls.append(max_records)
            self.ticks_seen.append(ticks)
            return len(self.calls) < 5  # four slices leave a backlog, the fifth finishes it

    ticks = 0

    async def other_work() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    store = BackloggedStore()
    worker = asyncio.create_task(other_work())
    refresher = asyncio.create_task(refresh_forever(store, interval=3600))
    try:
        await eventually(lambda: asyncio.sleep(0, len(store.calls) >= 5), timeout=2.0)
    finally:
        refresher.cancel()
        worker.cancel()
    # every slice is bounded, the backlog is worked off without waiting for the hour-long interval,
    # and other tasks ran between consecutive slices
    assert store.calls[:5] == [INDEX_SLICE_RECORDS] * 5
    assert all(b > a for a, b in zip(store.ticks_seen, store.ticks_seen[1:5], strict=False))


async def test_build_index_serves_while_a_backlog_is_indexed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    writer = StoreWriter(small_config(root, index=False))  # appends records, never indexes
    total = 3 * INDEX_SLICE_RECORDS + 17
    try:
        for i in range(total):
            writer.append("Backlog", b"x", keys=f"b-{i}")
    finally:
        writer.close()
    store = MessageStore.open(small_config(root, index=True), build_index=True, catch_up=False)
    assert store.refresh(max_records=INDEX_SLICE_RECORDS) is True  # a bounded slice, more to come
    server = await _serve(store)
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        view = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
        assert view.code == ResponseCode.SUCCESS

        async def last_key_found() -> bool:
            answer = await client.call(
                RawClient.request(RequestCode.QUERY_MESSAGE, query("Backlog", f"b-{total - 1}"))
            )
            return answer.code == ResponseCode.SUCCESS

        await eventually(last_key_found, timeout=20.0)
        assert store.refresh(max_records=INDEX_SLICE_RECORDS) is False
    finally:
        await client.close()
        await server.stop()
        store.close()


async def test_a_queue_write_failing_on_a_full_disk_is_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Seen in the issue 18 soak: on a full disk every refresh pass of ``serve --writable`` raised the
    store's ``ConsumeQueueWriteError`` (expected: the entry is written again by the next pass, and the
    writable store has said at ERROR that it refuses SENDs meanwhile), and the refresh logged it at
    ERROR with its traceback each burst. It is a known state, said in one line; any other failure
    keeps its traceback."""

    class FullDiskStore:
        def __init__(self) -> None:
            self.calls = 0

        def refresh(self, max_records: int | None = None) -> bool:
            self.calls += 1
            if self.calls == 1:
                raise ConsumeQueueWriteError("consume queue T/0: No space left on device")
            raise RuntimeError("something else")

    store = FullDiskStore()
    caplog.set_level(logging.INFO, logger="server.refresh")
    refresher = asyncio.create_task(refresh_forever(store, interval=0.01))
    try:
        await eventually(lambda: asyncio.sleep(0, store.calls >= 2), timeout=2.0)
    finally:
        refresher.cancel()
    full = [r for r in caplog.records if "No space left on device" in r.getMessage()]
    assert len(full) == 1 and full[0].exc_info is None and full[0].levelno == logging.WARNING
    assert "written again from the CommitLog by the next pass" in full[0].getMessage()
    other = [r for r in caplog.records if r.exc_info is not None]
    assert len(other) == 1 and "something else" in str(other[0].exc_info[1])
