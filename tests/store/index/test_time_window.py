"""Key queries with a time range over a hot key whose chain crosses many IndexFiles.

The store and the broker's rule are ``tests/support/hot_window.py``'s. Every range there (cutting
through chains, on and around file boundaries, begin > end, outside every file, maxNum reached)
is answered as the rule answers it: the same offsets in the same order, the same last-update
values; and as the real 4.9.7 broker answered it (``tests/server/golden/hot_window_4.9.7.json``,
recorded by ``record_hot_window.py`` on the same store). A query the budget stops and a pool thread
continues (``resume``) answers exactly what one uninterrupted query answers. The module runs
against whichever ``query_files`` is loaded (compiled when built; ``RMQ_PURE_PYTHON=1`` for the
reference), and compares both twins directly where both are at hand.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import ResponseCode
from protocol.index_key import build_index_key, index_key_hash
from store.config.store_config import StoreConfig
from store.index import query_walk
from store.index.index_file import index_file_size
from store.message_store import MessageStore
from tests.support.hot_window import (
    HOT,
    MAX,
    T0,
    TOPIC,
    fingerprint,
    index_paths,
    java_query_offsets,
    windows,
    write_hot_window_store,
)
from tests.support.walked_segments import short_segments

GOLDEN = Path(__file__).resolve().parents[2] / "server" / "golden" / "hot_window_4.9.7.json"
KEY_HASH = index_key_hash(build_index_key(TOPIC, HOT))


@pytest.fixture(scope="module")
def store_config(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    return write_hot_window_store(tmp_path_factory.mktemp("hot-window") / "store")


@pytest.fixture(scope="module")
def store(store_config: StoreConfig) -> Iterator[MessageStore]:
    with MessageStore.open(store_config) as s:
        yield s


def _record_offset(buf: Any) -> int:
    return int.from_bytes(bytes(buf[28:36]), "big")  # PHYSICALOFFSET


def test_the_store_is_what_the_ranges_were_chosen_for(store_config: StoreConfig) -> None:
    """Chains across ~10 files, each a few seconds long: the ranges below do cut through them."""
    assert len(index_paths(store_config)) == 11
    counts = [
        len(java_query_offsets(store_config, TOPIC, HOT, n, b, e)[0]) for n, b, e in windows(store_config)
    ]
    assert counts.count(0) > 50 and counts.count(64) > 10 and len(set(counts)) > 8


def test_every_range_is_answered_by_the_brokers_rule(store_config: StoreConfig, store: MessageStore) -> None:
    for max_num, begin, end in windows(store_config):
        want, last_ts, last_phy = java_query_offsets(store_config, TOPIC, HOT, max_num, begin, end)
        got = store.index.query_offsets(TOPIC, HOT, max_num, begin, end)
        label = (max_num, begin - T0, end - T0)
        assert (got.phy_offsets, got.index_last_update_timestamp, got.index_last_update_phyoffset) == (
            want,
            last_ts,
            last_phy,
        ), label
        assert not got.budget_exhausted and got.resume is None
        result = store.query_message(TOPIC, HOT, max_num, begin, end)
        assert [_record_offset(b) for b in result.buffers] == sorted(want), label
        if want:
            assert (result.index_last_update_timestamp, result.index_last_update_phyoffset) == (
                last_ts,
                last_phy,
            )


def test_begin_after_end_walks_no_chain(store_config: StoreConfig, store: MessageStore) -> None:
    """No entry's time can lie in such a range: nothing is walked, and the answer is the rule's."""
    for begin, end in ((T0 + 60_000, T0 + 30_000), (MAX, 0), (T0 + 1, T0)):
        got = store.index.query_offsets(TOPIC, HOT, 64, begin, end)
        assert (got.phy_offsets, got.visited) == ([], 0)
        want = java_query_offsets(store_config, TOPIC, HOT, 64, begin, end)
        assert (got.index_last_update_timestamp, got.index_last_update_phyoffset) == want[1:]


def test_a_narrow_range_walks_one_files_chain_down_to_its_begin(
    store_config: StoreConfig, store: MessageStore
) -> None:
    """Newer files are skipped by their time span; the walk stops at the first entry older than
    ``begin``: a range in the oldest file reads less than that file's chain for the key's slot."""
    data = index_paths(store_config)[0].read_bytes()
    slots = store_config.max_hash_slot_num
    entries_at = 40 + slots * 4
    count = int.from_bytes(data[36:40], "big")
    chain = sum(
        1
        for n in range(1, count)
        if int.from_bytes(data[entries_at + n * 20 : entries_at + n * 20 + 4], "big", signed=True) % slots
        == KEY_HASH % slots
    )
    narrow = store.index.query_offsets(TOPIC, HOT, 64, T0 + 5_000, T0 + 5_999)
    assert 0 < len(narrow.phy_offsets) < 64
    assert narrow.visited < chain * 0.75, (narrow.visited, chain)


# -- both twins, and a budget-stopped walk continued -------------------------------------------------


class _Maps:
    """Maps and descriptors of the store's IndexFiles, as ``query_files`` takes them."""

    def __init__(self, config: StoreConfig) -> None:
        self.fds = [os.open(p, os.O_RDONLY) for p in index_paths(config)]
        self.maps = [mmap.mmap(fd, 0, access=mmap.ACCESS_READ) for fd in self.fds]
        self.size = index_file_size(config.max_hash_slot_num, config.max_index_num)
        self.config = config

    def close(self) -> None:
        for m in self.maps:
            m.close()
        for fd in self.fds:
            os.close(fd)

    def args(self, max_num: int, begin: int, end: int, budget: int) -> tuple[Any, ...]:
        c = self.config
        return (self.maps, self.fds, None, self.size, c.max_hash_slot_num, c.max_index_num, KEY_HASH,
                min(max_num, 64), begin, end, budget)  # fmt: skip


