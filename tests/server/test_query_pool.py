"""Expensive key queries run off the event loop, with bounded work, and never hold up other requests.

The store holds key ``hot`` written ``HOT`` times (one chain of exactly that many entries, see
tests/support/hot_key.py); a query for the time range of its first write walks all of it.
Work is shown by entries visited and by which thread visited them, never by wall time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.app import QueryServer, ServerSettings
from server.query_pool import DEFAULT_QUERY_THREADS, OVERLOAD_REMARK, QueryPool
from server.remoting.processors.query_message import QUERY_NOT_FOUND_REMARK, QueryMessageProcessor
from store.config.store_config import StoreConfig
from store.message_store import MessageStore, QueryMessageResult
from tests.support.harness import RawClient
from tests.support.hot_key import HOT, T0, write_hot_key_store

MAX = 2**63 - 1


@pytest.fixture(scope="module")
def hot_config(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    return write_hot_key_store(tmp_path_factory.mktemp("hot") / "store")


class RecordingStore:
    """The real store, noting (thread id, entries visited, budget ran out) of every key query."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.calls: list[tuple[int, int, bool]] = []
        #: Whether each call continued an earlier one (a ``resume`` point passed).
        self.resumed: list[bool] = []
        self.release: threading.Event | None = None

    def query_message(self, *args: Any, **kwargs: Any) -> QueryMessageResult:
        self.resumed.append(kwargs.get("resume") is not None)
        result = self.store.query_message(*args, **kwargs)
        self.calls.append((threading.get_ident(), result.visited, result.budget_exhausted))
        if self.release is not None and threading.get_ident() != threading.main_thread().ident:
            assert self.release.wait(10), "the test never let the pool query finish"
        return result

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        return self.store.view_message_copy(offset, max_size)

    def topics(self) -> set[str]:
        return self.store.topics()


@pytest.fixture
def recording(hot_config: StoreConfig) -> Iterator[RecordingStore]:
    with MessageStore.open(hot_config) as store:
        yield RecordingStore(store)


def oldest_query(opaque: int = 1) -> RemotingCommand:
    """QUERY_MESSAGE for ``hot`` over the second of its first write only: walks the whole chain."""
    fields = {"topic": "TopicH", "key": "hot", "maxNum": "64", "beginTimestamp": str(T0),
              "endTimestamp": str(T0 + 999)}  # fmt: skip
    return RawClient.request(RequestCode.QUERY_MESSAGE, fields, opaque=opaque)


def test_the_pool_is_sized_like_the_brokers_query_executor() -> None:
    import os

    assert DEFAULT_QUERY_THREADS == 8 + (os.cpu_count() or 1)  # BrokerConfig.queryMessageThreadPoolNums


async def test_a_long_walk_is_cut_short_on_the_loop_and_redone_in_the_pool(recording: RecordingStore) -> None:
    pool = QueryPool(2)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, budget=10_000, inline_budget=50)
        pending = processor.query_message(oldest_query())
        assert not isinstance(pending, RemotingCommand), "too long for the loop: handed to the pool"
        response = await pending  # type: ignore[misc]
    finally:
        pool.close()
    loop_thread = threading.get_ident()
    (inline_thread, inline_visited, inline_cut), (pool_thread, pool_visited, pool_cut) = recording.calls
    assert (inline_thread, inline_visited, inline_cut) == (loop_thread, 50, True)
    assert pool_thread != loop_thread and (pool_visited, pool_cut) == (HOT, False)
    assert response.code == ResponseCode.SUCCESS and b"body-0" in bytes(response.body or b"")


async def test_the_pool_continues_the_inline_walk_where_it_stopped(recording: RecordingStore) -> None:
    """The loop's 50 entries are not read again: the pool call resumes there, and the answer is the
    one a single uninterrupted query gives (records, last-update values, entries counted)."""
    pool = QueryPool(1)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, budget=10_000, inline_budget=50)
        response = await processor.query_message(oldest_query())  # type: ignore[misc]
    finally:
        pool.close()
    assert recording.resumed == [False, True]
    assert [c[1:] for c in recording.calls] == [(50, True), (HOT, False)]
    whole = recording.store.query_message("TopicH", "hot", 64, T0, T0 + 999)
    assert response.body == b"".join(whole.buffers)
    assert response.ext_fields == {
        "indexLastUpdateTimestamp": str(whole.index_last_update_timestamp),
        "indexLastUpdatePhyoffset": str(whole.index_last_update_phyoffset),
    }


