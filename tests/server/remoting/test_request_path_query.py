"""The compiled QUERY_MESSAGE loop (``server/remoting/_query_loop.h``) answers as the Python path.

The same reads go to a connection with the compiled request path and to one without it (the
reference); the bytes written must be the same (answers from the query pool may come in another
order: those are compared as sorted frames). Over a hot key whose chain crosses 11 IndexFiles
(``tests/support/hot_window.py``: every time range there, maxNum 0/1/3/16/64), with the pool and
inline budgets from 1 entry up (the pool continuing each walk from where the inline one stopped),
a full pool, CommitLog records torn or cut away under the map, and stores being written while they
are queried (a read-only index growing under a writer, and an index this process builds). The
records answered are also checked against the broker's rule written out (``java_query_offsets``).
Whether the compiled loop answered, handed off or gave a query to the Python callback is counted,
so a test knows which path it exercised. ``RMQ_PURE_PYTHON=1`` has no compiled path: these skip.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode
from server.app import ServerSettings, build_dispatcher
from server.identity import BrokerIdentity
from server.query_pool import QueryPool
from server.remoting import request_path
from server.remoting.connection import RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.query_message import QueryMessageProcessor
from server.request_stats import RequestStats
from store.config.store_config import StoreConfig
from store.message_store import RSS_CHECK_EVERY_RECORDS, MessageStore
from store.write.writer import StoreWriter
from tests.support.hot_window import (
    HOT,
    MAX,
    T0,
    TOPIC,
    fingerprint,
    java_query_offsets,
    windows,
    write_hot_window_store,
)
from tests.support.request_path import Recorder, query, split_frames
from tests.support.walked_segments import short_segments

pytestmark = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled request path is not in use")

QUERY = int(RequestCode.QUERY_MESSAGE)
IDENTITY = BrokerIdentity(
    cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
)


class Counts:
    """How the compiled path's queries went: given to the Python callback, or handed to the pool."""

    def __init__(self, path: request_path.RequestPath) -> None:
        self.fallback = self.handoff = 0
        callback, handoff, snapshot = path._query_arg

        def counted_callback(*args: Any) -> Any:
            self.fallback += 1
            return callback(*args)

        def counted_handoff(*args: Any) -> Any:
            self.handoff += 1
            return handoff(*args)

        path._query_arg = (counted_callback, counted_handoff, snapshot)


def dispatcher_for(
    store: MessageStore, compiled: bool, pool: QueryPool | None = None, **kwargs: Any
) -> tuple[Dispatcher, Counts | None]:
    dispatcher = build_dispatcher(store, IDENTITY, ServerSettings())
    counts = None
    if pool is not None or kwargs:
        processor = QueryMessageProcessor(store, pool=pool, **kwargs)
        dispatcher.register(QUERY, processor.query_message)
        dispatcher.fast_path = request_path.RequestPath(store, processor.view_max_size, dispatcher, processor)
    if compiled:
        assert dispatcher.fast_path is not None
        counts = Counts(dispatcher.fast_path)  # type: ignore[arg-type]
    else:
        dispatcher.fast_path = None
    dispatcher.stats = RequestStats()
    return dispatcher, counts


def run(dispatcher: Dispatcher, reads: list[bytes]) -> tuple[bytes, list[str], dict[int, int]]:
    """Feed ``reads`` to a fresh connection and wait (bounded) for answers from the pool."""

    async def go() -> tuple[bytes, list[str], dict[int, int]]:
        transport = Recorder()
        connection = RemotingConnection(dispatcher, idle_timeout=0)
        transport.protocol = connection
        connection.connection_made(transport)  # type: ignore[arg-type]
        for data in reads:
            connection.data_received(data)
        for _ in range(500):
            if not connection.in_flight:
                break
            await asyncio.sleep(0.01)
        assert not connection.in_flight
        connection.connection_lost(None)
        return bytes(transport.data), transport.calls, dict(dispatcher.stats.requests)

    return asyncio.run(go())


def both_ways(
    store: MessageStore, reads: list[bytes], pool_threads: int = 0, **kwargs: Any
) -> tuple[bytes, Counts]:
    """The same reads answered with and without the compiled path: the same frames (sorted when a
    pool may reorder them), calls and request counts. (answers, the compiled side's counts)."""
    answers = []
    counts = None
    for compiled in (True, False):
        pool = QueryPool(pool_threads) if pool_threads else None
        try:
            dispatcher, c = dispatcher_for(store, compiled, pool, **kwargs)
            answers.append(run(dispatcher, reads))
            counts = c or counts
        finally:
            if pool is not None:
                pool.close()
    (got, got_calls, got_counts), (want, want_calls, want_counts) = answers
    if pool_threads:
        assert sorted(split_frames(got)) == sorted(split_frames(want))
    else:
        assert got == want
    assert (got_calls, got_counts) == (want_calls, want_counts)
    assert counts is not None
    return got, counts


