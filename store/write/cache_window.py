"""The CommitLog's page cache held to the last bytes the writer wrote: older pages handed back.

Why: every byte appended lands in a page-cache page, and left alone the page cache grows by the
write rate until memory is full. On a virtual machine whose free memory goes back to the host (a
balloon with free page reporting, as here), each of those pages is fresh host memory: its first
touch (the ``pwrite``'s copy, or the zero fill of a read-ahead over the file's hole) faults in the
host. Under batch SENDs that first touch was about a fifth of the server's time (BENCHMARKS.md,
h35). Pages handed back a moment earlier are taken again by the next allocations while still warm,
so keeping the cache to a window behind the write position recycles them instead.

How: ``wrote(end)`` (the writer's thread, an integer test per append) asks a worker thread, every
``step`` bytes and never while a job runs, to advise ``POSIX_FADV_DONTNEED`` on the pages more than
``window`` bytes behind ``end`` (and to unmap them from the read side's maps first: the kernel does
not drop a page a process has mapped). ``DONTNEED`` never drops a dirty page: it starts the
writeback of what is dirty and drops what is clean. So each range is advised twice, at two
successive jobs: the first starts its writeback, the second (a ``step`` later) drops it. Nothing
written is lost or changed: the bytes are in the file, a read of them after the drop reads the disk.

Nothing here blocks the writer: a slow job (a busy disk) only means later jobs are skipped and
their ranges advised by the next one. A consumer reading more than ``window`` behind the head reads
from the disk, as it would once memory was full. ``window == 0`` (``commitLogCacheWindow=0``) keeps
the kernel's own policy: no thread is started. Setting ``accessMessageInMemoryMaxRatio`` (broker.conf
or in code; not ``commitLogCacheWindow``) sets the window to what that ratio makes the pull rules count as
"in memory" (``store.config.store_config.cache_window_for_ratio``).
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: Bytes written between two jobs (at most; a quarter of a smaller window): ~80 ms at 100 MB/s.
DEFAULT_STEP = 8 * 1024 * 1024

#: What a job does with one range of one file: (descriptor, offset in the file, length).
Advise = Callable[[int, int, int], None]


def _dontneed(fd: int, offset: int, length: int) -> None:
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class CacheWindow:
    """Hands back the CommitLog pages more than ``window`` bytes behind what the writer wrote.

    ``directory`` and ``file_size``: the CommitLog's files (named by their start offset).
    ``start``: the CommitLog offset the writer starts at (nothing before it is advised: pages of a
    store that was opened may be read by consumers catching up; they age out of the cache as usual).
    ``unmap(lo, hi)``: unmaps CommitLog offsets ``[lo, hi)`` from the read side's maps (called on
    the worker thread). ``advise`` replaces ``posix_fadvise(DONTNEED)`` (tests)."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        window: int,
        *,
        start: int = 0,
        step: int | None = None,
        unmap: Callable[[int, int], None] | None = None,
        advise: Advise = _dontneed,
    ) -> None:
        page = mmap.PAGESIZE
        if step is None:  # a small window is kept small: a quarter of it, not 8 MiB, between jobs
            step = min(DEFAULT_STEP, max(window // 4, page))
        if window <= 0 or step <= 0:
            raise ValueError(f"window and step must be positive, got {window} and {step}")
        self._directory = directory
        self._file_size = file_size
        self._window = window
        self._step = step
        self._unmap = unmap
        self._advise = advise
        #: Ranges still to advise start here; the last job advised up to ``_last_hi``.
        self._lo = self._last_hi = start - start % page
        #: ``end`` at the last job asked: the next is asked ``step`` later.
        self._asked = start
        self._job: tuple[int, int] | None = None
        self._busy = False
        self._closed = False
        #: The worker's descriptors of the files it advised, by start offset.
        self._fds: dict[int, int] = {}
        self.jobs_done = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="commitlog-cache-window", daemon=True)
        self._thread.start()

    def wrote(self, end: int) -> None:
        """The writer's data now ends at CommitLog offset ``end``. Cheap: one comparison per call,
        and a hand-off to the worker every ``step`` bytes when it is idle."""
        if end - self._asked < self._step:
            return
        hi = end - self._window
        hi -= hi % mmap.PAGESIZE
        if hi <= self._last_hi:
            return
        with self._cond:
            if self._busy or self._closed:
                return  # the worker is still on the last range: the next call asks again
            self._job = (self._lo, hi)
            self._busy = True
            self._cond.notify()
        self._asked = end

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._job is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._job
                self._job = None
            assert job is not None
            try:
                self._hand_back(*job)
            except Exception:  # a job must never kill the worker; the writer does not depend on it
                log.exception("commitlog cache window: advising [%d, %d) failed", *job)
            with self._cond:
                # each range is advised twice: this one's writeback started now, the next job drops it
                self._lo, self._last_hi = self._last_hi, job[1]
                self._busy = False
                self.jobs_done += 1
                self._cond.notify_all()

    def _hand_back(self, lo: int, hi: int) -> None:
        if self._unmap is not None:
            self._unmap(lo, hi)
        size = self._file_size
        at = lo
        while at < hi:
            start = at - at % size
            stop = min(hi, start + size)
            fd = self._fd_of(start)
            if fd is not None:
                try:
                    self._advise(fd, at - start, stop - at)
                except OSError as exc:
                    log.debug("commitlog cache window: %s", exc)
            at = stop
        for start in [s for s in self._fds if s + size <= lo]:
            os.close(self._fds.pop(start))  # advised to its end twice: not needed again

    def _fd_of(self, start: int) -> int | None:
        fd = self._fds.get(start)
        if fd is None:
            try:
                fd = os.open(self._directory / f"{start:020d}", os.O_RDONLY)
            except OSError:
                return None  # gone (deleted by retention): nothing of it is cached any more
            self._fds[start] = fd
        return fd

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is running or asked (tests, benchmarks); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy, timeout)

    def close(self) -> None:
        """Stop the worker (after the job it runs, if any) and close its descriptors."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