async def test_the_inline_walk_stops_at_its_deadline_and_the_pool_finishes_it(
    recording: RecordingStore,
) -> None:
    """An inline deadline already past when the walk looks at the clock (after 256 entries): the
    pool continues from there, whatever the inline entry budget."""
    pool = QueryPool(1)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, budget=10_000, inline_budget=5_000,
                                          inline_seconds=1e-9)  # fmt: skip
        response = await processor.query_message(oldest_query())  # type: ignore[misc]
    finally:
        pool.close()
    assert recording.resumed == [False, True]
    assert [c[1:] for c in recording.calls] == [(256, True), (HOT, False)]
    assert response.code == ResponseCode.SUCCESS and b"body-0" in bytes(response.body or b"")


async def test_a_short_walk_is_answered_inline(recording: RecordingStore) -> None:
    pool = QueryPool(1)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, inline_budget=2048)
        request = RawClient.request(
            RequestCode.QUERY_MESSAGE,
            {
                "topic": "TopicH",
                "key": "hot",
                "maxNum": "64",
                "beginTimestamp": "0",
                "endTimestamp": str(MAX),
            },
        )
        response = processor.query_message(request)
    finally:
        pool.close()
    assert isinstance(response, RemotingCommand) and response.code == ResponseCode.SUCCESS
    assert recording.calls == [(threading.get_ident(), 64, False)]


async def test_a_walk_over_budget_is_answered_like_a_partial_walk(recording: RecordingStore) -> None:
    pool = QueryPool(1)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, budget=120, inline_budget=50)
        response = await processor.query_message(oldest_query())  # type: ignore[misc]
    finally:
        pool.close()
    assert [c[1:] for c in recording.calls] == [(50, True), (120, True)]
    assert (response.code, response.remark) == (ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)
    assert set(response.ext_fields or {}) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}


async def test_other_connections_are_answered_while_a_query_runs_in_the_pool(
    recording: RecordingStore, hot_config: StoreConfig
) -> None:
    """The pool query is held until a VIEW on another connection was answered: the loop is free."""
    recording.release = threading.Event()
    settings = ServerSettings(host="127.0.0.1", port=0, query_threads=2)
    server = QueryServer(recording, settings)
    await server.start()
    assert server.dispatcher is not None
    # The real server's processor with a small inline budget, so the 300-entry walk goes to the pool.
    processor = QueryMessageProcessor(recording, pool=server.query_pool, inline_budget=50)
    server.dispatcher.register(RequestCode.QUERY_MESSAGE, processor.query_message)
    slow = await RawClient.connect("127.0.0.1", server.port)
    fast = await RawClient.connect("127.0.0.1", server.port)
    try:
        await slow.send(oldest_query(opaque=7))
        while len(recording.calls) < 2:  # the inline attempt, then the pool's (held at release)
            await asyncio.sleep(0.01)
        offset = recording.store.query_message("TopicH", "hot", 1, 0, MAX).buffers[0]
        view_offset = int.from_bytes(bytes(offset[28:36]), "big")
        view = await fast.call(
            RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(view_offset)})
        )
        assert view.code == ResponseCode.SUCCESS
        # And the same connection keeps being served while its own earlier query is out.
        again = await slow.call(
            RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(view_offset)})
        )
        assert again.code == ResponseCode.SUCCESS
        recording.release.set()
        answer = await slow.receive()
        assert answer.opaque == 7 and answer.code == ResponseCode.SUCCESS
        assert b"body-0" in bytes(answer.body or b"")
    finally:
        recording.release.set()
        await slow.close()
        await fast.close()
        await server.stop()


async def test_a_full_pool_refuses_like_the_brokers_rejected_executor(recording: RecordingStore) -> None:
    recording.release = threading.Event()
    pool = QueryPool(1, capacity=1)
    try:
        processor = QueryMessageProcessor(recording, pool=pool, budget=10_000, inline_budget=50)
        first = asyncio.ensure_future(processor.query_message(oldest_query(1)))  # type: ignore[arg-type]
        while pool.pending < 1:
            await asyncio.sleep(0.01)
        refused = processor.query_message(oldest_query(2))
        assert isinstance(refused, RemotingCommand)
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        recording.release.set()
        assert (await first).code == ResponseCode.SUCCESS
        assert pool.pending == 0
        again = await processor.query_message(oldest_query(3))  # type: ignore[misc]
        assert again.code == ResponseCode.SUCCESS, "room again once the first query finished"
    finally:
        recording.release.set()
        pool.close()