def record_offsets(answer: bytes) -> list[int]:
    """The CommitLog offsets (PHYSICALOFFSET) of the records in one answer frame's body."""
    length, header_length = struct.unpack_from(">iI", answer, 0)
    body = answer[8 + (header_length & 0xFFFFFF) : 4 + length]
    out, pos = [], 0
    while pos < len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        out.append(struct.unpack_from(">q", body, pos + 28)[0])
        pos += size
    return out


@pytest.fixture(scope="module")
def hot_config(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    return write_hot_window_store(tmp_path_factory.mktemp("hot-window") / "store")


@pytest.fixture(scope="module")
def hot_store(hot_config: StoreConfig) -> Iterator[MessageStore]:
    with MessageStore.open(hot_config) as s:
        yield s


def window_frames(config: StoreConfig) -> list[tuple[bytes, list[int]]]:
    """Each window's QUERY and the offsets the broker's rule answers for it (ascending)."""
    out = []
    for i, (max_num, begin, end) in enumerate(windows(config)):
        frame = query(
            TOPIC, HOT, opaque=i, maxNum=str(max_num), beginTimestamp=str(begin), endTimestamp=str(end)
        )
        out.append((frame, sorted(java_query_offsets(config, TOPIC, HOT, max_num, begin, end)[0])))
    return out


def test_every_time_range_over_many_index_files(hot_config: StoreConfig, hot_store: MessageStore) -> None:
    cases = window_frames(hot_config)
    frames = [f for f, _ in cases]
    reads = [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)]
    out, counts = both_ways(hot_store, reads)
    assert counts.fallback == 0 and counts.handoff == 0  # every one answered by the compiled loop
    answers = split_frames(out)
    assert len(answers) == len(cases)
    found = 0
    for answer, (_, want) in zip(answers, cases, strict=True):
        # The first round finds the rule's offsets (none of them torn here): those records, in order.
        assert record_offsets(answer) == want
        found += bool(want)
    assert found > 100


@pytest.mark.parametrize("inline_budget", [1, 2, 3, 7, 50, 255, 256, 257, 1000, 5000])
def test_budgets_hand_off_to_the_pool_which_continues(hot_store: MessageStore, inline_budget: int) -> None:
    """Stopped at every kind of point (first entry, mid-chain, between files, past the deadline's
    256-entry look), the pool continues the walk: the answers are the Python path's."""
    ranges = [(0, MAX), (T0 + 3_000, T0 + 140_000), (T0 + 20_000, T0 + 29_999), (T0 + 500, T0 + 1_499)]
    frames = [
        query(TOPIC, HOT, opaque=i * 10 + n, maxNum=str(n), beginTimestamp=str(b), endTimestamp=str(e))
        for i, (b, e) in enumerate(ranges)
        for n in (1, 16, 64)
    ]
    _, counts = both_ways(hot_store, [b"".join(frames)], pool_threads=2, inline_budget=inline_budget)
    if inline_budget < 50:
        assert counts.handoff > 0
    assert counts.fallback == 0


def test_a_deadline_is_looked_at_after_256_entries_of_a_walk(hot_store: MessageStore) -> None:
    """A deadline already past when the query starts: each chain walk here is under 256 entries (600
    entries a file), so no walk looks at the clock and none is handed off, as on the Python path."""
    frames = [
        query(TOPIC, HOT, opaque=i, beginTimestamp=str(T0 + 500), endTimestamp=str(T0 + 1_499))
        for i in range(4)
    ]
    _, counts = both_ways(hot_store, [b"".join(frames)], pool_threads=1, inline_seconds=1e-9)
    assert counts.handoff == 0 and counts.fallback == 0


def test_a_full_pool_refuses_system_busy(hot_store: MessageStore) -> None:
    class FullPool(QueryPool):
        @property
        def full(self) -> bool:
            return True

    frames = b"".join(query(TOPIC, HOT, opaque=i) for i in range(5))
    outs = []
    for compiled in (True, False):
        pool = FullPool(1)
        try:
            dispatcher, _ = dispatcher_for(hot_store, compiled, pool, inline_budget=3)
            outs.append(run(dispatcher, [frames]))
        finally:
            pool.close()
    assert outs[0] == outs[1]
    assert outs[0][0].count(b'"code":2,') == 5  # SYSTEM_BUSY


