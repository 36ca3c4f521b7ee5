"""The CommitLog's page cache held to a window behind the writer (``store.write.cache_window``).

What is handed back: only pages more than the window behind what was written, each range twice
(its writeback started, then dropped), never a byte of the window; the bytes stay in the file.
The writer reports every append's end, and ``commitLogCacheWindow=0`` starts no thread.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import store.write.writer as writer_module
from protocol.message import decode_message
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import ConfigError, StoreConfig
from store.write.cache_window import CacheWindow
from store.write.writer import StoreRecord, StoreWriter

KIB = 1024
MIB = 1024 * KIB


def _recording(calls: list[tuple[int, int, int]]) -> Callable[[int, int, int], None]:
    def advise(fd: int, offset: int, length: int) -> None:
        calls.append((int(os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1]), offset, length))

    return advise


def test_only_pages_behind_the_window_are_advised_each_range_twice(tmp_path: Path) -> None:
    size = 256 * KIB  # files of 256 KiB: the ranges cross from one file into the next
    for start in (0, size):
        (tmp_path / f"{start:020d}").write_bytes(bytes(size))
    calls: list[tuple[int, int, int]] = []
    unmapped: list[tuple[int, int]] = []
    window = CacheWindow(
        tmp_path,
        size,
        64 * KIB,
        start=8 * KIB,
        step=32 * KIB,
        unmap=lambda lo, hi: unmapped.append((lo, hi)),
        advise=_recording(calls),
    )
    try:
        for end in (20 * KIB, 100 * KIB, 110 * KIB, 140 * KIB, 300 * KIB + 123, 420 * KIB):
            window.wrote(end)
            assert window.wait_idle(5)
    finally:
        window.close()
    # 20 KiB: not a step past the start. 100 KiB: [8, 36) (36 = 100 - 64). 110 KiB: under a step
    # since 100. 140 KiB: [8, 76) (the first range again, its writeback started). 300 KiB + 123:
    # [36, 236) (236 = 300 - 64, down to a page). 420 KiB: [76, 356), crossing into the second file.
    assert unmapped == [
        (8 * KIB, 36 * KIB),
        (8 * KIB, 76 * KIB),
        (36 * KIB, 236 * KIB),
        (76 * KIB, 356 * KIB),
    ]
    assert calls == [
        (0, 8 * KIB, 28 * KIB),
        (0, 8 * KIB, 68 * KIB),
        (0, 36 * KIB, 200 * KIB),
        (0, 76 * KIB, 180 * KIB),
        (size, 0, 100 * KIB),
    ]
    assert window.jobs_done == 4


def test_a_busy_worker_skips_the_ask_and_the_next_one_covers_it(tmp_path: Path) -> None:
    (tmp_path / f"{0:020d}").write_bytes(bytes(MIB))

    gate = threading.Event()
    calls: list[tuple[int, int]] = []

    def slow(fd: int, offset: int, length: int) -> None:
        gate.wait(5)
        calls.append((offset, length))

    window = CacheWindow(tmp_path, MIB, 64 * KIB, step=16 * KIB, advise=slow)
    try:
        window.wrote(128 * KIB)  # job [0, 64): held at the gate
        window.wrote(256 * KIB)  # the worker is busy: not asked
        gate.set()
        assert window.wait_idle(5)
        window.wrote(272 * KIB)  # asked again: [0, 208)
        assert window.wait_idle(5)
    finally:
        window.close()
    assert calls == [(0, 64 * KIB), (0, 208 * KIB)]


def _cached(fd: int, offset: int) -> bool:
    """Whether the page at ``offset`` is in the page cache: a read that must not wait on the disk
    (``RWF_NOWAIT``) fails with EAGAIN when it is not."""
    buf = bytearray(4 * KIB)
    try:
        os.preadv(fd, [buf], offset, os.RWF_NOWAIT)
    except BlockingIOError:
        return False
    return True


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs preadv(RWF_NOWAIT) to see the page cache")
def test_the_kernel_drops_the_pages_behind_the_window_and_the_bytes_stay(tmp_path: Path) -> None:
    size = 8 * MIB
    path = tmp_path / f"{0:020d}"
    data = os.urandom(6 * MIB)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        os.pwrite(fd, data, 0)
        os.pwrite(fd, b"p" * 4096, 7 * MIB)  # a probe page, outside what the window advises
        os.fsync(fd)  # clean: one advice drops them
        os.posix_fadvise(fd, 7 * MIB, 4096, os.POSIX_FADV_DONTNEED)
        try:
            droppable = _cached(fd, 0) and not _cached(fd, 7 * MIB)
        except OSError as exc:  # EOPNOTSUPP: no RWF_NOWAIT reads here (tmpfs)
            pytest.skip(f"cannot see this filesystem's page cache: {exc}")
        if not droppable:
            pytest.skip("this filesystem's page cache is not dropped by POSIX_FADV_DONTNEED (tmpfs)")
        window = CacheWindow(tmp_path, size, 2 * MIB, step=MIB)
        try:
            window.wrote(len(data))
            assert window.wait_idle(5)
        finally:
            window.close()
        assert [_cached(fd, at) for at in range(0, len(data), MIB)] == [False] * 4 + [True] * 2
        assert os.pread(fd, len(data), 0) == data  # read back from the disk: nothing lost
    finally:
        os.close(fd)


def _config(root: Path, window: int) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=MIB, commit_log_cache_window=window)


def test_the_writer_reports_every_append_and_a_zero_window_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[int, int]] = []
    ends: list[int] = []

    class Recorder:
        def __init__(self, directory: Path, file_size: int, window: int, **kw: object) -> None:
            made.append((window, int(kw["start"])))  # type: ignore[call-overload]
            unmap = kw["unmap"]  # the read side's maps let go of the pages first
            assert isinstance(getattr(unmap, "__self__", None), CommitLog) and unmap.__name__ == "release"

        def wrote(self, end: int) -> None:
            ends.append(end)

        def close(self) -> None:
            made.append((-1, -1))

    monkeypatch.setattr(writer_module, "CacheWindow", Recorder)
    body = b"x" * 3000
    with StoreWriter(_config(tmp_path / "s", 5 * MIB)) as w:
        for i in range(400):  # ~1.2 MiB: one roll-over, its blank end record included
            w.put(StoreRecord("T", body, queue_id=i % 2))
        last = w.position
    assert made == [(5 * MIB, 0), (-1, -1)]
    assert ends[-1] == last and ends == sorted(ends) and len(ends) == 401  # 400 records, 1 blank
    # the blank record that ends the first file is reported too (8 bytes), then the next file's first
    roll = next(i for i, end in enumerate(ends) if end > MIB)
    assert ends[roll - 1] - ends[roll - 2] == 8 and ends[roll] == MIB + ends[0]

    with StoreWriter(_config(tmp_path / "s", 5 * MIB)) as w:
        assert made[-1] == (5 * MIB, last)  # reopened: starts where the data ends
    made.clear()
    with StoreWriter(_config(tmp_path / "z", 0)) as w:
        w.put(StoreRecord("T", body))
    assert made == []


def test_commit_log_cache_window_is_read_from_broker_conf_and_refuses_a_negative() -> None:
    assert StoreConfig.from_properties({"commitLogCacheWindow": "0"}).commit_log_cache_window == 0
    assert StoreConfig.from_properties({}).commit_log_cache_window == 256 * MIB
    with pytest.raises(ConfigError, match="commit_log_cache_window"):
        StoreConfig.from_properties({"commitLogCacheWindow": "-1"})


def test_a_failing_job_leaves_the_worker_running(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever one job raises is logged; the next job still runs (a dead worker would leave the
    window asked for ever, and the cache growing as before)."""
    (tmp_path / f"{0:020d}").write_bytes(bytes(MIB))
    calls: list[int] = []

    def flaky(fd: int, offset: int, length: int) -> None:
        calls.append(length)
        if len(calls) == 1:
            raise RuntimeError("first job fails")

    window = CacheWindow(tmp_path, MIB, 64 * KIB, step=16 * KIB, advise=flaky)
    try:
        window.wrote(128 * KIB)
        assert window.wait_idle(5)
        window.wrote(256 * KIB)
        assert window.wait_idle(5)
    finally:
        window.close()
    assert calls == [64 * KIB, 192 * KIB] and window.jobs_done == 2
    assert "advising [0, 65536) failed" in caplog.text


