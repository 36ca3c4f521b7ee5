"""The settle's consume-queue dispatch written by the compiled ``append_entries`` is the Python
path's, byte for byte.

``append_entries`` (``store/consumequeue/_consume_queue_build_fast.c``) writes a run's entries
itself when each queue's entries go in whole at its end, and hands everything else (a roll, a
hole, a duplicate, a queue not yet opened, a full disk) to the builder's Python path, the
reference. Each test runs one seeded shape of appends and settles twice, once with the compiled
call and once on the Python path alone, and compares the consume-queue files, the index files, and
the pulls' and key queries' answers; the compiled run must have taken the compiled call (so a
shape that always fell back would not pass for a comparison). Kill points and a full disk at the
consume queue's write are included: both paths draw from one budget of bytes
(``tests.support.killed_build``, ``tests.support.cq_full_disk``).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import store.consumequeue.builder as builder_module
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.consumequeue import consume_queue_build
from store.consumequeue.builder import RESUME_MARK, ConsumeQueueBuilder
from store.errors import StoreError
from store.write.writer import StoreRecord
from tests.support.cq_full_disk import full_disk_while
from tests.support.killed_build import KILLED, killed_after

_FAST = consume_queue_build._fast
pytestmark = pytest.mark.skipif(_FAST is None, reason="the compiled append_entries is not built")

#: 50 entries a consume-queue file: the shapes fill and roll files.
CQ_FILE = 1000
TOPICS = ("Alpha", "Beta")

#: One settle: its appends, each (topic, queue id, messages in it).
Settle = list[tuple[str, int, int]]


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=CQ_FILE,
        max_hash_slot_num=64,
        max_index_num=400,
    )


class _Counted:
    """``append_entries`` wrapped: how its calls ended (written, handed back, failed)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.ends: Counter[str] = Counter()

    def __call__(self, *args: Any) -> Any:
        try:
            done = self.real(*args)
        except BaseException:
            self.ends["raised"] += 1
            raise
        self.ends["back" if not done else "failed" if done[4] else "written"] += 1
        return done


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], _Counted | None]]:
    """``use(compiled)``: the builder on the compiled call (counted) or on the Python path alone."""
    real = builder_module.append_entries

    def use(compiled: bool) -> _Counted | None:
        counted = _Counted(real) if compiled else None
        monkeypatch.setattr(builder_module, "append_entries", counted)
        return counted

    yield use
    _FAST._set_fault(-1, False)


def _records(topic: str, queue_id: int, first: int, n: int) -> list[StoreRecord]:
    return [
        StoreRecord(topic, b"body-%d" % i, f"TAGS\x01t{i % 3}\x02KEYS\x01k{i}\x02", queue_id=queue_id)
        for i in range(first, first + n)
    ]


def _play(store: WritableStore, settles: list[Settle], counter: list[int]) -> list[Any]:
    """Each settle's appends then ``settle``; what each settle said (refused puts included) and,
    right after it, each of its queues' end as a pull sees it (nothing acknowledged unreadable)."""
    said: list[Any] = []
    for settle in settles:
        try:
            for topic, queue_id, n in settle:
                store.append(_records(topic, queue_id, counter[0], n), store_timestamp=1_700_000_000_000)
                counter[0] += n
            said.append(f"settled {len(store.settle())}")
        except StoreError as exc:
            store.settle()
            said.append(f"{type(exc).__name__}")
        said.append([store.reader.get_message(t, q, 0, 1).max_offset for t, q, _ in settle])
        mark = store.config.consume_queue_dir / RESUME_MARK
        said.append(mark.read_bytes() if mark.exists() else None)
    return said


def _appenders(store: WritableStore) -> dict[tuple[str, int], tuple[int | None, int, int]]:
    """Each queue's write side as the builder holds it: the last file's start, where it ends, the
    end of its last entry's record (looked at inside on purpose: the compiled call moves them)."""
    builder = store.reader._cq_builder
    assert builder is not None
    return {key: (q.last_start, q.wrote, q.max_physic) for key, q in builder._queues.items()}