def copy_store(config: StoreConfig, into: Path) -> StoreConfig:
    root = into / "store"
    shutil.copytree(config.store_path_root_dir, root)
    return StoreConfig.for_store(
        root,
        broker_ip1="127.0.0.1",
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
        mapped_file_size_commit_log=config.mapped_file_size_commit_log,
    )


def test_torn_and_cut_records_go_to_the_python_path(hot_config: StoreConfig, tmp_path: Path) -> None:
    """A hit on a record torn in place (the store warns: damage) and one in a CommitLog file cut
    short under the map (the store reports the shrink): the Python path answers those, alike."""
    config = copy_store(hot_config, tmp_path)
    frames = b"".join(query(TOPIC, HOT, opaque=i) for i in range(3))
    with MessageStore.open(config) as store:
        first = record_offsets(split_frames(both_ways(store, [frames])[0])[0])
        files = sorted(config.store_path_commit_log.iterdir())
        size = config.mapped_file_size_commit_log
        # Tear one hit's record: its magic code zeroed.
        torn = first[len(first) // 2]
        with open(files[torn // size], "r+b") as f:
            f.seek(torn % size + 4)
            f.write(b"\0\0\0\0")
        out, counts = both_ways(store, [frames])
        assert counts.fallback == 3 and torn not in record_offsets(split_frames(out)[0])
        # Cut the file of the newest hit short, under the map.
        newest = max(first)
        with open(files[newest // size], "r+b") as f:
            f.truncate(newest % size)
        out, counts = both_ways(store, [frames])
        assert counts.fallback == 3 and newest not in record_offsets(split_frames(out)[0])


def test_a_store_written_while_it_is_queried(hot_config: StoreConfig, tmp_path: Path) -> None:
    """A writer appends keyed records (its index grows) between batches; each batch sees what the
    last refresh saw, the same both ways."""
    config = copy_store(hot_config, tmp_path)
    frames = b"".join(query(TOPIC, key, opaque=i) for i, key in enumerate([HOT, "fresh", "k-7"]))
    clock = [T0 + 10**7]

    def tick() -> int:
        clock[0] += 3
        return clock[0]

    with MessageStore.open(config) as store:
        before = split_frames(both_ways(store, [frames])[0])
        assert b'"code":22,' in before[1]  # "fresh" is not there yet
        for n in range(3):
            with StoreWriter(config, clock=tick) as writer:  # its index is on disk once it closes
                for m in range(40):
                    writer.append(TOPIC, f"fresh {n} {m}".encode(), keys=f"fresh {HOT}", unique_key=False)
            store.refresh()
            out, counts = both_ways(store, [frames])
            assert counts.fallback == 0
            assert len(record_offsets(split_frames(out)[1])) == min(64, 40 * (n + 1))


def test_an_index_this_process_builds(hot_config: StoreConfig, tmp_path: Path) -> None:
    """A store whose index this process writes (``build_index``: the writer's own headers are
    read, not the files'), growing between batches."""
    config = copy_store(hot_config, tmp_path)
    shutil.rmtree(config.index_dir)
    frames = b"".join(query(TOPIC, key, opaque=i) for i, key in enumerate([HOT, "late", "k-9"]))
    clock = [T0 + 10**7]

    def tick() -> int:
        clock[0] += 5
        return clock[0]

    with MessageStore.open(config, build_index=True) as store:
        assert store.index.writable
        out, counts = both_ways(store, [frames])
        assert counts.fallback == 0 and len(record_offsets(split_frames(out)[0])) == 64
        for n in range(2):
            with StoreWriter(config, clock=tick, index=False, consume_queues=False) as writer:
                for m in range(30):
                    writer.append(TOPIC, f"late {n} {m}".encode(), keys="late", unique_key=False)
            store.refresh()
            out, counts = both_ways(store, [frames])
            assert counts.fallback == 0
            assert len(record_offsets(split_frames(out)[1])) == 30 * (n + 1)


def test_hash_collisions_and_other_topics_are_answered_as_the_broker_does(
    hot_config: StoreConfig, tmp_path: Path
) -> None:
    """ "Aa" and "BB" have the same Java hash, so "<topic>#Aa" and "<topic>#BB" share every index
    entry: the broker answers a query for either with both keys' records (the client filters). The
    same key in another topic hashes elsewhere and is not among them."""
    config = copy_store(hot_config, tmp_path)
    with StoreWriter(config, clock=lambda: T0 + 10**7) as writer:
        for n in range(6):
            writer.append(TOPIC, f"aa {n}".encode(), keys="Aa", unique_key=False)
            writer.append("OtherTopic", f"other {n}".encode(), keys="BB", unique_key=False)
    frames = b"".join(query(t, k, opaque=i) for i, (t, k) in enumerate([(TOPIC, "BB"), ("OtherTopic", "BB")]))
    with MessageStore.open(config) as store:
        out, counts = both_ways(store, [frames])
    answers = split_frames(out)
    assert counts.fallback == 0
    assert len(record_offsets(answers[0])) == 6 and b"aa 0" in answers[0] and b"other" not in answers[0]
    assert len(record_offsets(answers[1])) == 6 and b"other 0" in answers[1]


def test_served_bytes_are_counted_as_the_python_path_counts_them(
    hot_config: StoreConfig, hot_store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's page-release accounting (``MessageStore._served``: record bytes and a page
    each, records and index entries read) adds up to the same totals whichever path answered."""
    frames = [f for f, _ in window_frames(hot_config)[:40]]
    reads = [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)]
    totals = []
    for compiled in (True, False):
        counted = [0, 0]
        served = hot_store._served

        def counting(nbytes: int, records: int, served: Any = served, counted: list[int] = counted) -> None:
            counted[0] += nbytes
            counted[1] += records
            served(nbytes, records)

        monkeypatch.setattr(hot_store, "_served", counting)
        dispatcher, _ = dispatcher_for(hot_store, compiled)
        run(dispatcher, reads)
        monkeypatch.undo()
        totals.append(tuple(counted))
    # The Python path's query_message counts each query's look at resident memory
    # (RSS_CHECK_EVERY_RECORDS) beside _served; the compiled path hands it to _served with the rest.
    python = (totals[1][0], totals[1][1] + RSS_CHECK_EVERY_RECORDS * len(frames))
    assert totals[0] == python and totals[0][0] > 0 and totals[0][1] > 0


def test_every_compiled_query_is_due_a_look_at_resident_memory(
    hot_store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MessageStore.query_message`` makes every key query due a look at the process's resident
    pages (``RSS_CHECK_EVERY_RECORDS`` counted per query, besides its records and entries): a batch
    of queries the compiled loop answers is due one too, even when nothing was found or read."""
    reads = [b"".join(query(TOPIC, f"no-such-key-{i}", opaque=i) for i in range(4))]
    for compiled in (True, False):
        looks = []

        def look(looks: list[int] = looks) -> bool:
            looks.append(1)
            return False

        monkeypatch.setattr(hot_store, "_resident_over_limit", look)
        hot_store._records_since_check = 0
        dispatcher, counts = dispatcher_for(hot_store, compiled)
        out, _, _ = run(dispatcher, reads)
        monkeypatch.undo()
        assert out.count(b'"code":22') == 4, out  # QUERY_NOT_FOUND
        if counts is not None:
            assert counts.fallback == counts.handoff == 0
        assert looks, f"compiled={compiled}: no look at resident memory"


def test_handed_off_queries_are_counted_as_the_python_path_counts_them(
    hot_config: StoreConfig, hot_store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With queries the inline budget stops and the pool continues, the records, bytes and looks at
    resident memory counted (``_served``, and ``query_message``'s ``RSS_CHECK_EVERY_RECORDS`` per
    call) add up the same whichever path answered."""
    frames = [f for f, _ in window_frames(hot_config)[:24]]
    totals = []
    for compiled in (True, False):
        counted = [0, 0]
        served, query_message = hot_store._served, hot_store.query_message

        def counting(nbytes: int, records: int, served: Any = served, counted: list[int] = counted) -> None:
            counted[0] += nbytes
            counted[1] += records
            served(nbytes, records)

        def calls(*args: Any, run_query: Any = query_message, counted: list[int] = counted, **kw: Any) -> Any:
            counted[1] += RSS_CHECK_EVERY_RECORDS
            return run_query(*args, **kw)

        monkeypatch.setattr(hot_store, "_served", counting)
        monkeypatch.setattr(hot_store, "query_message", calls)
        pool = QueryPool(2)
        try:
            dispatcher, counts = dispatcher_for(hot_store, compiled, pool, inline_budget=3)
            run(dispatcher, [b"".join(frames)])
        finally:
            pool.close()
            monkeypatch.undo()
        if counts is not None:
            assert counts.handoff > 0 and counts.fallback == 0
        totals.append(tuple(counted))
    assert totals[0] == totals[1]


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "hot_window_4.9.7.json"


def test_the_real_brokers_answers_over_the_compiled_path(
    hot_config: StoreConfig, hot_store: MessageStore
) -> None:
    """Each range the real 4.9.7 broker answered on this very store (``hot_window_4.9.7.json``):
    the compiled path's answer has the broker's code, last-update values and records (offset and
    sha256 of each)."""
    if not GOLDEN.exists():
        pytest.skip(f"{GOLDEN.name} not recorded")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden["storeSha256"] == fingerprint(hot_config), "the store differs from the one recorded"
    frames = [
        query(q["topic"], q["key"], opaque=i, maxNum=str(q["maxNum"]), beginTimestamp=str(q["begin"]),
              endTimestamp=str(q["end"]))
        for i, q in enumerate(golden["queries"])
    ]  # fmt: skip
    dispatcher, counts = dispatcher_for(hot_store, True)
    out, _, _ = run(dispatcher, [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)])
    assert counts is not None and counts.fallback == 0
    answers = split_frames(out)
    assert len(answers) == len(golden["queries"])
    for answer, q in zip(answers, golden["queries"], strict=True):
        length, header_length = struct.unpack_from(">iI", answer, 0)
        header = json.loads(answer[8 : 8 + (header_length & 0xFFFFFF)])
        body = answer[8 + (header_length & 0xFFFFFF) : 4 + length]
        records, pos = [], 0
        while pos < len(body):
            (size,) = struct.unpack_from(">i", body, pos)
            record = body[pos : pos + size]
            records.append([struct.unpack_from(">q", record, 28)[0], hashlib.sha256(record).hexdigest()])
            pos += size
        label = (q["maxNum"], q["begin"], q["end"])
        assert (header["code"], records) == (q["code"], q["records"]), label
        fields = header["extFields"]
        assert fields["indexLastUpdateTimestamp"] == q["indexLastUpdateTimestamp"], label
        assert fields["indexLastUpdatePhyoffset"] == q["indexLastUpdatePhyoffset"], label


def test_every_inline_budget_of_one_walk(hot_store: MessageStore) -> None:
    """One query across many files, stopped inline after each number of entries from 1 to past its
    whole walk: every stop point continued by the pool answers as the Python path does."""
    begin, end = T0 + 3_000, T0 + 140_000
    whole = hot_store.index.query_offsets(TOPIC, HOT, 64, begin, end).visited
    frames = b"".join(
        query(TOPIC, HOT, opaque=n, maxNum=str(n), beginTimestamp=str(begin), endTimestamp=str(end))
        for n in (1, 64)
    )
    handed = 0
    for budget in [*range(1, whole + 2, 3), whole - 1, whole, whole + 1]:
        _, counts = both_ways(hot_store, [frames], pool_threads=1, inline_budget=budget)
        assert counts.fallback == 0
        handed += counts.handoff
    assert whole > 100 and handed > whole // 3


def test_every_time_range_again_once_the_walked_segments_are_cached(hot_config: StoreConfig) -> None:
    """The compiled loop's walks pass over cached chain segments (``_query_walk_core.h``, "Walked
    segments"; recorded every 4 entries here): the windows asked three times, in order and shuffled,
    inline and with the pool continuing walks stopped after 50 entries, answer as the broker's rule,
    as the Python path, and the cache is used."""
    cases = window_frames(hot_config)
    rng = random.Random(22)
    with short_segments() as skipped, MessageStore.open(hot_config) as store:
        before = skipped()
        for round_ in range(3):
            order = cases if round_ == 0 else rng.sample(cases, len(cases))
            frames = [f for f, _ in order]
            reads = [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)]
            dispatcher, counts = dispatcher_for(store, True)
            out, _, _ = run(dispatcher, reads)
            assert counts is not None and counts.fallback == 0 and counts.handoff == 0
            answers = split_frames(out)
            assert [record_offsets(a) for a in answers] == [want for _, want in order], round_
        _, counts = both_ways(store, reads, pool_threads=2, inline_budget=50)
        assert counts.handoff > 0 and counts.fallback == 0
        assert skipped() - before > 1_000, "the cached segments were not used"