@pytest.fixture
def maps(store_config: StoreConfig) -> Iterator[_Maps]:
    m = _Maps(store_config)
    yield m
    m.close()


def _twins() -> list[Any]:
    fast = query_walk.query_files
    reference = query_walk.REFERENCE["query_files"]
    return [reference] if fast is reference else [reference, fast]


def test_both_twins_answer_every_range_alike(store_config: StoreConfig, maps: _Maps) -> None:
    for max_num, begin, end in windows(store_config):
        answers = [q(*maps.args(max_num, begin, end, 10**9)) for q in _twins()]
        assert all(a == answers[0] for a in answers), (max_num, begin, end)
        want = java_query_offsets(store_config, TOPIC, HOT, max_num, begin, end)
        assert (answers[0][0], answers[0][3], answers[0][4]) == want


def test_a_walk_continued_from_its_budget_answers_as_one_walk(store_config: StoreConfig, maps: _Maps) -> None:
    """For budgets 0 .. the whole walk: stop there, continue with the rest; equal to one walk.

    Twins are crossed too: a walk stopped by one and continued by the other answers alike (the
    resume point is plain data)."""
    checked = 0
    for max_num, begin, end in windows(store_config)[::3]:
        whole = query_walk.REFERENCE["query_files"](*maps.args(max_num, begin, end, 10**9))
        total = whole[1]
        assert whole[2] is False and whole[6] is None
        step = max(1, total // 40)
        for budget in [*range(0, total, step), total - 1]:
            if budget < 0:
                continue
            for first in _twins():
                part = first(*maps.args(max_num, begin, end, budget))
                assert part[2] is True and part[1] == budget and part[6] is not None, (budget, total)
                for second in _twins():
                    rest = second(*maps.args(max_num, begin, end, 10**9), part[6])
                    assert rest[:5] == whole[:5] and rest[6] is None, (max_num, begin, end, budget)
                    checked += 1
    assert checked > 300


def test_a_walk_continued_twice_still_answers_as_one_walk(store_config: StoreConfig, maps: _Maps) -> None:
    begin, end = T0 + 3_000, T0 + 140_000
    whole = query_walk.query_files(*maps.args(64, begin, end, 10**9))
    point = None
    for budget in range(7, whole[1] + 7, 7):
        part = query_walk.query_files(*maps.args(64, begin, end, budget), point)
        point = part[6]
        if point is None:
            assert part[:5] == whole[:5]
            break
        assert part[1] == budget
    else:
        pytest.fail("the walk never finished")


def test_a_deadline_never_stops_a_walk_before_256_entries(store_config: StoreConfig, maps: _Maps) -> None:
    """Every walk here is shorter than 256 entries (one file's share of the chain): a deadline
    already past when the query starts stops none of them, in either twin (the clock is looked at
    after every 256 entries a walk read, never before its first)."""
    for max_num, begin, end in windows(store_config):
        whole = query_walk.REFERENCE["query_files"](*maps.args(max_num, begin, end, 10**9))
        for q in _twins():
            assert q(*maps.args(max_num, begin, end, 10**9), None, 1) == whole, (max_num, begin, end)


def test_the_store_finishes_a_stopped_query_where_it_stopped(
    store_config: StoreConfig, store: MessageStore
) -> None:
    """``query_message(resume=...)``: the records, last-update values and entry count of one call."""
    for max_num, begin, end in windows(store_config)[::4]:
        whole = store.query_message(TOPIC, HOT, max_num, begin, end, budget=10**9)
        for budget in (0, 1, whole.visited // 2, whole.visited - 1):
            if budget < 0 or budget >= whole.visited:
                continue
            part = store.query_message(TOPIC, HOT, max_num, begin, end, budget=budget)
            assert part.budget_exhausted and part.resume is not None
            rest = store.query_message(TOPIC, HOT, max_num, begin, end, budget=10**9, resume=part.resume)
            assert [bytes(b) for b in rest.buffers] == [bytes(b) for b in whole.buffers]
            assert (rest.index_last_update_timestamp, rest.index_last_update_phyoffset, rest.visited) == (
                whole.index_last_update_timestamp,
                whole.index_last_update_phyoffset,
                whole.visited,
            )
            assert not rest.budget_exhausted and rest.resume is None


def test_a_resume_point_of_another_query_is_refused(store: MessageStore) -> None:
    part = store.index.query_offsets(TOPIC, HOT, 64, T0, T0 + 100_000, budget=3)
    assert part.resume is not None
    with pytest.raises(ValueError):
        store.index.query_offsets(TOPIC, HOT, 64, T0, T0 + 99_999, resume=part.resume)


# -- the real broker's answers on this very store ------------------------------------------------------


def test_the_real_brokers_answers(store_config: StoreConfig, store: MessageStore) -> None:
    if not GOLDEN.exists():
        pytest.skip(f"{GOLDEN.name} not recorded")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden["storeSha256"] == fingerprint(store_config), "the store differs from the one recorded"
    assert len(golden["queries"]) == len(windows(store_config))
    for q in golden["queries"]:
        result = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        label = (q["maxNum"], q["begin"], q["end"])
        got = [[_record_offset(b), hashlib.sha256(b).hexdigest()] for b in result.buffers]
        assert got == q["records"], label
        assert q["code"] == (ResponseCode.SUCCESS if got else ResponseCode.QUERY_NOT_FOUND), label
        assert str(result.index_last_update_timestamp) == q["indexLastUpdateTimestamp"], label
        assert str(result.index_last_update_phyoffset) == q["indexLastUpdatePhyoffset"], label
        want = java_query_offsets(store_config, q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        assert sorted(want[0]) == [r[0] for r in q["records"]], "the written rule agrees with the broker"


# -- the same ranges again, once earlier walks filled the compiled walk's segment cache ---------------


def test_every_range_again_and_shuffled_once_walked_segments_are_cached(store_config: StoreConfig) -> None:
    """The compiled walk passes over cached chain segments that can hold no answer and no stop
    (``_query_walk_core.h``, "Walked segments"): every range asked three times (in order, then
    shuffled twice, so most walks find segments earlier ones recorded) answers as the rule does,
    and a query stopped by its budget and continued still answers as one walk."""
    with short_segments() as skipped, MessageStore.open(store_config) as store:
        before = skipped()
        asked = windows(store_config)
        rng = random.Random(22)
        for round_ in range(3):
            if round_:
                asked = rng.sample(asked, len(asked))
            for max_num, begin, end in asked:
                want = java_query_offsets(store_config, TOPIC, HOT, max_num, begin, end)
                got = store.index.query_offsets(TOPIC, HOT, max_num, begin, end)
                label = (round_, max_num, begin - T0, end - T0)
                last = (got.index_last_update_timestamp, got.index_last_update_phyoffset)
                assert (got.phy_offsets, *last) == want, label
                result = store.query_message(TOPIC, HOT, max_num, begin, end)
                assert [_record_offset(b) for b in result.buffers] == sorted(want[0]), label
        for max_num, begin, end in asked[::5]:
            whole = store.index.query_offsets(TOPIC, HOT, max_num, begin, end)
            for budget in (1, whole.visited // 3, whole.visited - 1):
                part = store.index.query_offsets(TOPIC, HOT, max_num, begin, end, budget=max(budget, 0))
                if part.resume is None:
                    continue
                rest = store.index.query_offsets(TOPIC, HOT, max_num, begin, end, resume=part.resume)
                assert (rest.phy_offsets, rest.visited) == (whole.phy_offsets, whole.visited)
        if query_walk.COMPILED:
            assert skipped() - before > 1_000, "the cached segments were not used"
        if GOLDEN.exists():
            golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["queries"]
            for q in rng.sample(golden, len(golden)):
                result = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
                got = [[_record_offset(b), hashlib.sha256(b).hexdigest()] for b in result.buffers]
                assert got == q["records"], (q["maxNum"], q["begin"], q["end"])