def test_a_small_window_over_many_files_advises_and_every_record_stays(tmp_path: Path) -> None:
    """The real worker behind a writer whose 32 KiB files roll every few records (a quarter of the
    64 KiB window between jobs): it advises while the writer goes on, and closes the descriptors
    of the files it is done with; every record reads back after the writer is closed."""
    config = StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=32 * KIB, commit_log_cache_window=64 * KIB
    )
    bodies = [os.urandom(500 + i % 700) for i in range(600)]
    with StoreWriter(config) as w:
        window = w._cache_window
        assert window is not None
        for i, body in enumerate(bodies):
            w.put(StoreRecord("T", body, queue_id=i % 3))
            assert window.wait_idle(5)
        assert window.jobs_done >= 20
        assert len(window._fds) <= 4  # 64 KiB behind the head: a few 32 KiB files, not all of them
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        found = [decode_message(buf).body for _offset, buf in log.iter_records(0)]
    finally:
        log.close()
    assert found == bodies


def _ram() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_an_access_message_in_memory_max_ratio_in_broker_conf_sizes_the_window() -> None:
    """The ratio the 4.9.7 broker's pulls count as "in memory" (``checkInDiskByCommitOffset``:
    ``(long) (physical memory * (ratio / 100.0))`` behind the CommitLog's end) is what the writer keeps
    cached when broker.conf sets it; ``commitLogCacheWindow`` set too wins; a ratio counting nothing
    in memory keeps one 8 MiB step."""

    def window(**keys: str) -> int:
        return StoreConfig.from_properties(keys).commit_log_cache_window

    assert window(accessMessageInMemoryMaxRatio="10") == int(_ram() * 0.1)
    assert window(accessMessageInMemoryMaxRatio="40") == int(_ram() * 0.4)
    assert window(accessMessageInMemoryMaxRatio="10", commitLogCacheWindow=str(3 * MIB)) == 3 * MIB
    assert window(accessMessageInMemoryMaxRatio="10", commitLogCacheWindow="0") == 0
    assert window(accessMessageInMemoryMaxRatio="0") == 8 * MIB
    assert window(accessMessageInMemoryMaxRatio="-5") == 8 * MIB
    # the pull rules read the ratio itself, unchanged
    config = StoreConfig.from_properties({"accessMessageInMemoryMaxRatio": "10"})
    assert config.access_message_in_memory_max_ratio == 10


