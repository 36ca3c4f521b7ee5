"""VIEW's one-call read (``store.commitlog.view_read.copy_record``): hand-built expectations, and the compiled
twin (``store.commitlog._view_read_fast``) agreeing with the pure-Python reference on the golden CommitLog and
on hostile input (offsets at every edge, size words that lie, files cut under their maps, closed maps).

The agreement tests call both implementations directly, so they check the C code whichever way the
rest of the suite runs (``RMQ_PURE_PYTHON=1`` or not).
"""

from __future__ import annotations

import importlib
import logging
import mmap
import os
import random
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.accel import pure_python
from store.commitlog import view_read
from store.commitlog.mapped_files import CommitLog
from store.commitlog.view_read import REFERENCE
from store.config.store_config import StoreConfig
from store.platform import sigbus

PY_COPY: Callable[..., Any] = REFERENCE["copy_record"]
I32 = struct.Struct(">i")
JAVA_STORE = "java-4.9.7-a"
MapFile = Callable[[bytes], tuple[mmap.mmap, Path]]


@pytest.fixture
def golden(stores_dir: Path) -> StoreConfig:
    return StoreConfig.load(stores_dir / f"{JAVA_STORE}.broker.conf")


def _fast() -> ModuleType:
    try:
        return importlib.import_module("store.commitlog._view_read_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


def test_the_module_uses_the_compiled_twin_unless_pure_python_is_asked() -> None:
    if pure_python():
        assert view_read.copy_record is PY_COPY
    else:
        assert view_read.copy_record is _fast().copy_record


class Shrinks:
    """The ``shrunk`` callback, recording what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, index: int, size: int) -> None:
        self.calls.append((index, size))


def both(*args: Any) -> Any:
    """The reference's answer (and its shrink reports), after checking the twin gives the same."""
    *rest, _ = args
    py_shrinks, c_shrinks = Shrinks(), Shrinks()
    expected = PY_COPY(*rest, py_shrinks)
    got = _fast().copy_record(*rest, c_shrinks)
    assert got == expected, (rest[3:], got, expected)
    assert type(got) is type(expected)
    assert c_shrinks.calls == py_shrinks.calls
    if isinstance(args[-1], Shrinks):
        args[-1].calls.extend(py_shrinks.calls)
    return expected


@pytest.fixture
def map_file(tmp_path: Path) -> Iterator[MapFile]:
    """Write bytes to a new file and map it read-only, as the CommitLog does."""
    maps: list[mmap.mmap] = []

    def make(data: bytes) -> tuple[mmap.mmap, Path]:
        path = tmp_path / f"f{len(maps)}"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            mm = mmap.mmap(fd, len(data), access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        maps.append(mm)
        return mm, path

    yield make
    for mm in maps:
        mm.close()


def two_files(map_file: MapFile) -> tuple[list[Any], bytes, bytes]:
    """File A at 1000 (64 bytes: records of 12 and 8 bytes, then zeros), a gap, file B at 2000
    (32 bytes: a record of 16 bytes, then a size word of -5)."""
    a = I32.pack(12) + b"a" * 8 + I32.pack(8) + b"b" * 4
    a += bytes(64 - len(a))
    b = I32.pack(16) + b"c" * 12 + I32.pack(-5)
    b += bytes(32 - len(b))
    ma, _ = map_file(a)
    mb, _ = map_file(b)
    return [ma, mb], a, b


STARTS = [1000, 2000]
LENGTHS = [64, 32]


def test_hand_built_files_at_every_edge(map_file: MapFile) -> None:
    maps, a, b = two_files(map_file)
    shrinks = Shrinks()

    def read(offset: int, max_offset: int = 2032, max_size: int = 1 << 24) -> bytes | None:
        return both(maps, STARTS, LENGTHS, max_offset, offset, max_size, shrinks)  # type: ignore[no-any-return]

    assert read(1000) == a[:12]
    assert read(1012) == a[12:20]
    assert read(2000) == b[:16]
    # Before, zeros, no room for a size word, the gap, a negative size, the end, negative.
    for offset in (
        -1,
        -(2**70),
        999,
        1020,
        1060,
        1061,
        1063,
        1064,
        1500,
        1999,
        2016,
        2029,
        2031,
        2032,
        2**70,
    ):
        assert read(offset) is None, offset
    assert read(1001) is None  # inside a record: the size word read there (0x00000c61...) does not fit
    # The written end cuts a record: not served; a record ending exactly at it is.
    assert read(2000, max_offset=2015) is None
    assert read(2000, max_offset=2016) == b[:16]
    assert read(2000, max_offset=2000) is None
    # max_size refuses larger records, and only them.
    assert read(2000, max_size=15) is None
    assert read(2000, max_size=16) == b[:16]
    assert read(1000, max_size=-1) is None
    assert shrinks.calls == []  # the files are as long as their maps


def test_size_words_that_lie(map_file: MapFile) -> None:
    for word in (0, -1, -(2**31), 2**31 - 1, 61, 60, 57, 56, 4, 3, 1):
        data = bytearray(64)
        I32.pack_into(data, 4, word)
        mm, _ = map_file(bytes(data))
        got = both([mm], [0], [64], 64, 4, 1 << 24, Shrinks())
        # From offset 4 the file has 60 bytes: a size of 1..60 fits, anything else is no record.
        assert got == (bytes(data[4 : 4 + word]) if 0 < word <= 60 else None), word


def test_a_file_cut_under_its_map_is_read_only_up_to_the_cut(
    map_file: MapFile,
) -> None:
    """Touching a page past the cut would raise SIGBUS: the guard would turn it into zeros and count
    a fault (without it the process dies), so an unchanged fault count shows nothing past it was read."""
    page = mmap.PAGESIZE
    records = [(0, 100), (100, page - 100), (page, 2 * page), (3 * page, page + 7)]
    data = bytearray(5 * page)
    for pos, size in records:
        I32.pack_into(data, pos, size)
        data[pos + 4 : pos + size] = bytes([pos % 251 + 1]) * (size - 4)
    faults = sigbus.fault_count()
    cuts = (0, 3, 4, 99, 100, 101, page - 1, page, page + 3, 3 * page - 1, 3 * page, 3 * page + 2, 4 * page)
    for cut in cuts:
        mm, path = map_file(bytes(data))
        os.truncate(path, cut)
        for pos, size in records:
            shrinks = Shrinks()
            got = both([mm], [0], [len(data)], len(data), pos, 1 << 24, shrinks)
            assert got == (bytes(data[pos : pos + size]) if pos + size <= cut else None), (cut, pos)
            assert shrinks.calls == [(0, cut)]
    assert sigbus.fault_count() == faults


def test_no_map_or_a_closed_map_reads_as_a_file_of_size_zero(
    map_file: MapFile,
) -> None:
    mm, _ = map_file(I32.pack(8) + b"x" * 56)
    mm.close()
    for m in (mm, None):
        shrinks = Shrinks()
        assert both([m], [0], [64], 64, 0, 1 << 24, shrinks) is None
        assert shrinks.calls == [(0, 0)]


def test_lengths_beyond_the_map_never_read_past_it(map_file: MapFile) -> None:
    mm, _ = map_file(I32.pack(68) + b"y" * 60)  # the record would need 4 bytes more than the file has
    assert both([mm], [0], [10**9], 10**9, 0, 1 << 24, Shrinks()) is None
    mm2, _ = map_file(I32.pack(64) + b"y" * 60)
    assert both([mm2], [0], [10**9], 10**9, 0, 1 << 24, Shrinks()) == I32.pack(64) + b"y" * 60


def test_offsets_and_starts_beyond_a_long_compare_as_in_python(map_file: MapFile) -> None:
    record = I32.pack(8) + b"w" * 4
    mm, _ = map_file(bytes(10) + record + bytes(46))  # the record at byte 10
    assert both([mm], [-(2**70)], [64], 2**70, 0, 1 << 24, Shrinks()) is None  # 2^70 bytes past the start
    assert both([mm], [-10], [64], 2**70, 0, 1 << 24, Shrinks()) == record
    assert both([mm], [-10], [64], 2**63 - 1, 0, 1 << 24, Shrinks()) == record
    assert both([mm], [-10], [64], 2**70, 2**63 - 1, 1 << 24, Shrinks()) is None
    assert both([mm], [0], [2**70], 2**70, 10, 2**70, Shrinks()) == record
    assert both([mm], [10], [64], 2**70, 2**70, 1 << 24, Shrinks()) is None


def test_a_garbage_size_over_max_size_is_not_copied(map_file: MapFile) -> None:
    size = 8 << 20
    mm, _ = map_file(I32.pack(size) + bytes(size - 4))
    for fn in (PY_COPY, _fast().copy_record):
        tracemalloc.start()
        try:
            assert fn([mm], [0], [size], size, 0, 1 << 20, Shrinks()) is None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, (fn, peak)
        assert fn([mm], [0], [size], size, 0, size, Shrinks()) == mm[:]


def test_both_agree_on_every_offset_of_the_golden_commitlog(golden: StoreConfig) -> None:
    log = CommitLog(golden.store_path_commit_log, golden.mapped_file_size_commit_log)
    try:
        offsets = [offset for offset, _ in log.iter_records()]
        assert len(offsets) == 5000
        maps, starts, lengths, _ = log._copy_snap
        records = [both(maps, starts, lengths, log.max_offset, o, 1 << 24, Shrinks()) for o in offsets]
        # The records are the CommitLog's, as read_record (VIEW's read until now) finds them.
        assert records == [bytes(log.read_record(o)) for o in offsets]  # type: ignore[arg-type]
        assert all(len(r) == I32.unpack_from(r)[0] for r in records)
        inside = [o + d for o in offsets[:300] for d in (1, 2, 3, 4, 17, 40)]
        edges = [-1, 0, log.max_offset - 1, log.max_offset, log.max_offset + 1, 2**63 - 1, 2**64]
        for o in inside + edges:
            got = both(maps, starts, lengths, log.max_offset, o, 1 << 24, Shrinks())
            old = log.read_record(o)
            assert got == (None if old is None else bytes(old)), o
    finally:
        log.close()


def test_both_agree_on_random_files_lengths_and_offsets(map_file: MapFile) -> None:
    rng = random.Random(7)
    served = 0
    for _ in range(200):
        data = bytearray(rng.randrange(1, 3000))
        pos = 0
        record_starts = []
        while pos + 4 <= len(data):  # mostly plausible records, some lies
            size = rng.choice([rng.randrange(4, 200)] * 6 + [rng.randrange(-10, 10), 2**31 - 1, -(2**31)])
            I32.pack_into(data, pos, size)
            record_starts.append(pos)
            pos += max(4, min(size, 200))
        mm, path = map_file(bytes(data))
        if rng.random() < 0.3:
            os.truncate(path, rng.randrange(0, len(data)))
        maps: list[mmap.mmap | None] = [mm, None] if rng.random() < 0.2 else [mm]
        starts = [5000, 5000 + len(data) + rng.randrange(0, 10)][: len(maps)]
        lengths = [rng.choice([len(data), len(data) // 2, len(data) + 100, 0]), 50][: len(maps)]
        max_offset = rng.choice([5000 + len(data), 5000 + rng.randrange(len(data) + 1), 10**12, 0])
        max_size = rng.choice([1 << 24, 100, 4, 0])
        for _ in range(60):
            offset = 5000 + rng.choice([rng.randrange(-10, len(data) + 20), *record_starts[:20]])
            got = both(maps, starts, lengths, max_offset, offset, max_size, Shrinks())
            served += got is not None
    assert served > 500


def test_bad_arguments_raise_not_crash(map_file: MapFile) -> None:
    mm, _ = map_file(I32.pack(8) + b"z" * 4)
    fast = _fast().copy_record
    with pytest.raises(TypeError):
        fast((mm,), [0], [8], 8, 0, 100, Shrinks())
    with pytest.raises(TypeError):
        fast([mm], [0], [8], 8, 0, 100)
    with pytest.raises(TypeError):
        fast([mm], ["0"], [8], 8, 0, 100, Shrinks())
    with pytest.raises(IndexError):
        fast([mm], [0], [], 8, 0, 100, Shrinks())
    with pytest.raises(IndexError):
        PY_COPY([mm], [0], [], 8, 0, 100, Shrinks())

    def fails(index: int, size: int) -> None:
        raise RuntimeError("the reporter failed")

    mm2, path = map_file(I32.pack(8) + b"z" * 4)
    os.truncate(path, 4)
    for fn in (PY_COPY, fast):
        with pytest.raises(RuntimeError):
            fn([mm2], [0], [8], 8, 0, 100, fails)


def test_commitlog_copy_reports_a_cut_file_once_and_serves_what_is_before_it(
    golden: StoreConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "commitlog"
    directory.mkdir()
    for f in golden.store_path_commit_log.iterdir():
        (directory / f.name).write_bytes(f.read_bytes())
    log = CommitLog(directory, golden.mapped_file_size_commit_log)
    try:
        offsets = [offset for offset, _ in log.iter_records()]
        last_file = next(f for f in reversed(log.files) if f.start <= offsets[-1])
        in_last = [o for o in offsets if o >= last_file.start]
        cut_at = in_last[len(in_last) // 2] + 10  # inside a record
        os.truncate(last_file.path, cut_at - last_file.start)
        with caplog.at_level(logging.WARNING, logger="store.commitlog.mapped_files"):
            for _ in range(3):
                for o in in_last:
                    got = log.read_record_copy(o, 1 << 24)
                    if o < cut_at - 10:
                        assert got is not None and len(got) == I32.unpack_from(got)[0]
                    else:
                        assert got is None
        shrank = [r for r in caplog.records if "shrank" in r.getMessage()]
        assert len(shrank) == 1 and str(last_file.path) in shrank[0].getMessage()
    finally:
        log.close()
