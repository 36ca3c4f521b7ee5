"""The compiled walk's cache of walked chain segments (``_query_walk_core.h``, "Walked segments").

A segment a walk went through cleanly is passed over by a later walk only when none of its entries
could be taken or end that walk. The answer must be the plain walk's in every respect: offsets and
their order, entries visited, how the walk stopped, events, resume points. So every test here fills
a file's cache with earlier queries and compares the compiled ``query_files`` with caches against
the pure-Python reference (without them), over ranges that end inside segments, on their edges and
around them, with maxNum caps, budgets and resumes, deadlines, a file growing under the walk, a
chain that loops, and a file rewritten in place. Segments are made short (``_set_segment_rules``)
so that chains of a few thousand entries hold many. Compiled only: ``RMQ_PURE_PYTHON=1`` skips.
"""

from __future__ import annotations

import importlib
import mmap
import os
import random
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.accel import pure_python
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, index_file_size
from store.index import query_walk
from store.index.query_walk import REFERENCE

SLOTS = 8
INDEX_NUM = 8_000
SIZE = index_file_size(SLOTS, INDEX_NUM)
ENTRIES_AT = INDEX_HEADER_SIZE + SLOTS * 4
T0 = 1_700_000_000_000
HOT = 12_345  # slot 1
SAME_SLOT = (HOT + 8, HOT + 16)
SEG = struct.Struct("8i")  # qw_seg, native order
META = struct.Struct("4q")
PY = REFERENCE["query_files"]


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The compiled module, with short segments; the reference's chain walk made pure Python too
    (its ``query_files`` calls the module's ``walk_chain``, the compiled one when built)."""
    if pure_python():
        pytest.skip("the compiled walk is not in use (RMQ_PURE_PYTHON=1)")
    try:
        module = importlib.import_module("store.index._query_walk_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built")
    monkeypatch.setattr(query_walk, "walk_chain", REFERENCE["walk_chain"])
    old = module._set_segment_rules(16, 8)
    yield module
    module._set_segment_rules(*old)


def entries(n: int, seed: int = 22) -> list[tuple[int, int, int]]:
    """``n`` entries (hash, phyOffset, timeDiff) in the order put: half the hot key, a quarter other
    keys of its slot, a quarter other slots; time diffs rising by a second every 4 entries, jittered
    (ties, and an entry older than the one before it)."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        r = rng.random()
        h = HOT if r < 0.5 else SAME_SLOT[k % 2] if r < 0.75 else 3 + 8 * rng.randrange(100)
        diff = max(0, k // 4 + rng.choice((-1, 0, 0, 0, 1, 2)))
        out.append((h, 1_000 + 100 * k, diff))
    return out


class IndexFileBytes:
    """One IndexFile written by hand (entries put as the broker puts them), mapped read-only."""

    def __init__(
        self, path: Path, put: list[tuple[int, int, int]], *, links: dict[int, int] | None = None
    ) -> None:
        self.path = path
        self.heads = [0] * SLOTS
        self.count = 1
        with open(path, "wb") as f:
            f.truncate(SIZE)
        self.fd = os.open(path, os.O_RDWR)
        self.append(put, links=links)
        self.map = mmap.mmap(self.fd, SIZE, access=mmap.ACCESS_READ)
        self.cache: dict[int, bytes] = {}

    def append(self, put: list[tuple[int, int, int]], *, links: dict[int, int] | None = None) -> None:
        """Put entries after the last (the broker's putKey: entry, then the slot's head, then the header)."""
        for h, phy, diff in put:
            n = self.count
            slot = h % SLOTS
            prev = (links or {}).get(n, self.heads[slot])
            os.pwrite(self.fd, struct.pack(">iqii", h, phy, diff, prev), ENTRIES_AT + n * INDEX_ENTRY_SIZE)
            self.heads[slot] = n
            os.pwrite(self.fd, struct.pack(">i", n), INDEX_HEADER_SIZE + slot * 4)
            self.count += 1
        last_diff = max(d for _, _, d in put)
        end_phy = 1_000 + 100 * self.count
        os.pwrite(
            self.fd, struct.pack(">qqqqii", T0, T0 + last_diff * 1000, 1_000, end_phy, SLOTS, self.count), 0
        )

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    def args(self, max_num: int, begin: int, end: int, budget: int = 10**9) -> tuple[Any, ...]:
        return ([self.map], [self.fd], None, SIZE, SLOTS, INDEX_NUM, HOT, max_num, begin, end, budget)

    def both(self, fast: ModuleType, max_num: int, begin: int, end: int, **kw: Any) -> tuple[Any, Any]:
        """(the compiled walk with this file's cache, the reference without one)."""
        budget = kw.get("budget", 10**9)
        resume = kw.get("resume")
        got = fast.query_files(*self.args(max_num, begin, end, budget), resume, 0, [self.cache])
        return got, PY(*self.args(max_num, begin, end, budget), resume, 0)

    def segments(self) -> list[tuple[int, ...]]:
        held = [v for k, v in self.cache.items() if k >= 0]
        return [SEG.unpack_from(v, i) for v in held for i in range(0, len(v), SEG.size)]


@pytest.fixture
def hot_file(tmp_path: Path) -> Iterator[IndexFileBytes]:
    f = IndexFileBytes(tmp_path / "index", entries(6_000))
    yield f
    f.close()


def ranges(last_diff: int, rng: random.Random, n: int) -> list[tuple[int, int, int]]:
    """(maxNum, begin, end): widths 0 .. 60 s, edges on a second, just before or just after it."""
    out = []
    for _ in range(n):
        hi = rng.randrange(-2, last_diff + 3)
        lo = hi - rng.choice((0, 0, 1, 2, 5, 60))
        end = T0 + hi * 1000 + rng.choice((0, 999, 1000, -1))
        begin = T0 + lo * 1000 + rng.choice((0, 1, -1, 999))
        out.append((rng.choice((1, 3, 16, 64)), begin, end))
    return out


def fill(f: IndexFileBytes, fast: ModuleType, rng: random.Random, n: int = 60) -> None:
    """Long walks first (ranges near the chain's oldest end), so the cache holds most of the chain."""
    for max_num, begin, end in ranges(40, rng, n):
        got, want = f.both(fast, max_num, begin, end)
        assert got == want


def test_repeated_and_shuffled_ranges_answer_as_the_plain_walk(
    hot_file: IndexFileBytes, fast: ModuleType
) -> None:
    rng = random.Random(1)
    asked = ranges(1_500, rng, 400)
    skipped = fast.segments_skipped()
    for round_ in range(3):
        rng.shuffle(asked)
        for max_num, begin, end in asked:
            got, want = hot_file.both(fast, max_num, begin, end)
            assert got == want, (round_, max_num, begin - T0, end - T0)
    assert len(hot_file.segments()) > 200
    assert fast.segments_skipped() - skipped > 100_000  # the cache was used, and much


def test_ranges_ending_inside_segments_and_on_their_edges(hot_file: IndexFileBytes, fast: ModuleType) -> None:
    """For each segment: ranges whose end is its smallest time diff (the segment must be walked:
    that entry can be taken), one below it (passed over), one above; begins on and around it."""
    fill(hot_file, fast, random.Random(2))
    segments = hot_file.segments()
    assert len(segments) > 100
    checked = 0
    for start, _next, _count, min_diff, *_ in random.Random(20).sample(segments, 100):
        for hi in (min_diff - 1, min_diff, min_diff + 1):
            for end in (T0 + hi * 1000, T0 + hi * 1000 + 999):
                for width in (0, 3_000):
                    for max_num in (1, 64):
                        got, want = hot_file.both(fast, max_num, end - width, end)
                        assert got == want, (start, min_diff, hi, end - T0, width, max_num)
                        checked += 1
    assert checked == 2_400


def test_a_budget_stops_where_the_plain_walk_stops_and_resumes_alike(
    hot_file: IndexFileBytes, fast: ModuleType
) -> None:
    """Passed-over entries count as visited: the budget stops at the plain walk's entry, with its
    resume point, and a walk resumed with the cache finishes as the plain one."""
    fill(hot_file, fast, random.Random(3))
    rng = random.Random(4)
    for max_num, begin, end in ranges(1_500, rng, 25):
        whole, want = hot_file.both(fast, max_num, begin, end)
        assert whole == want
        total = whole[1]
        for budget in sorted({0, 1, *rng.sample(range(max(total, 1)), min(total, 40)), max(total - 1, 0)}):
            part, want_part = hot_file.both(fast, max_num, begin, end, budget=budget)
            assert part == want_part, (begin - T0, end - T0, budget)
            if part[6] is not None:
                rest, want_rest = hot_file.both(fast, max_num, begin, end, resume=part[6])
                assert rest == want_rest == whole


def test_a_deadline_stopped_walk_resumed_answers_as_one_walk(
    hot_file: IndexFileBytes, fast: ModuleType
) -> None:
    """Where a deadline stops a walk is the clock's (a passed-over segment may pass the look at 256
    entries); what matters is that the resumed walk answers as one walk, with the same count."""
    fill(hot_file, fast, random.Random(5))
    for max_num, begin, end in ranges(600, random.Random(6), 40):
        whole = PY(*hot_file.args(max_num, begin, end))
        point, stops = None, 0
        while True:
            got = fast.query_files(*hot_file.args(max_num, begin, end), point, 1, [hot_file.cache])
            point = got[6]
            if point is None:
                break
            stops += 1
            assert stops < 1_000
        assert got[:6] == whole[:6]


def test_a_growing_file_new_entries_go_in_front_of_cached_segments(tmp_path: Path, fast: ModuleType) -> None:
    put = entries(7_000, seed=7)
    f = IndexFileBytes(tmp_path / "index", put[:3_000])
    try:
        rng = random.Random(8)
        for added in (0, 1, 63, 500, 1_436):
            if added:
                f.append(put[f.count - 1 : f.count - 1 + added])
            for max_num, begin, end in ranges(f.count // 4 + 2, rng, 120):
                got, want = f.both(fast, max_num, begin, end)
                assert got == want, (f.count, max_num, begin - T0, end - T0)
        assert f.segments()
    finally:
        f.close()


def test_a_looping_chain_is_caught_as_the_plain_walk_catches_it(tmp_path: Path, fast: ModuleType) -> None:
    """Entry 1,500 links forwards into the hot chain (a corrupt file): the walks after it are in the
    loop guard's mode (nothing passed over), whose replay of the chain counts passed-over entries."""
    put = entries(4_000, seed=9)
    chain = [n for n in range(1, 2_400) if put[n - 1][0] % SLOTS == HOT % SLOTS]
    f = IndexFileBytes(tmp_path / "index", put, links={chain[500]: chain[900]})
    try:
        rng = random.Random(10)
        below = T0 + put[chain[300] - 1][2] * 1000  # a range past the loop: the walk meets it
        asked = [*ranges(1_000, rng, 200), (64, T0, T0 + 10**7), (64, below - 5_000, below)]
        for _ in range(2):
            rng.shuffle(asked)
            for max_num, begin, end in asked:
                got, want = f.both(fast, max_num, begin, end)
                assert got == want, (max_num, begin - T0, end - T0)
                for budget in (0, 5, 100, 1_000, 2_000, 3_000):
                    part, want_part = f.both(fast, max_num, begin, end, budget=budget)
                    assert part == want_part, (max_num, begin - T0, end - T0, budget)
                    if part[6] is not None:
                        assert f.both(fast, max_num, begin, end, resume=part[6])[0] == want
        whole = f.both(fast, 64, below - 5_000, below)[0]
        assert any(kind == 13 for _, kind, _ in whole[5]), whole  # CHAIN: the forward link was met
    finally:
        f.close()


def test_a_file_rewritten_in_place_drops_its_cache(hot_file: IndexFileBytes, fast: ModuleType) -> None:
    """A broker never rewrites an entry; ``cp`` over a mapped file does (refresh notices within a
    second). A segment's start entry is read again before it is passed over: changed, the cache is
    dropped and the walk goes on plainly; an indexCount gone down or other begin values drop it too."""
    fill(hot_file, fast, random.Random(11))
    start, _next, _count, _min, _hash, diff, _prev, _ = max(hot_file.segments(), key=lambda s: s[0])
    os.pwrite(hot_file.fd, struct.pack(">i", diff + 1), ENTRIES_AT + start * INDEX_ENTRY_SIZE + 12)
    got, want = hot_file.both(fast, 64, T0, T0 + 2_000)
    assert got == want
    assert -1 not in hot_file.cache or len(hot_file.cache) <= 2  # dropped (and this walk's own recorded)
    fill(hot_file, fast, random.Random(12))
    assert len(hot_file.segments()) > 10
    header = bytearray(hot_file.map[:40])
    count = int.from_bytes(header[36:40], "big")
    os.pwrite(hot_file.fd, (count - 1).to_bytes(4, "big"), 36)
    hot_file.cache[99] = b"not looked at"  # a key no slot has: gone with the rest
    got, want = hot_file.both(fast, 64, T0, T0 + 2_000)
    assert got == want
    assert 99 not in hot_file.cache
    os.pwrite(hot_file.fd, count.to_bytes(4, "big"), 36)
    fill(hot_file, fast, random.Random(13))
    os.pwrite(hot_file.fd, (1_001).to_bytes(8, "big"), 16)  # beginPhyOffset: another file's bytes
    hot_file.cache[99] = b"not looked at"
    got, want = hot_file.both(fast, 64, T0, T0 + 2_000)
    assert got == want and 99 not in hot_file.cache


def test_the_cache_is_bounded_per_file(hot_file: IndexFileBytes, fast: ModuleType) -> None:
    """At most 4096 segments per file, then nothing more is recorded (answers unchanged)."""
    fast._set_segment_rules(0, 1)  # a segment per entry: the cap is met by one file's chains
    rng = random.Random(14)
    for key_hash in (HOT, *SAME_SLOT, 3, 4, 5, 6, 7, 8):
        for max_num, begin, end in ranges(30, rng, 10):
            maps = ([hot_file.map], [hot_file.fd], None, SIZE, SLOTS, INDEX_NUM)
            args = (*maps, key_hash, max_num, begin, end, 10**9)
            assert fast.query_files(*args, None, 0, [hot_file.cache]) == PY(*args)
    held = META.unpack(hot_file.cache[-1])[3]
    assert held == len(hot_file.segments()) == 4_096
    for max_num, begin, end in ranges(1_500, rng, 100):
        got, want = hot_file.both(fast, max_num, begin, end)
        assert got == want


def test_threads_sharing_a_files_cache_answer_as_the_plain_walk(
    hot_file: IndexFileBytes, fast: ModuleType
) -> None:
    """The pool walks in threads, without the GIL: the cache is read and added to with it held, and
    a walk reads its chain's segments from bytes it holds a reference to."""
    asked = ranges(1_500, random.Random(15), 300)
    want = [PY(*hot_file.args(*q)) for q in asked]

    def ask(k: int) -> list[bool]:
        order = random.Random(k).sample(range(len(asked)), len(asked))
        out = []
        for i in order:
            got = fast.query_files(*hot_file.args(*asked[i]), None, 0, [hot_file.cache])
            out.append(got == want[i])
        return out

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, range(8)))
    assert all(all(r) for r in results)
    assert META.unpack(hot_file.cache[-1])[3] == len(hot_file.segments())
