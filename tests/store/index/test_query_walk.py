"""The query's two walks (``store.index.query_walk``): hand-built expectations, and the compiled twin
(``store.index._query_walk_fast``) agreeing with the pure-Python reference on the golden store and on
hostile bytes (damaged chains, pointers and offsets past the end, files shorter than their geometry).

Run both ways by the suite (``RMQ_PURE_PYTHON=1`` or not): the agreement tests call the two
implementations directly, so they check the C code whichever way the rest of the suite runs.
"""

from __future__ import annotations

import importlib
import json
import mmap
import os
import random
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.accel import pure_python
from protocol.index_key import build_index_key, index_key_hash
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, StoreConfig, index_file_size
from store.index import query_walk
from store.index.index_file import HEADER, IndexFile, IndexHeader
from store.index.query_walk import BUDGET, END, HEADER_PROBLEM, LOOP, OUTSIDE, REFERENCE, SHORT, ZEROED

ENTRY = struct.Struct(">iqii")
MAX = 2**63 - 1
JAVA_STORE = "java-4.9.7-a"


def _fast() -> ModuleType:
    try:
        return importlib.import_module("store.index._query_walk_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


PY_WALK: Callable[..., Any] = REFERENCE["walk_chain"]
PY_READ: Callable[..., Any] = REFERENCE["read_records"]


def same_records(a: list[memoryview | None], b: list[memoryview | None]) -> bool:
    return [None if x is None else bytes(x) for x in a] == [None if x is None else bytes(x) for x in b]


def test_the_module_uses_the_compiled_twin_unless_pure_python_is_asked() -> None:
    if pure_python():
        assert query_walk.walk_chain is PY_WALK and query_walk.read_records is PY_READ
        assert query_walk.query_files is REFERENCE["query_files"]
    else:
        fast = _fast()
        assert query_walk.walk_chain is fast.walk_chain and query_walk.read_records is fast.read_records
        assert query_walk.query_files is fast.query_files


# -- a hand-built index: 4 slots' worth of header space, entries written by hand ---------------------

ENTRIES_AT = 100  # any position: the walk only reads entries


def index_bytes(entries: dict[int, tuple[int, int, int, int]], count: int) -> bytearray:
    buf = bytearray(ENTRIES_AT + count * INDEX_ENTRY_SIZE)
    for n, entry in entries.items():
        ENTRY.pack_into(buf, ENTRIES_AT + n * INDEX_ENTRY_SIZE, *entry)
    return buf


def both(*args: Any) -> Any:
    """The reference's answer, after checking the compiled twin gives the same."""
    expected = PY_WALK(*args)
    assert _fast().walk_chain(*args) == expected
    return expected


def walk(
    buf: bytearray, start: int, key_hash: int = 7, *, count: int = 6, length: int | None = None, **kw: int
) -> Any:
    args = dict(begin_ts=1_000_000, begin_phy=100, begin=0, end=MAX, room=64, budget=2**62)
    args.update(kw)
    return both(
        bytes(buf),
        len(buf) if length is None else length,
        ENTRIES_AT,
        start,
        key_hash,
        count,
        count - 1,
        args["begin_ts"],
        args["begin_phy"],
        args["begin"],
        args["end"],
        args["room"],
        args["budget"],
    )


# Chain 5 -> 4 -> 2 -> 1 of hash 7 (entry 3 and 4: other hashes in the same slot, 4 in the chain).
CHAIN = {
    1: (7, 1000, 0, 0),
    2: (7, 2000, 2, 1),
    3: (9, 3000, 3, 0),
    4: (8, 4000, 4, 2),
    5: (7, 5000, 5, 4),
}


def test_a_chain_is_walked_newest_first_matching_hash_and_time() -> None:
    buf = index_bytes(CHAIN, 6)
    assert walk(buf, 5) == ([5000, 2000, 1000], 4, END, 0, 0)
    # begin = 1002 s: entry 2 (1002 s) matches, entry 1 (1000 s) is older than begin: the walk stops there.
    assert walk(buf, 5, begin=1_002_000) == ([5000, 2000], 4, END, 0, 0)
    assert walk(buf, 5, room=2) == ([5000, 2000], 3, END, 0, 0)


def test_the_budget_stops_the_walk_after_that_many_entries() -> None:
    buf = index_bytes(CHAIN, 6)
    assert walk(buf, 5, budget=1) == ([5000], 1, BUDGET, 4, 0)
    assert walk(buf, 5, budget=3) == ([5000, 2000], 3, BUDGET, 1, 0)
    assert walk(buf, 5, budget=4) == ([5000, 2000, 1000], 4, END, 0, 0)
    assert walk(buf, 5, budget=0) == ([], 0, BUDGET, 5, 0)


def test_a_loop_is_walked_once() -> None:
    # 3 -> 2 -> 4 (forward) -> 3 (already visited): three entries, then stop.
    buf = index_bytes({2: (7, 20, 0, 4), 3: (7, 30, 0, 2), 4: (7, 40, 0, 3)}, 6)
    assert walk(buf, 3) == ([30, 20, 40], 3, LOOP, 3, 2)


def test_a_zeroed_entry_ends_the_chain() -> None:
    buf = index_bytes({3: (7, 30, 0, 2)}, 6)  # entry 2 is all zeros
    assert walk(buf, 3) == ([30], 2, ZEROED, 2, 0)
    assert walk(buf, 3, begin_phy=0) == ([30], 2, END, 0, 0), "a file beginning at offset 0 may hold it"


def test_pointers_outside_the_checked_length_are_never_followed() -> None:
    buf = index_bytes(CHAIN, 6)
    # The file "shrank" to 4 whole entries and a bit: entry 4 and 5 lie beyond the checked length.
    short = ENTRIES_AT + 4 * INDEX_ENTRY_SIZE + 7
    assert walk(buf, 5, length=short) == ([], 0, OUTSIDE, 5, 0)
    assert walk(buf, 2, length=short) == ([2000, 1000], 2, END, 0, 0)
    assert walk(buf, 3, length=ENTRIES_AT - 1) == ([], 0, OUTSIDE, 3, 0)
    assert walk(buf, 5, length=10**9)[0] == [5000, 2000, 1000], "a length past the buffer is capped"


# -- agreement on the golden store -----------------------------------------------------------------


@pytest.fixture(scope="module")
def golden(stores_dir: Path) -> StoreConfig:
    return StoreConfig.load(stores_dir / f"{JAVA_STORE}.broker.conf")


def test_both_walks_agree_on_every_chain_of_the_golden_index(golden: StoreConfig) -> None:
    fast = _fast()
    index_dir = golden.index_dir
    walked = 0
    for path in sorted(index_dir.iterdir()):
        f = IndexFile.open(path, golden.max_hash_slot_num, golden.max_index_num)
        try:
            h = f.header
            mm = f.buffer
            entries_at = INDEX_HEADER_SIZE + f.hash_slot_num * 4
            for slot in range(f.hash_slot_num):
                start = f.slot(slot)
                if start <= 0:
                    continue
                key_hash = f.entry(start)[0]
                span = (h.begin_timestamp, h.end_timestamp)
                for begin, end, room, budget in (
                    (0, MAX, 64, 2**62),
                    (0, MAX, 2, 2**62),
                    (span[0] + 1000, span[1] - 1000, 64, 2**62),
                    (0, MAX, 64, 3),
                ):
                    args = (mm, f.size, entries_at, start, key_hash, h.index_count,
                            min(h.index_count, f.index_num - 1), h.begin_timestamp, h.begin_phy_offset,
                            begin, end, room, budget)  # fmt: skip
                    assert fast.walk_chain(*args) == PY_WALK(*args)
                    walked += 1
        finally:
            f.close()
    assert walked > 1000


def test_both_record_reads_agree_on_the_golden_commitlog(golden: StoreConfig) -> None:
    fast = _fast()
    log = CommitLog(golden.store_path_commit_log, golden.mapped_file_size_commit_log)
    try:
        offsets = [offset for offset, _ in log.iter_records()]
        assert len(offsets) == 5000
        probes = offsets + [o + 1 for o in offsets[:500]] + [-1, -(2**70), 2**70, log.max_offset, 10**12]
        files, starts, views = log._snap
        lengths = [f.length for f in files]
        py = PY_READ(views, starts, lengths, log.max_offset, probes)
        c = fast.read_records(views, starts, lengths, log.max_offset, probes)
        assert [None if b is None else bytes(b) for b in c] == [None if b is None else bytes(b) for b in py]
        assert all(b is not None for b in py[:5000])
        # VIEW's unchecked read agrees where the record is whole.
        assert same_records([log.read_record(o) for o in offsets], py[:5000])
        # Whole records only: an offset inside a record reads as a size word that does not check.
        assert all(b is None for b in py[5000:])
        # A CommitLog read as if its written end were earlier, or its files mapped shorter.
        cut = offsets[2500]
        assert fast.read_records(views, starts, lengths, cut, offsets)[2499] is not None
        assert fast.read_records(views, starts, lengths, cut, offsets)[2500:] == [None] * 2500
        short = [n // 2 for n in lengths]
        assert [b is None for b in fast.read_records(views, starts, short, log.max_offset, offsets)] == [
            b is None for b in PY_READ(views, starts, short, log.max_offset, offsets)
        ]
    finally:
        log.close()


# -- agreement on hostile bytes --------------------------------------------------------------------


def test_both_walks_agree_on_random_damaged_chains() -> None:
    fast = _fast()
    rng = random.Random(11)
    for _ in range(3000):
        count = rng.randrange(1, 40)
        buf = bytearray(ENTRIES_AT + count * INDEX_ENTRY_SIZE + rng.randrange(0, 30))
        for n in range(count):
            if rng.random() < 0.1:
                continue  # left zeroed
            prev = rng.choice([n - 1, n - 2, rng.randrange(-3, count + 5), 0, n, n + 1, 2**31 - 1, -(2**31)])
            entry = (rng.choice([7, 7, 7, 8, -7]), rng.choice([0, rng.randrange(2**40)]),
                     rng.choice([0, 1, 5, -1, 2**31 - 1]), prev)  # fmt: skip
            ENTRY.pack_into(buf, ENTRIES_AT + n * INDEX_ENTRY_SIZE, *entry)
        index_count = rng.choice([count, count + 3, 2**31 - 1, 1, 0])
        args = (
            bytes(buf),
            rng.choice([len(buf), len(buf) // 2, 10**12, 0, -5]),
            rng.choice([ENTRIES_AT, ENTRIES_AT, 3, len(buf) + 8]),
            rng.randrange(-2, count + 3),
            7,
            index_count,
            rng.choice([index_count, count - 1, 2**31]),
            rng.choice([0, 1_000_000, 2**63 - 1]),
            rng.choice([0, 100]),
            rng.choice([0, 1_000_000, 1_003_000]),
            rng.choice([MAX, 1_004_000, -1]),
            rng.choice([64, 1, 0, -3]),
            rng.choice([2**62, 5, 1, 0]),
        )
        assert fast.walk_chain(*args) == PY_WALK(*args), args


def test_both_record_reads_agree_on_random_bytes(golden: StoreConfig) -> None:
    fast = _fast()
    rng = random.Random(5)
    real = golden.store_path_commit_log / sorted(p.name for p in golden.store_path_commit_log.iterdir())[0]
    real_bytes = real.read_bytes()
    record_starts = [0]
    while record_starts[-1] < 20_000:
        record_starts.append(
            record_starts[-1] + int.from_bytes(real_bytes[record_starts[-1] : record_starts[-1] + 4])
        )
    whole = 0
    for _ in range(300):
        data = bytearray(real_bytes[: rng.randrange(0, 20_000)])
        for _ in range(rng.randrange(0, 40)):  # flip bytes: sizes, magic codes, field lengths
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        views = [memoryview(bytes(data)), memoryview(bytes(data[:5000]))]
        starts = [0, len(data) + rng.randrange(0, 100)]
        lengths = [rng.choice([len(data), len(data) // 2, 10**9]), rng.choice([5000, 10, 0])]
        max_offset = rng.choice([starts[1] + 5000, len(data), 10**12, 0])
        offsets = [rng.randrange(-5, starts[1] + 6000) for _ in range(40)] + [0, 2**64, -(2**64)]
        offsets += record_starts + [starts[1] + s for s in record_starts]
        c = fast.read_records(views, starts, lengths, max_offset, offsets)
        py = PY_READ(views, starts, lengths, max_offset, offsets)
        assert [None if b is None else bytes(b) for b in c] == [None if b is None else bytes(b) for b in py]
        whole += sum(b is not None for b in py)
    assert whole > 200, "the damaged files still hold whole records, read alike by both"


# -- query_files: the per-file loop of a key query over a store's IndexFiles ----------------------

PY_QUERY: Callable[..., Any] = REFERENCE["query_files"]


class Maps(list[mmap.mmap]):
    """The maps of some IndexFiles and a descriptor of each (``query_files``' first two arguments)."""

    fds: list[int]


_OPENED: list[int] = []


@pytest.fixture(autouse=True)
def _close_descriptors() -> Iterator[None]:
    yield
    while _OPENED:
        os.close(_OPENED.pop())


def _maps(paths: list[Path]) -> Maps:
    out = Maps()
    out.fds = []
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        _OPENED.append(fd)
        out.append(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
        out.fds.append(fd)
    return out


def query_both(maps: Maps, headers: Any, cfg: StoreConfig, key_hash: int, max_num: int, begin: int,
               end: int, budget: int) -> Any:  # fmt: skip
    """The reference's answer, after checking the compiled twin gives the same."""
    size = index_file_size(cfg.max_hash_slot_num, cfg.max_index_num)
    args = (maps, maps.fds, headers, size, cfg.max_hash_slot_num, cfg.max_index_num, key_hash, max_num, begin,
            end, budget)  # fmt: skip
    expected = PY_QUERY(*args)
    assert _fast().query_files(*args) == expected, args[2:]
    return expected


@pytest.fixture
def index_copy(golden: StoreConfig, tmp_path: Path) -> list[Path]:
    """A copy of the golden store's six IndexFiles, to damage."""
    paths = []
    for p in sorted(golden.index_dir.iterdir()):
        paths.append(tmp_path / p.name)
        shutil.copyfile(p, paths[-1])
    return paths


def _golden_queries(golden: StoreConfig) -> list[dict[str, Any]]:
    expected = json.loads((golden.store_path_root_dir.parent / f"{JAVA_STORE}.expected.json").read_text())
    return [q for q in expected["queries"] if "exception" not in q]


def test_query_files_answers_the_java_queries(golden: StoreConfig, index_copy: list[Path]) -> None:
    """The offsets of every recorded Java answer, and its indexLastUpdate values, by both twins."""
    maps = _maps(index_copy)
    for q in _golden_queries(golden):
        key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
        offsets, _visited, exhausted, last_ts, last_phy, events, _resume = query_both(
            maps, None, golden, key_hash, min(q["maxNum"], 64), q["begin"], q["end"], 2**62
        )
        assert not exhausted and events == []
        if q["count"]:  # (a query without hits is answered with zeros by the store, not the index)
            assert (last_ts, last_phy) == (q["indexLastUpdateTimestamp"], q["indexLastUpdatePhyoffset"])
        # Java's answer is the records whose keys really match among these offsets (hash collisions
        # and the store's two extra rounds aside): every offset it returned was found here.
        if q["count"] and q["begin"] == 0 and q["end"] == MAX:
            assert {r["commitLogOffset"] for r in q["results"]} <= set(offsets), q["label"]


def test_query_files_budget_at_every_boundary(golden: StoreConfig, index_copy: list[Path]) -> None:
    """Budgets 0 .. a walk's whole length: both stop at the same entry, with what was found so far."""
    maps = _maps(index_copy)
    checked = 0
    for q in _golden_queries(golden)[:40]:
        key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
        whole = query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
        for budget in range(whole[1] + 2):
            part = query_both(maps, None, golden, key_hash, 64, 0, MAX, budget)
            assert part[1] == min(budget, whole[1])
            assert part[2] is (budget < whole[1])
            assert part[0] == whole[0][: len(part[0])], "a partial walk is a prefix of the whole one"
            checked += 1
    assert checked > 200


def test_a_cut_file_is_left_out_and_the_others_answer(golden: StoreConfig, index_copy: list[Path]) -> None:
    maps = _maps(index_copy)
    q = _golden_queries(golden)[0]
    key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
    whole = query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
    newest = len(maps) - 1
    os.truncate(index_copy[2], 4096)  # cut under the map: reading past 4096 would fault (SIGBUS)
    os.truncate(index_copy[newest], 0)
    offsets, _, _, last_ts, last_phy, events, _ = query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
    assert events == [(newest, SHORT, 0), (2, SHORT, 4096)]
    assert (last_ts, last_phy) == (0, 0), "the newest file is cut: no last-update values"
    assert set(offsets) < set(whole[0])
    maps[1].close()  # a closed map reads as nothing, too
    assert (1, SHORT, 0) in query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)[5]
    maps.fds[0] = -1  # and so does a bad descriptor
    assert (0, SHORT, 0) in query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)[5]


def test_a_garbage_header_is_left_out_and_prunes_nothing(golden: StoreConfig, index_copy: list[Path]) -> None:
    maps = _maps(index_copy)
    q = _golden_queries(golden)[0]
    key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
    whole = query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
    data = bytearray(index_copy[3].read_bytes())
    # beginTimestamp far in the future: were it trusted, the walk would stop at this file.
    HEADER.pack_into(data, 0, 2**62, 2**62, 5, 5, 10**6, 7)
    index_copy[3].write_bytes(bytes(data))  # the same inode: the map sees it
    offsets, _, _, _, _, events, _ = query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
    assert events == [(3, HEADER_PROBLEM, (2**62, 2**62, 5, 5, 10**6, 7))]
    older = [o for o in whole[0] if o < IndexHeader(*HEADER.unpack_from(maps[2], 0)).end_phy_offset + 1]
    assert older and set(older) <= set(offsets), "the files older than the garbage one still answer"


def test_a_writers_headers_replace_the_files(golden: StoreConfig, index_copy: list[Path]) -> None:
    maps = _maps(index_copy)
    q = _golden_queries(golden)[0]
    key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
    headers: list[Any] = [tuple(HEADER.unpack_from(m, 0)) for m in maps]
    same = query_both(maps, headers, golden, key_hash, 64, 0, MAX, 2**62)
    assert same == query_both(maps, None, golden, key_hash, 64, 0, MAX, 2**62)
    headers[-1] = None  # None: read that file's own header
    assert query_both(maps, headers, golden, key_hash, 64, 0, MAX, 2**62) == same
    headers[-1] = (0, 0, 0, 0, 0, 1)  # a writer that has put nothing yet
    assert query_both(maps, headers, golden, key_hash, 64, 0, MAX, 2**62)[3:5] == (0, 0)


def test_both_query_files_agree_on_random_damage(golden: StoreConfig, index_copy: list[Path]) -> None:
    """Headers, slots, entries and file lengths overwritten at random; every query answered alike."""
    rng = random.Random(17)
    queries = _golden_queries(golden)
    originals = [p.read_bytes() for p in index_copy]
    slots_end = INDEX_HEADER_SIZE + golden.max_hash_slot_num * 4
    for _ in range(40):
        for p, data in zip(index_copy, originals, strict=True):
            damaged = bytearray(data)
            for _ in range(rng.choice([0, 0, rng.randrange(1, 60)])):
                where = rng.choices(["header", "slot", "entry"], [1, 8, 30])[0]
                if where == "header":
                    pos = rng.randrange(0, INDEX_HEADER_SIZE - 4)
                elif where == "slot":
                    pos = rng.randrange(INDEX_HEADER_SIZE, slots_end - 4)
                else:
                    pos = rng.randrange(slots_end, len(data) - 4)
                value = rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randrange(2**32) - 2**31,
                                    rng.randrange(1, 2048), rng.randrange(1, 2048)])  # fmt: skip
                struct.pack_into(">i", damaged, pos, value)
            for _ in range(rng.choice([0, 300])):  # chains: links forwards, beyond the file, zeroed entries
                n = rng.randrange(1, golden.max_index_num)
                pos = slots_end + n * INDEX_ENTRY_SIZE
                if rng.random() < 0.3:
                    damaged[pos : pos + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
                else:
                    prev = rng.choice([n + 1, n + 7, golden.max_index_num + 3, n, -5])
                    struct.pack_into(">i", damaged, pos + 16, prev)
            p.write_bytes(bytes(damaged))
        maps = _maps(index_copy)
        for i in rng.sample(range(len(maps)), rng.randrange(0, 3)):
            os.truncate(index_copy[i], rng.choice([0, 39, 40, 2000, len(originals[i]) - 1]))
        for _ in range(25):
            q = rng.choice(queries)
            key_hash = index_key_hash(build_index_key(q["topic"], q["key"]))
            if rng.random() < 0.2:
                key_hash = rng.choice([0, 1, 2**31 - 1, rng.randrange(2**31)])
            query_both(
                maps,
                None,
                golden,
                key_hash,
                rng.choice([64, 1, 0, 3]),
                rng.choice([0, q["begin"], 1795216838000]),
                rng.choice([MAX, q["end"], 1795216840000, -1]),
                rng.choice([2**62, 0, 1, 5, 40, 200]),
            )
        for m in maps:
            m.close()


# -- read_checked: a query's records, each file's current size checked once, before it is read -------

PY_CHECKED: Callable[..., Any] = REFERENCE["read_checked"]


class CountingMap:
    """Stands in for a file's mmap in ``read_checked``: says a size and counts how often it is asked."""

    def __init__(self, size: int | Exception) -> None:
        self.answer = size
        self.asked = 0

    def size(self) -> int:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def checked_both(maps: list[Any], views: list[Any], starts: list[int], lengths: list[int], max_offset: int,
                 offsets: list[int]) -> tuple[list[bytes | None], list[tuple[int, int]]]:  # fmt: skip
    """The reference's answer (records as bytes), after checking the compiled twin gives the same;
    each map is asked for its size as often by both."""
    asked = [m.asked if isinstance(m, CountingMap) else 0 for m in maps]
    py, py_shrunk = PY_CHECKED(maps, views, starts, lengths, max_offset, offsets)
    py_asked = [m.asked if isinstance(m, CountingMap) else 0 for m in maps]
    c, c_shrunk = _fast().read_checked(maps, views, starts, lengths, max_offset, offsets)
    c_asked = [m.asked if isinstance(m, CountingMap) else 0 for m in maps]
    as_bytes = [None if b is None else bytes(b) for b in py]
    assert [None if b is None else bytes(b) for b in c] == as_bytes
    assert c_shrunk == py_shrunk
    assert [b - a for a, b in zip(asked, py_asked, strict=True)] == [
        c - b for b, c in zip(py_asked, c_asked, strict=True)
    ]
    return as_bytes, py_shrunk


def test_read_checked_checks_each_touched_file_once_before_reading(golden: StoreConfig) -> None:
    log = CommitLog(golden.store_path_commit_log, golden.mapped_file_size_commit_log)
    try:
        records = list(log.iter_records())
        files, starts, views = log._snap
        lengths = [f.length for f in files]
        # Records of files 2 and 5 (several each), and one offset past the written end.
        wanted = [o for o, _ in records if starts[2] <= o < starts[3] or starts[5] <= o < starts[6]]
        offsets = [*wanted[::3], log.max_offset + 10]
        sizes = dict(records)
        maps = [CountingMap(n) for n in lengths]
        got, shrunk = checked_both(maps, views, starts, lengths, log.max_offset, offsets)
        assert [m.asked for m in maps] == [0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][: len(maps)]
        assert shrunk == [] and all(b is not None for b in got[:-1]) and got[-1] is None
        # File 5 is cut (say to 1000 bytes) under the map: only its records before the cut are read.
        cut = 1000
        maps[5] = CountingMap(cut)
        maps[2] = CountingMap(OSError(5, "EIO"))  # size() failing: nothing of it is read
        got, shrunk = checked_both(maps, views, starts, lengths, log.max_offset, offsets)
        assert shrunk == [(2, 0), (5, cut)]
        for offset, rec in zip(offsets, got, strict=True):
            if starts[2] <= offset < starts[3]:
                assert rec is None
            elif starts[5] <= offset < starts[6]:
                end = offset - starts[5] + len(sizes[offset])
                assert (rec is not None) == (end <= cut), offset
        # An unreadable file (no map) reads as empty; a map longer than it was mapped is capped.
        maps[5] = None  # type: ignore[call-overload]
        maps[2] = CountingMap(10**12)
        got, shrunk = checked_both(maps, views, starts, lengths, log.max_offset, offsets)
        assert shrunk == [(5, 0)]
        assert all(rec is not None for o, rec in zip(offsets, got, strict=True) if starts[2] <= o < starts[3])
    finally:
        log.close()


def test_both_read_checked_agree_on_random_cuts(golden: StoreConfig) -> None:
    log = CommitLog(golden.store_path_commit_log, golden.mapped_file_size_commit_log)
    try:
        rng = random.Random(23)
        all_offsets = [o for o, _ in log.iter_records()]
        files, starts, views = log._snap
        lengths = [f.length for f in files]
        for _ in range(300):
            maps: list[Any] = [
                rng.choice(
                    [f.mm, f.mm, CountingMap(rng.randrange(0, n + 1)), None, CountingMap(ValueError())]
                )
                for f, n in zip(files, lengths, strict=True)
            ]
            offsets = rng.sample(all_offsets, rng.randrange(0, 70)) + [
                rng.randrange(-5, 2**40) for _ in range(3)
            ]
            if rng.random() < 0.5:
                offsets.sort()
            max_offset = rng.choice([log.max_offset, rng.randrange(0, log.max_offset + 1)])
            checked_both(maps, views, starts, lengths, max_offset, offsets)
    finally:
        log.close()