def test_a_ratio_set_in_code_sizes_the_window_as_broker_conf_does(tmp_path: Path) -> None:
    """The broker's ``MessageStoreConfig`` has one ratio field however it is set: a ``StoreConfig``
    built in code with the ratio gets the window broker.conf's key gives, the same for an explicit
    40 (the default's value, but set); not set, our window; a window given wins; a copy with
    another ratio follows it."""
    from_conf = StoreConfig.from_properties({"accessMessageInMemoryMaxRatio": "10"}).commit_log_cache_window
    assert from_conf == int(_ram() * 0.1)
    assert StoreConfig.for_store(tmp_path, access_message_in_memory_max_ratio=10).commit_log_cache_window == (
        from_conf
    )
    direct = StoreConfig(tmp_path, tmp_path / "commitlog", access_message_in_memory_max_ratio=40)
    assert direct.commit_log_cache_window == int(_ram() * 0.4)
    assert StoreConfig.for_store(tmp_path).commit_log_cache_window == 256 * MIB
    given = StoreConfig.for_store(
        tmp_path, access_message_in_memory_max_ratio=10, commit_log_cache_window=MIB
    )
    assert given.commit_log_cache_window == MIB
    copy = dataclasses.replace(direct, access_message_in_memory_max_ratio=10)
    assert copy.commit_log_cache_window == from_conf
    assert dataclasses.replace(given, access_message_in_memory_max_ratio=40).commit_log_cache_window == MIB
    assert dataclasses.replace(direct, max_index_num=1000).commit_log_cache_window == int(_ram() * 0.4)


def test_a_writer_opened_from_broker_conf_keeps_what_its_ratio_counts_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --writable`` on a broker.conf with ``accessMessageInMemoryMaxRatio=25`` on a machine
    of 64 MiB (made so here): the writer's window is 16 MiB, the figure the pull rules count as in
    memory (``getMessage``'s ``checkInDiskByCommitOffset``)."""
    from store.platform.memory import in_memory_bytes

    monkeypatch.setattr("store.platform.memory._PHYSICAL_MEMORY", 64 * MIB)
    made: list[int] = []

    class Recorder:
        def __init__(self, directory: Path, file_size: int, window: int, **kw: object) -> None:
            made.append(window)

        def wrote(self, end: int) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(writer_module, "CacheWindow", Recorder)
    conf = tmp_path / "broker.conf"
    conf.write_text("storePathRootDir=s\nmappedFileSizeCommitLog=1048576\naccessMessageInMemoryMaxRatio=25\n")
    config = StoreConfig.load(conf)
    with StoreWriter(config) as w:
        w.put(StoreRecord("T", b"x"))
    assert made == [16 * MIB]
    assert in_memory_bytes(config.access_message_in_memory_max_ratio) == 16 * MIB