def _answers(store: WritableStore, total: int) -> list[Any]:
    """Every queue pulled from offset 0 and a sample of keys queried: offsets, sizes, bytes' digests."""
    out: list[Any] = []
    reader = store.reader
    for topic in TOPICS:
        for queue_id in range(4):
            got = reader.get_message(topic, queue_id, 0, 10_000)
            digests = [hashlib.sha1(bytes(b)).hexdigest()[:12] for b in got.buffers]
            out.append((topic, queue_id, got.status, got.next_begin_offset, got.max_offset, digests))
    for i in range(0, total, max(1, total // 25)):
        for topic in TOPICS:
            found = reader.query_message(topic, f"k{i}", 32, 0, 2**62)
            out.append((topic, i, [hashlib.sha1(bytes(b)).hexdigest()[:12] for b in found.buffers]))
    return out


def _files(root: Path) -> dict[str, str]:
    """Every consume-queue file (and the build mark) by path, and the index files in name order
    (named by their creation's wall clock): their bytes' digests."""
    out = {}
    for p in sorted((root / "consumequeue").rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    for i, p in enumerate(sorted((root / "index").iterdir())):
        out[f"index #{i}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _both(
    tmp_path: Path,
    use: Callable[[bool], _Counted | None],
    run: Callable[[StoreConfig], list[Any]],
) -> Counter[str]:
    """``run`` on a fresh store once compiled and once on the Python path: the same answers and
    files. Returns how the compiled run's calls ended."""
    results = []
    counted = None
    for compiled in (True, False):
        config = _config(tmp_path / ("compiled" if compiled else "python"))
        counted = use(compiled) or counted
        said = run(config)
        results.append((said, _files(config.store_path_root_dir)))
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    assert counted is not None
    return counted.ends


def _write(settles: list[Settle]) -> Callable[[StoreConfig], list[Any]]:
    def run(config: StoreConfig) -> list[Any]:
        counter = [0]
        with WritableStore(config, clock=lambda: 1_700_000_000_000) as store:
            for topic in TOPICS:
                store.create_topic(topic, 4)
            said = _play(store, settles, counter)
            return [said, _answers(store, counter[0]), _appenders(store)]

    return run


def _shape(name: str, seed: int) -> list[Settle]:
    rng = random.Random(seed)
    if name == "one SEND":
        return [[("Alpha", 0, 1)] for _ in range(120)]
    if name == "batches":
        return [[("Alpha", rng.randrange(2), rng.choice((1, 7, 32)))] for _ in range(40)]
    if name == "several queues":
        return [[(t, q, 1) for t in TOPICS for q in range(4)] for _ in range(30)]
    # mixed: 1..6 appends a settle, any topic and queue, 1..40 messages each
    return [
        [(rng.choice(TOPICS), rng.randrange(4), rng.randint(1, 40)) for _ in range(rng.randint(1, 6))]
        for _ in range(40)
    ]


@pytest.mark.parametrize("shape", ["one SEND", "batches", "several queues", "mixed"])
@pytest.mark.parametrize("seed", [1, 2])
def test_settles_write_what_the_python_path_writes(
    tmp_path: Path, paths: Callable[[bool], _Counted | None], shape: str, seed: int
) -> None:
    ends = _both(tmp_path, paths, _write(_shape(shape, seed)))
    assert ends["written"] > 0
    # The files fill and roll: those settles go the Python way (the compiled call hands them back).
    assert ends["back"] > 0


def test_a_settle_of_several_queues_sets_and_clears_the_mark(
    tmp_path: Path, paths: Callable[[bool], _Counted | None]
) -> None:
    ends = _both(tmp_path, paths, _write([[(t, q, 1) for t in TOPICS for q in range(4)] for _ in range(4)]))
    assert ends["written"] > 0
    mark = tmp_path / "compiled" / "consumequeue" / RESUME_MARK
    assert not mark.exists()  # removed at close: nothing pending


@pytest.mark.parametrize("room", [0, 20, 30, 150, 420])
def test_a_full_disk_at_the_consume_queue_write(
    tmp_path: Path, paths: Callable[[bool], _Counted | None], monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    """Settles under a full disk are refused alike (the dispatch failed: puts refused until one
    succeeds), nothing torn is left, and once there is room the queues are completed alike."""
    rng = random.Random(room)
    warm = [[(rng.choice(TOPICS), rng.randrange(4), rng.randint(1, 3)) for _ in range(3)] for _ in range(6)]
    full = [[(rng.choice(TOPICS), rng.randrange(4), rng.randint(1, 3)) for _ in range(3)] for _ in range(4)]
    after = [[(t, q, 2) for t in TOPICS for q in range(4)] for _ in range(3)]

    def run(config: StoreConfig) -> list[Any]:
        counter = [0]
        with WritableStore(config, clock=lambda: 1_700_000_000_000) as store:
            for topic in TOPICS:
                store.create_topic(topic, 4)
            said: list[Any] = _play(store, warm, counter)
            disk = full_disk_while(monkeypatch, room)
            next(disk)
            try:
                said += _play(store, full, counter)
                said.append(str(store.dispatch_failed is not None))
            finally:
                disk.close()
            said += _play(store, after, counter)
            said.append(str(store.dispatch_failed))
            return [said, _answers(store, counter[0]), _appenders(store)]

    ends = _both(tmp_path, paths, run)
    assert ends["failed"] > 0


def _cq(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


#: A settle of one message to each of 8 queues: the mark (8 bytes), 8 entries, the mark's clear.
EIGHT: Settle = [(t, q, 1) for t in TOPICS for q in range(4)]
SETTLE_BYTES = 8 + 8 * 20 + 8


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_settle_killed_at_any_byte_ends_with_the_queues_of_a_clean_one(
    tmp_path: Path, paths: Callable[[bool], _Counted | None], monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """A serving store's settle of 8 queues (its queues' files open: the compiled call writes it)
    killed after each byte of its consume-queue writes (every 3rd, and each write's edges): the
    files as the kill left them, opened by a new build, end as the settle's without the kill."""
    edges = {0, 7, 8, 9, 8 + 20, 8 + 160 - 1, 8 + 160, 8 + 160 + 4, SETTLE_BYTES}
    points = sorted(edges | set(range(0, SETTLE_BYTES + 1, 3)))
    counted = paths(compiled)
    clean = None
    for n in [None, *points]:
        root = tmp_path / "store"
        config = _config(root)
        counter = [0]
        with WritableStore(config, clock=lambda: 1_700_000_000_000) as store:
            for topic in TOPICS:
                store.create_topic(topic, 4)
            _play(store, [EIGHT, EIGHT], counter)
            if n is None:
                _play(store, [EIGHT], counter)
            else:
                with killed_after(monkeypatch, n):
                    try:
                        _play(store, [EIGHT], counter)
                        died = False
                    except KILLED:
                        died = True
                assert died == (n < SETTLE_BYTES), n
                # What the kill leaves on disk, before this process's close writes anything more.
                shutil.copytree(root, tmp_path / "killed", ignore=shutil.ignore_patterns("lock"))
        if n is None:
            clean = _cq(config.consume_queue_dir)
            shutil.rmtree(root)
            continue
        shutil.rmtree(root)
        killed = _config(tmp_path / "killed")
        builder = ConsumeQueueBuilder(killed)
        builder.run_once()
        builder.close()
        assert _cq(killed.consume_queue_dir) == clean, n
        shutil.rmtree(tmp_path / "killed")
    if counted is not None:  # every kill fell inside the compiled call
        assert counted.ends["raised"] == len([n for n in points if n < SETTLE_BYTES])


def test_what_is_not_the_common_case_is_handed_back_unwritten(tmp_path: Path) -> None:
    """Straight at ``append_entries``: a settle of one SEND's record is written only where it
    continues its queue; a hole, a duplicate, a full file, a closed file or an unknown queue give
    None and leave the file and the state as they were; several queues without the mark, False."""
    config = _config(tmp_path / "store")
    with WritableStore(config, clock=lambda: 1_700_000_000_000) as store:
        store.create_topic("Alpha", 4)
        store.append(_records("Alpha", 0, 0, 3), store_timestamp=1_700_000_000_000)
        store.append(_records("Alpha", 1, 3, 1), store_timestamp=1_700_000_000_000)
        store.settle()
    log = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    sizes = []
    at = 0
    for _ in range(4):
        sizes.append(int.from_bytes(log[at : at + 4], "big"))
        at += sizes[-1]
    second = sizes[0]  # the second record (queue offset 1 of Alpha/0) starts here
    view = memoryview(log)
    path = tmp_path / "queue"
    path.write_bytes(bytes(CQ_FILE))
    fd = os.open(path, os.O_RDWR)
    try:

        def call(state: array[int], *, known: bool = True, pos: int = second, end: int = second + sizes[1]):
            queues = {(b"Alpha", 0): (("Alpha", 0), state)} if known else {}
            return _FAST.append_entries(view, pos, end, 0, queues, set(), set(), -1)

        cases = {
            "a hole": array("q", (fd, 0, 0, CQ_FILE, second)),  # the queue ends at offset 0, not 1
            "a duplicate": array("q", (fd, 0, 20, CQ_FILE, second + sizes[1])),
            "a full file": array("q", (fd, 0, CQ_FILE, CQ_FILE, second)),
            "a closed file": array("q", (-1, 0, 20, CQ_FILE, second)),
            "no file yet": array("q", (fd, -1, 20, CQ_FILE, second)),
        }
        for why, state in cases.items():
            before = state.tolist()
            assert call(state) is None, why
            assert state.tolist() == before, why
        assert call(array("q", (fd, 0, 20, CQ_FILE, second)), known=False) is None
        assert path.read_bytes() == bytes(CQ_FILE)
        # Alpha/0 and Alpha/1 in one run, both at their queues' ends: the mark is needed.
        both = {
            (b"Alpha", 0): (("Alpha", 0), array("q", (fd, 0, 0, CQ_FILE, -1))),
            (b"Alpha", 1): (("Alpha", 1), array("q", (fd, 0, 0, CQ_FILE, -1))),
        }
        assert _FAST.append_entries(view, 0, at, 0, both, set(), set(), -1) is False
        state = array("q", (fd, 0, 20, CQ_FILE, second))
        changed: set[tuple[str, int]] = set()
        done = _FAST.append_entries(
            view, second, second + sizes[1], 0, {(b"Alpha", 0): (("Alpha", 0), state)}, changed, set(), -1
        )
        assert done == (1, second + sizes[1], 1, 1_700_000_000_000, 0, 0)
        assert state.tolist() == [fd, 0, 40, CQ_FILE, second + sizes[1]]
        assert changed == {("Alpha", 0)}
        entry = path.read_bytes()[20:40]
        assert entry[:12] == second.to_bytes(8, "big") + sizes[1].to_bytes(4, "big")
    finally:
        os.close(fd)


@pytest.mark.parametrize("queues", [64, 65])
def test_a_run_of_more_than_64_queues_is_handed_back(tmp_path: Path, queues: int) -> None:
    """One record to each of ``queues`` queues in one run, every queue open at its end: 64 are
    written by the compiled call, 65 handed back unwritten (the walk stops at the 65th)."""
    config = _config(tmp_path / "store")
    with WritableStore(config, clock=lambda: 1_700_000_000_000) as store:
        store.create_topic("Alpha", queues)
        for q in range(queues):
            store.append(_records("Alpha", q, q, 1), store_timestamp=1_700_000_000_000)
        store.settle()
    log = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    end = 0
    while end < len(log) and int.from_bytes(log[end : end + 4], "big") > 0:
        end += int.from_bytes(log[end : end + 4], "big")
    fds, states = [], {}
    try:
        for q in range(queues):
            fds.append(os.open(tmp_path / f"q{q}", os.O_RDWR | os.O_CREAT))
            states[(b"Alpha", q)] = (("Alpha", q), array("q", (fds[-1], 0, 0, CQ_FILE, -1)))
        mark = os.open(tmp_path / "mark", os.O_RDWR | os.O_CREAT)
        fds.append(mark)
        done = _FAST.append_entries(memoryview(log), 0, end, 0, states, set(), set(), mark)
        if queues > 64:
            assert done is None
            assert all(os.path.getsize(tmp_path / f"q{q}") == 0 for q in range(queues))
        else:
            assert done is not None and done[:3] == (queues, end, queues)
            assert all(os.path.getsize(tmp_path / f"q{q}") == 20 for q in range(queues))
    finally:
        for fd in fds:
            os.close(fd)
