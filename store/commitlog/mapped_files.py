"""The CommitLog: the broker's queue of 20-digit-named, preallocated, memory-mapped files.

Each file is named by the absolute offset of its first byte and has the configured size. Records are
size-prefixed; when a record does not fit, the broker writes an 8-byte blank marker
(``[size][BLANK_MAGIC_CODE]``) and continues in the next file. Files are preallocated, so the end of
the data is found by walking records until one fails to check (zeros, or a torn tail of a record
being written): that is the broker's own recovery rule, and it is re-applied on ``refresh()`` so a
store a live broker is still writing shows new files and a growing tail without a restart.

Reads hand out ``memoryview`` slices of the maps, never copies of files.

**A live broker's layout is not damage.** A running 4.9.x broker keeps the next file pre-created
(full size, zeros) and the current file is zeros after its write position. Files after the last one
that begins with data are "pre-created": the data ends in the last data file, and zeros there are
"not written yet", never a corrupt record to search past. ``refresh()`` walks on from the end it
already knows, so it visits only what was appended since (``bytes_visited`` counts what the walks
examine), never the known zeros again.

**Safe-length contract (mapped files may shrink under us).** A mapped file can be cut while mapped:
a broker's ``truncateDirtyFiles`` or a slave reset, an operator's ``truncate``, or ``cp``/``>``
replacing it (O_TRUNC, then write). Touching a mapped page past the file's new end raises SIGBUS,
which kills the process (exit 135): Python cannot catch it. So no reader may touch a map beyond
``MappedFile.safe_length()``: the mapped length cut to the file's current size, from ``fstat`` on the
map's own descriptor (``mmap.size()``, about 0.5 us), so it follows the mapped inode even after a
rename. Whatever reads the bytes (this module's walks, ``read_record``, or compiled code that
releases the GIL) gets a buffer plus a length checked at most that long before: ``read_record``,
``read_record_copy`` (VIEW's, in ``store.commitlog.view_read``) and ``read_records`` check each file once per
call, a walk re-checks at each file and every ``RECHECK_EVERY`` bytes of progress, ``refresh()``
remaps a shrunk file and re-walks it from its start.
A shrink is logged once per file. A writable store refreshes after every put with ``refresh(tail=True)``:
the files from the one holding the known end on, and whether the next file exists, are checked
then, and every file (the listing, each file's inode and size) only when the last full check is
``FULL_CHECK_EVERY`` old or anything looked changed, so a put costs the same whatever the number
of files; a change to an older file is seen within that time (at once after a SIGBUS fault).
The remaining window is the time between the check and the read
(microseconds for a record; one ``RECHECK_EVERY`` stretch for a walk); under load some read is
nearly always in it, so ``store.platform.sigbus`` installs a SIGBUS guard that turns such a late read into
zeros, and ``refresh()`` remaps every file once the guard reports a fault. Answers are copied out
of the maps before they are queued on a socket (``server.remoting.processors.query_message``), so a slow
client never holds a page.

**Settled end.** A live writer appends a record in pieces (a slave receives arbitrary batches,
``transientStorePoolEnable`` commits pages), and BODYCRC does not cover the properties, so a record
whose size, body and lengths are written can still be missing its keys. ``settled_end`` is the end
of the records an indexer may take: every record followed by visible bytes (the next record's
header or a blank marker: writes are in order, so anything after a record means it is whole), and
the last record only when it is visibly complete (``record.looks_complete``: its properties end in
a written, non-zero byte). The index builder, and any batch indexer, processes ``[.., settled_end)`` only.

**Unreadable files.** A file that cannot be opened or mapped (permissions, EIO) is kept as a hole:
logged once, retried on every refresh, and the walks continue with the file after it, so one bad
file does not stop following the rest.
"""

from __future__ import annotations

import bisect
import functools
import logging
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.record_layout import BLANK_SIZE, SIZE_MAGIC_WIDTH, TOTAL_SIZE_WIDTH
from store.commitlog import record
from store.commitlog.view_read import copy_record
from store.errors import CommitLogError
from store.index.query_walk import read_checked
from store.platform import sigbus
from store.platform.file_facts import fd_facts
from store.warn_once import WarnOnce

_NAME = re.compile(r"^\d{20}$")
_I32 = struct.Struct(">i")
#: Zeros where a record's (or a blank's) TOTALSIZE and MAGICCODE would be: nothing written there.
_ZERO8 = bytes(SIZE_MAGIC_WIDTH)
log = logging.getLogger("store.commitlog.mapped_files")
#: ``store.commitlog.view_read.copy_record``'s view of one snapshot: maps, starts, mapped lengths,
#: shrink reporter.
_CopySnap = tuple[list[mmap.mmap | None], list[int], list[int], Callable[[int, int], None]]
#: ``_CopySnap`` and the written end (``CommitLog.view_snapshot``).
_ViewSnap = tuple[list[mmap.mmap | None], list[int], list[int], Callable[[int, int], None], int]
#: A walk over the CommitLog hands the pages it read back to the kernel every this many bytes.
RELEASE_EVERY = 64 << 20
#: A walk re-checks the file's safe length every this many bytes of progress (see the module docstring).
RECHECK_EVERY = 64 << 10
_NO_LIMIT = 1 << 62
#: ``refresh(tail=True)`` checks every file (lists the directory, each file's inode and size) when
#: the last such check is this old (seconds); in between only the files from the known end on.
FULL_CHECK_EVERY = 0.05


@dataclass(slots=True)
class MappedFile:
    """One CommitLog file mapped read-only; ``length`` is the file's size when it was mapped.

    ``error`` says why an unreadable file could not be mapped (then ``mm`` is None, ``length`` 0).
    """

    start: int
    path: Path
    length: int
    mm: mmap.mmap | None
    inode: int = 0
    error: str | None = None
    #: Stops the SIGBUS guard covering ``mm`` (``store.platform.sigbus.track``); called once it is unmapped.
    untrack: Callable[[], None] = sigbus.nothing

    def __post_init__(self) -> None:
        if self.mm is not None:
            self.untrack = sigbus.track(self.mm)

    @property
    def end(self) -> int:
        return self.start + self.length

    def view(self) -> memoryview:
        if self.mm is None:
            return memoryview(b"")
        return memoryview(self.mm)

    def safe_length(self) -> int:
        """How many bytes of the map can be read now: ``length`` cut to the file's current size.

        ``mmap.size()`` is ``fstat`` on the map's own descriptor, so it measures the mapped inode,
        whatever was renamed over the path since.
        """
        mm = self.mm
        if mm is None:
            return 0
        try:
            size = mm.size()
        except (OSError, ValueError):
            return 0
        return size if size < self.length else self.length

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # a view handed out earlier still uses it; the GC unmaps it later (and untracks)
            else:
                self.untrack()
            self.mm = None


def _map(path: Path) -> tuple[int, mmap.mmap | None, int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if st.st_size == 0:
            return 0, None, st.st_ino
        return st.st_size, mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ), st.st_ino
    finally:
        os.close(fd)


def _has_data(view: memoryview, length: int) -> bool:
    """A file whose first 8 bytes are written (a record or a blank marker): not merely pre-created."""
    return length >= SIZE_MAGIC_WIDTH and view[:SIZE_MAGIC_WIDTH] != _ZERO8


class CommitLog:
    """Read access to a CommitLog directory; ``refresh()`` picks up what a live writer added."""

    def __init__(self, directory: str | os.PathLike[str], mapped_file_size: int) -> None:
        self.directory = Path(directory)
        self.mapped_file_size = mapped_file_size
        self._files: list[MappedFile] = []
        self._starts: list[int] = []
        #: Each file's name and path as ``str``, for ``_unchanged``'s checks after every put.
        self._names: list[str] = []
        self._paths: list[str] = []
        self._views: list[memoryview] = []
        # (files, starts, views) replaced as one object, so a reader on another thread never pairs
        # one refresh's file list with another's views.
        self._snap: tuple[list[MappedFile], list[int], list[memoryview]] = ([], [], [])
        #: The mapped length and map of each file of ``_snap`` (what ``read_records`` may read), per snapshot.
        self._snap_lengths: tuple[object, tuple[list[int], list[mmap.mmap | None]]] = (None, ([], []))
        #: What ``read_record_copy`` needs of ``_snap``, made once per refresh: (maps, starts, mapped
        #: lengths, the reporter of a file found shorter than its map).
        self._copy_snap: _CopySnap = ([], [], [], self._shrunk_at([]))
        self._max_offset = 0
        self._settled_end = 0
        #: (offset, size) of the last whole record before ``max_offset``, None when there is none.
        self._last_record: tuple[int, int] | None = None
        self._lock = threading.RLock()
        #: Damage met while reading (a file of the wrong size), each logged once.
        self.warn = WarnOnce(log)
        #: Corrupt stretches the walks skipped: offset of the bad record -> offset where records resume.
        self.corrupt: dict[int, int] = {}
        #: Files that could not be read: start offset -> why (retried on every refresh).
        self.unreadable: dict[int, str] = {}
        #: Bytes the walks examined (records checked, stretches searched): what a refresh costs.
        self.bytes_visited = 0
        sigbus.install()
        self._faults_seen = sigbus.fault_count()
        #: When every file was last checked (``time.monotonic``): ``refresh(tail=True)``'s clock.
        self._full_checked_at = 0.0
        self.refresh()

    # -- file queue ----------------------------------------------------------------------------------

    def refresh(self, *, tail: bool = False) -> None:
        """Re-read the directory: map new files, remap grown or shrunk ones, forget deleted ones,
        find the end and the settled end. With ``tail`` (a writable store after a put), only the
        files from the known end on when every file was checked less than ``FULL_CHECK_EVERY`` ago
        and nothing there changed (``_tail_unchanged``)."""
        with self._lock:
            if tail and self._tail_unchanged():
                self._max_offset = self._find_end()
                self._settled_end = self._find_settled_end()
                return
            self._full_checked_at = time.monotonic()
            try:
                names = sorted(n for n in os.listdir(self.directory) if _NAME.match(n))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                raise CommitLogError(f"cannot list CommitLog directory {self.directory}: {exc}") from exc
            if self._unchanged(names):
                # Every check below found nothing to do: keep the snapshots (a writable store
                # refreshes after every put), and look for records past the known end only.
                self._max_offset = self._find_end()
                self._settled_end = self._find_settled_end()
                return
            old = {f.start: f for f in self._files}
            files: list[MappedFile] = []
            cut: int | None = None  # the lowest offset whose bytes changed under a known end
            faults = sigbus.fault_count()
            remap_all = faults != self._faults_seen
            if remap_all:
                # A read faulted on a cut page and got zeros from the guard: those pages are not the
                # file's. Remap every file, and walk the file holding the known end again (a file
                # that shrank is found below as usual).
                self._faults_seen = faults
                self.warn(
                    f"faulted:{faults}",
                    f"a read of a mapped CommitLog or index file faulted ({faults} so far: a file was cut "
                    "under this process, or a disk error); it read zeros instead of dying; every file "
                    "is mapped again",
                )
                i = bisect.bisect_right(self._starts, self._max_offset) - 1
                if i >= 0:
                    cut = self._starts[i]
            for name in names:
                start = int(name)
                path = self.directory / name
                known = old.pop(start, None)
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    files.append(self._unreadable(start, path, exc))
                    continue
                if known is not None and known.mm is not None and known.inode == st.st_ino:
                    now = known.safe_length()
                    if now == known.length == st.st_size and not remap_all:
                        files.append(known)
                        continue
                    if now < known.length:
                        self.warn(
                            f"shrunk:{name}:{now}",
                            f"CommitLog file {path} shrank from {known.length} to {now} bytes while "
                            "mapped (a broker's recovery, a slave reset or a truncate): the records past "
                            "the cut are gone; reading the whole records before it",
                        )
                        cut = start + now if cut is None else min(cut, start + now)
                        # The same event seen from the remap below: "log it once", not twice.
                        self.warn.mark(f"size:{name}:{now}")
                elif known is not None and known.mm is not None:
                    cut = start if cut is None else min(cut, start)  # replaced by another file
                if known is not None:
                    known.close()
                try:
                    length, mm, inode = _map(path)
                except OSError as exc:
                    files.append(self._unreadable(start, path, exc))
                    cut = start if cut is None else min(cut, start)
                    continue
                if self.unreadable.pop(start, None) is not None:
                    log.info("CommitLog file %s is readable again", path)
                    cut = start if cut is None else min(cut, start)
                if length and length != self.mapped_file_size:
                    # Files are preallocated to full size: a short one was truncated (its records
                    # past the cut are gone; the ones before it still answer).
                    self.warn(
                        f"size:{name}:{length}",
                        f"CommitLog file {path} has {length} bytes, not mappedFileSizeCommitLog "
                        f"{self.mapped_file_size}: truncated or damaged; reading the whole records it holds",
                    )
                elif length == self.mapped_file_size:
                    # Whole again (restored): a later cut of this file is a new event, reported again.
                    self.warn.forget(f"shrunk:{name}:")
                    self.warn.forget(f"size:{name}:")
                files.append(MappedFile(start, path, length, mm, inode))
            for gone in old.values():
                gone.close()
            self._files = files
            self._starts = [f.start for f in files]
            self._names = [f.path.name for f in files]
            self._paths = [str(f.path) for f in files]
            self._views = [f.view() for f in files]
            self._snap = (self._files, self._starts, self._views)
            self._copy_snap = (
                [f.mm for f in files],
                self._starts,
                [f.length for f in files],
                self._shrunk_at(files),
            )
            if cut is not None and cut <= self._max_offset:
                self._restart_at(cut)
            self._max_offset = self._find_end()
            self._settled_end = self._find_settled_end()

    def refresh_written(
        self,
        first: int,
        end: int,
        last: tuple[int, int],
        written: bytes,
        writer_file: tuple[int, int] | None = None,
    ) -> bool:
        """``refresh(tail=True)`` after this process's own writer appended whole records at
        ``[first, end)`` of the last file (``last``: the last one's offset and size; ``written``:
        the bytes it wrote there), without walking them again; False, with nothing changed, when
        anything but that case holds (the caller then refreshes as usual, which walks and checks
        them).

        The case: ``first`` is the known end and the settled end, the tail is unchanged
        (``_tail_unchanged``: within ``FULL_CHECK_EVERY`` of a full check, no SIGBUS fault, the
        files from the known end on the same inode and size, no next file), ``[first, end)`` lies
        in the last file, the map reads the first and the last record's TOTALSIZE and MAGICCODE as
        written (the write reached the file this map reads, at the place it says) and zeros after.
        The records in between are not read: the writer wrote them from ``written`` in the same
        ``pwrite``, and the map reading them would fault every page in for nothing (the dispatchers
        read ``written``, ``Reput.dispatch_written``). BODYCRC is not computed again, and the
        records are whole when the write returned, so the settled end is ``end`` (the
        still-arriving rule is for another process's writer).

        ``writer_file``: (start, descriptor) of the file the writer wrote them through
        (``StoreWriter.open_file``). When it is the last mapped file, the tail's check is one
        ``fstat`` of that descriptor (``_written_file_unchanged``) instead of ``_tail_unchanged``'s
        ``stat`` of the path and look for a next file."""
        with self._lock:
            if end <= first or first != self._max_offset or first != self._settled_end:
                return False
            if end - first != len(written) or last[0] + last[1] != end:
                return False
            files = self._files
            if not files:
                return False
            i = len(files) - 1
            f = files[i]
            if f.mm is None or not f.start <= first or end > f.start + f.length:
                return False
            if writer_file is not None and writer_file[0] == f.start:
                if not self._written_file_unchanged(f, writer_file[1]):
                    return False
            elif not self._tail_unchanged():
                return False
            view = self._views[i]
            pos, tail = first - f.start, last[0] - f.start
            width = SIZE_MAGIC_WIDTH
            if view[pos : pos + width] != written[:width]:
                return False
            at = last[0] - first
            if view[tail : tail + width] != written[at : at + width]:
                return False
            stop = end - f.start
            if stop + width <= f.length and view[stop : stop + width] != _ZERO8:
                return False
            self._max_offset = self._settled_end = end
            self._last_record = last
            return True

    def _unchanged(self, names: list[str]) -> bool:
        """The files ``refresh`` would keep as they are, all of them, and no other: the same names,
        each file mapped, the same inode at its path, its size the mapped length, and no SIGBUS
        fault since the last refresh.

        The checks ``refresh``'s loop makes, in the same order, for the case a writable store meets
        after nearly every put; anything else (a new, deleted, replaced, cut, grown or unreadable
        file, a fault) is False and the loop handles it as it always did."""
        if names != self._names or sigbus.fault_count() != self._faults_seen:
            return False
        return self._files_unchanged(0)

    def _tail_unchanged(self) -> bool:
        """What ``_unchanged`` checks, for the files from the one holding the known end on (those a
        writer appends to), and no file after the last: True only within ``FULL_CHECK_EVERY`` of
        the last full check and with no SIGBUS fault since. A file the writer adds (or anything
        else found) is False: the full refresh maps it."""
        files = self._files
        if not files or not self._recently_checked():
            return False
        if not self._files_unchanged(max(bisect.bisect_right(self._starts, self._max_offset) - 1, 0)):
            return False
        after = files[-1].start + self.mapped_file_size
        return not os.path.exists(os.path.join(self.directory, f"{after:020d}"))

    def _recently_checked(self) -> bool:
        """Within ``FULL_CHECK_EVERY`` of the last full check and no SIGBUS fault since: when the
        tail's cheaper checks may stand in for a full refresh."""
        return (
            time.monotonic() - self._full_checked_at < FULL_CHECK_EVERY
            and sigbus.fault_count() == self._faults_seen
        )

    def _written_file_unchanged(self, f: MappedFile, fd: int) -> bool:
        """``_tail_unchanged`` for a settle of this process's own appends to ``f``, the last mapped
        file, through the writer's descriptor ``fd`` of it: within ``FULL_CHECK_EVERY`` of the last
        full check, no SIGBUS fault since, and one ``fstat`` of ``fd`` finding the inode ``f`` maps,
        still linked (not deleted, nor replaced by a rename: the writer's own ``_check_not_cut``
        rule) and of the mapped length (not cut, not grown).

        Two things ``_tail_unchanged`` also does are not needed here. The path's ``stat``: the
        descriptor is the file the bytes went to, so its inode, link count and size say what the
        path's would about those bytes. The look for a file after ``f``: the writer has not rolled
        over (it still writes ``f``), so a next file could only be another process's, which changes
        nothing of what is settled and is mapped by the next full check, at most
        ``FULL_CHECK_EVERY`` later."""
        if not self._recently_checked():
            return False
        try:
            inode, links, size = fd_facts(fd)
        except OSError:
            return False
        return links > 0 and inode == f.inode and size == f.length

    def _files_unchanged(self, first: int) -> bool:
        """Each file from index ``first`` on mapped, with the same inode at its path and its size
        the mapped length. One ``stat`` per file: the same inode at the path means the map's own
        ``fstat`` (``safe_length``) would find the same size, so it is not asked again."""
        files, paths = self._files, self._paths
        stat = os.stat
        for i in range(first, len(files)):
            f = files[i]
            if f.mm is None:
                return False
            try:
                st = stat(paths[i])
            except OSError:
                return False
            if st.st_ino != f.inode or st.st_size != f.length:
                return False
        return True

    def _unreadable(self, start: int, path: Path, exc: OSError) -> MappedFile:
        reason = exc.strerror or str(exc)
        self.unreadable[start] = reason
        self.warn(
            f"unreadable:{start}",
            f"cannot read CommitLog file {path}: {reason}; its records are skipped, the files after it "
            "are still followed (retried on every refresh)",
        )
        return MappedFile(start, path, 0, None, 0, reason)

    def _restart_at(self, cut: int) -> None:
        """Bytes at ``cut`` changed under the known end: walk again from the start of that file."""
        i = bisect.bisect_right(self._starts, cut) - 1
        restart = self._starts[i] if i >= 0 else 0
        self._max_offset = min(self._max_offset, restart)
        self._last_record = None
        for bad in [b for b in self.corrupt if b >= restart]:
            del self.corrupt[bad]

    def release(self, start: int, end: int) -> None:
        """Tell the kernel the pages of ``[start, end)`` are not needed by this process any more.

        Walking a CommitLog touches every page it reads; the pages stay in the page cache, but
        without this they would also stay counted in this process's resident memory.
        """
        if end <= start:
            return  # nothing walked (a refresh or reput pass that found nothing new)
        page = mmap.PAGESIZE
        # Only the files the range overlaps (of one snapshot: a refresh on another thread replaces
        # the lists together): a put's reput releases a few bytes of the last file, and a walk over
        # every file of a large store would make each put cost more as it grows.
        files, starts, _ = self._snap
        first = max(bisect.bisect_right(starts, start) - 1, 0)
        for i in range(first, len(files)):
            f = files[i]
            if f.start >= end:
                break
            lo = max(start, f.start) - f.start
            hi = min(end, f.end) - f.start
            if hi <= lo or f.mm is None:
                continue
            lo -= lo % page
            hi -= hi % page
            if hi > lo:
                try:
                    f.mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
                except (OSError, ValueError):
                    pass

    def release_all(self) -> None:
        """``release`` every mapped page: they stay in the page cache, not in this process's RSS."""
        files = self._files
        if files:
            self.release(files[0].start, files[-1].end)

    def _find_end(self) -> int:
        """Walk records from the last known good end (or the last file's start) to the first bad one."""
        if not self._files:
            self._last_record = None
            return 0
        known = self._max_offset
        files = self._files
        quick = self._quick_end(known)
        if quick is not None:
            return quick
        # No known end: start at the last file holding data (a running broker pre-creates the next).
        start_idx = len(files) - 1
        while start_idx > 0 and files[start_idx].error is None:
            if _has_data(self._views[start_idx], files[start_idx].safe_length()):
                break
            start_idx -= 1
        pos_abs = files[start_idx].start
        if known and self._starts[0] <= known:
            i = bisect.bisect_right(self._starts, known) - 1
            f = files[i]
            if f.error is not None:
                start_idx, pos_abs = i, f.start  # the walk steps over the unreadable file
            elif known < f.end:
                start_idx, pos_abs = i, known
            elif known == f.end:
                return known  # a full file and no next file yet (or a gap after it)
            else:
                start_idx, pos_abs = i, f.start
        if pos_abs != known:
            self._last_record = None
        pos_abs = self._skip_whole(start_idx, pos_abs)
        end = released = pos_abs
        for offset, size in self._walk(start_idx, pos_abs):
            end = offset + size
            self._last_record = (offset, size)
            if end - released >= RELEASE_EVERY:
                # Hand the walked pages back as we go: released only at the end, a 1 GiB last file
                # would be resident all at once while the store opens.
                self.release(released, end)
                released = end
        self.release(released, end)
        return max(end, self._after_blank_end(end))

    def _quick_end(self, known: int) -> int | None:
        """``_find_end``'s answer when the known end lies inside the last file holding data and what
        follows it is whole records (those a writer appended since, if any, less than
        ``RECHECK_EVERY`` bytes) and then zeros: the case of a refresh after each put. None for
        anything else (a shrunk or unreadable file, a blank, a torn or corrupt record, data in a
        later file), which the full walk takes as before.

        The same answer, the same ``_last_record``, the same ``bytes_visited`` and the same pages
        released as ``_skip_whole`` and ``_walk`` give it: the records are checked by the same
        compiled ``record.whole_run``, within the file's safe length asked once before reading, and
        the end is where ``_walk`` would stop (zeros in the last file holding data, where
        ``_resync`` finds no record at TOTALSIZE 0 and does not search on)."""
        files = self._files
        i = bisect.bisect_right(self._starts, known) - 1
        if known <= 0 or i < 0:
            return None
        f = files[i]
        if f.mm is None or not known < f.end:
            return None
        length = f.safe_length()
        if length < f.length:
            return None
        view = self._views[i]
        pos = known - f.start
        soft = pos + RECHECK_EVERY
        if soft > length:
            return None
        stop, n = record.whole_run(view, pos, length, f.start, soft, _NO_LIMIT)
        if stop >= soft or stop + SIZE_MAGIC_WIDTH > length or view[stop : stop + SIZE_MAGIC_WIDTH] != _ZERO8:
            return None
        if not self._ends_the_data(files, self._views, i):
            return None
        if n:
            last, _ = record.whole_run(view, pos, length, f.start, length, n - 1)
            self._last_record = (f.start + last, stop - last)
        self.bytes_visited += stop - pos + SIZE_MAGIC_WIDTH
        self.release(known, f.start + stop)
        return f.start + stop

    def _skip_whole(self, idx: int, pos_abs: int) -> int:
        """Where ``_find_end``'s record-by-record walk may start in file ``idx``: the last record of
        the whole records from ``pos_abs`` on, found by the compiled ``record.whole_run``.

        The same check as ``_walk``'s (BODYCRC, PHYSICALOFFSET, the file's safe length asked again
        every ``RECHECK_EVERY`` bytes), one call per stretch instead of a Python step per record:
        opening a 1 GiB file of 300,000 records took 0.2 s of CPU in the per-record walk (issue 22).
        The walk then takes the last whole record (``_last_record``) and whatever follows it (a
        blank, corruption, the next file) as before. Pages are released as they are passed."""
        f = self._files[idx]
        if f.mm is None:
            return pos_abs
        view = self._views[idx]
        length = f.safe_length()
        pos = start = pos_abs - f.start
        last_run: tuple[int, int] | None = None
        released = pos
        while pos < length:
            soft = min(pos + RECHECK_EVERY, length)
            stop, n = record.whole_run(view, pos, length, f.start, soft, 1 << 62)
            if n == 0:
                break
            last_run = (pos, n)
            pos = stop
            if pos - released >= RELEASE_EVERY:
                self.release(f.start + released, f.start + pos)
                released = pos
            if stop < soft:
                break
            now = f.safe_length()
            if now < length:
                length = now  # cut under the map: ``_walk`` reports it and stops at the cut
        if last_run is None:
            return pos_abs
        run_start, n = last_run
        last, _ = record.whole_run(view, run_start, length, f.start, length, n - 1)
        self.bytes_visited += last - start
        self.release(f.start + released, f.start + last)
        return f.start + last

    def _find_settled_end(self) -> int:
        """Where indexing may go: ``max_offset``, or the start of a last record that may still be
        arriving (the one rule of the module docstring's "settled end")."""
        end = self._max_offset
        last = self._last_record
        if last is None or last[0] + last[1] != end:
            return end  # no record, or the data ends in a blank marker / a full file: all whole
        offset, size = last
        idx = self._file_index(offset)
        if idx is None:
            return offset
        f = self._files[idx]
        view = self._views[idx]
        safe = f.safe_length()
        pos = offset - f.start
        if pos + size > safe:
            return offset
        if record.looks_complete(view, pos, size):
            return end
        # Visible bytes after it (the next record's first bytes, or the next file's) mean the writer
        # has moved on: writes are in order, so the record is whole whatever its last byte.
        after = pos + size
        if after < safe:
            stop = min(after + SIZE_MAGIC_WIDTH, safe)
            if view[after:stop] != _ZERO8[: stop - after]:
                return end
        elif idx + 1 < len(self._files) and self._files[idx + 1].start == f.end:
            nxt = self._files[idx + 1]
            if _has_data(self._views[idx + 1], nxt.safe_length()):
                return end
        return offset

    def _after_blank_end(self, end: int) -> int:
        # A blank marker (or an exactly full file) at the very end makes the file full: the next
        # record goes to the next file, which may not exist yet.
        idx = self._file_index(end)
        if idx is None:
            return end
        f = self._files[idx]
        pos = end - f.start
        view = self._views[idx]
        safe = f.safe_length()
        if pos + SIZE_MAGIC_WIDTH <= safe and record.check(view, pos, safe) == record.BLANK:
            return f.end
        return end

    def _walk(
        self,
        idx: int,
        pos_abs: int,
        files: list[MappedFile] | None = None,
        views: list[memoryview] | None = None,
        stop: int | None = None,
    ) -> Iterator[tuple[int, int]]:
        """(offset, size) of each valid record from ``pos_abs`` in file ``idx`` onwards (up to ``stop``).

        A record that does not check is where the data ends, unless whole records follow it: then it
        is corruption, skipped (logged once) so the records after it still answer (``_resync``).
        Zeros in the last file that holds data, followed only by pre-created files, are the end.
        Never reads past a file's ``safe_length()``, re-checked every ``RECHECK_EVERY`` bytes.
        """
        files = self._files if files is None else files
        views = self._views if views is None else views
        check = record.check
        while idx < len(files):
            f = files[idx]
            if f.mm is None and f.error is not None:
                # Unreadable: a hole of one file; the records go on in the file after it.
                nxt_start = f.start + self.mapped_file_size
                idx += 1
                if idx >= len(files) or files[idx].start != nxt_start:
                    return
                pos_abs = nxt_start
                continue
            view = views[idx]
            pos = pos_abs - f.start
            length = f.safe_length()
            if length < f.length:
                self._shrunk(f, length)
            recheck = pos + RECHECK_EVERY
            last: bool | None = None  # computed when first needed
            while True:
                if stop is not None and f.start + pos >= stop:
                    return
                if pos >= recheck:
                    now = f.safe_length()
                    if now < length:
                        self._shrunk(f, now)
                        length = now
                    recheck = pos + RECHECK_EVERY
                if pos + BLANK_SIZE > length:
                    result = record.BLANK  # no room even for a blank marker: the file is full
                else:
                    result = check(view, pos, length, f.start + pos, check_crc=True)
                if result > 0:
                    self.bytes_visited += result
                    yield f.start + pos, result
                    pos += result
                    continue
                self.bytes_visited += SIZE_MAGIC_WIDTH
                if result == record.BLANK:
                    if length < f.length:
                        return  # cut short: the "full file" is a truncation, nothing follows it
                    break
                if last is None:
                    last = self._ends_the_data(files, views, idx)
                nxt = self._resync(view, pos, length, f.start, last=last)
                if nxt is None:
                    if last:
                        return
                    self._skipped_corrupt(f, pos, length)
                    break
                self._skipped_corrupt(f, pos, nxt)
                pos = nxt
            idx += 1
            if idx >= len(files) or files[idx].start != f.end:
                return
            pos_abs = files[idx].start

    @staticmethod
    def _ends_the_data(files: list[MappedFile], views: list[memoryview], idx: int) -> bool:
        """File ``idx`` is the last that holds data: every file after it is pre-created (zeros)."""
        for j in range(idx + 1, len(files)):
            f = files[j]
            if f.error is not None or _has_data(views[j], f.safe_length()):
                return False
        return True

    def _shrunk(self, f: MappedFile, now: int) -> None:
        self.warn(
            f"shrunk:{f.path.name}:{now}",
            f"CommitLog file {f.path} shrank from {f.length} to {now} bytes while mapped (a broker's "
            "recovery, a slave reset or a truncate): the records past the cut are gone; reading the "
            "whole records before it",
        )

    def _shrunk_at(self, files: list[MappedFile]) -> Callable[[int, int], None]:
        """``_shrunk`` for the file at an index of ``files`` (one snapshot's list)."""
        return functools.partial(self._shrunk_in, files)

    def _shrunk_in(self, files: list[MappedFile], index: int, now: int) -> None:
        self._shrunk(files[index], now)

    def _resync(self, view: memoryview, pos: int, length: int, base: int, *, last: bool) -> int | None:
        """Where whole records resume after the bad one at ``pos``, or None (the data ends here):
        ``record.resync``, the rule the Spark decode applies too, with the bytes it scanned counted."""
        nxt, scanned = record.resync(view, pos, length, base, last=last)
        self.bytes_visited += scanned
        return nxt

    def _skipped_corrupt(self, f: MappedFile, pos: int, resume: int) -> None:
        offset = f.start + pos
        self.corrupt[offset] = f.start + resume
        self.warn(
            f"corrupt:{offset}",
            f"CommitLog record at offset {offset} ({f.path}, byte {pos}) is corrupt: bytes up to offset "
            f"{f.start + resume} are skipped",
        )

    def _file_index(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0 or offset >= self._files[i].end:
            return None
        return i

    # -- queries -------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self._starts[0] if self._starts else 0

    @property
    def max_offset(self) -> int:
        """The offset just past the last whole record (where the next record will be written)."""
        return self._max_offset

    @property
    def files(self) -> list[MappedFile]:
        return list(self._files)

    def file_holding(self, offset: int) -> MappedFile | None:
        """The file whose mapped bytes hold ``offset`` (of one snapshot), or None; by bisection, so
        a reput near the end does not walk the list of a large store's files."""
        files, starts, _ = self._snap
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or offset >= files[i].end:
            return None
        return files[i]

    def vouch_whole(self, end: int) -> None:
        """This process's own writer wrote every record up to ``end`` and its writes returned: they
        are whole, so a last record ending in a zero byte (a property value ending in U+0000) is
        not one that may still be arriving, and the settled end is ``end``. Only a known end can be
        vouched for (``end`` at most ``max_offset``, which the walk found by checking each record)."""
        with self._lock:
            if self._settled_end < end <= self._max_offset:
                self._settled_end = end

    @property
    def settled_end(self) -> int:
        """The end of the records an indexer may take: a record that may still be arriving is not
        included (see the module docstring). At most ``max_offset``; fixed between refreshes."""
        return self._settled_end

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record (exactly TOTALSIZE bytes) at ``offset``, or None if there is none.

        Like the broker's ``selectOneMessageByOffset``: the size is read at ``offset`` and the record
        must lie within the written data; an offset inside a record yields None or that garbage size's
        bytes only if they fit, never an error. The file's safe length is checked first.
        """
        max_offset = self._max_offset
        if offset < 0 or offset >= max_offset:
            return None
        files, starts, views = self._snap
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or offset >= files[i].end:
            return None
        f = files[i]
        now = f.safe_length()
        if now < f.length:
            self._shrunk(f, now)
        limit = min(now, max_offset - f.start)
        pos = offset - f.start
        if pos + TOTAL_SIZE_WIDTH > limit:
            return None
        view = views[i]
        size = int.from_bytes(view[pos : pos + TOTAL_SIZE_WIDTH], "big", signed=True)  # TOTALSIZE is first
        return view[pos : pos + size] if 0 < size and pos + size <= limit else None

    def read_record_copy(self, offset: int, max_size: int) -> bytes | None:
        """``read_record``'s record as ``bytes``, or None also for a size over ``max_size``.

        One call (``store.commitlog.view_read.copy_record``, compiled when built) for what VIEW_MESSAGE_BY_ID
        needs: the file found, its safe length checked (a shrink logged as ``read_record`` logs it),
        the size word and bounds checked, the record copied out of the map. ``max_size`` refuses a
        garbage size word before its bytes are copied.
        """
        maps, starts, lengths, shrunk = self._copy_snap
        return copy_record(maps, starts, lengths, self._max_offset, offset, max_size, shrunk)

    def view_snapshot(
        self,
    ) -> tuple[list[mmap.mmap | None], list[int], list[int], Callable[[int, int], None], int]:
        """What ``read_record_copy`` reads, for the compiled request path, which reads many records
        in one call (``server.remoting.request_path``): (maps, starts, mapped lengths, the shrink
        reporter, the written end), taken together as ``read_record_copy`` takes them."""
        maps, starts, lengths, shrunk = self._copy_snap
        return maps, starts, lengths, shrunk, self._max_offset

    def select(self, offset: int, size: int) -> memoryview | None:
        """``size`` bytes at ``offset`` as the broker's ``CommitLog.getMessage(offset, size)`` reads them.

        No record check: the consume queue says where a record is and how long. The file is found by
        offset (offset 0 falls back to the first file, as in the broker); the bytes must lie within
        what is readable of it (a whole file, or up to the written end in the last one), else None.
        """
        files, starts, views = self._snap
        if not files or size < 0:
            return None
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or offset >= files[i].start + self.mapped_file_size:
            if offset != 0:
                return None
            i = 0
        f = files[i]
        now = f.safe_length()
        if now < f.length:
            self._shrunk(f, now)
        pos = offset % self.mapped_file_size
        readable = min(now, self._max_offset - f.start)
        if pos + size > readable:
            return None
        return views[i][pos : pos + size]

    def read_records(self, offsets: Sequence[int]) -> list[memoryview | None]:
        """The whole, checked record at each offset (``record.check``), or None: a query's records.

        One call for a query's offsets (``store.index.query_walk.read_checked``, compiled when built) over
        one snapshot of the file list. Each file an offset falls in is checked once per call, just
        before its first record is read (``safe_length``'s rule: ``mmap.size()`` cut to the mapped
        length), and that checked length is all the walk may read of it.
        """
        files, starts, views = self._snap
        cache = self._snap_lengths
        if cache[0] is not files:
            cache = self._snap_lengths = (files, ([f.length for f in files], [f.mm for f in files]))
        lengths, maps = cache[1]
        # Each file an offset falls in gets its size check (fstat) inside the call, just before its
        # first record is read; the ones found short are reported here.
        records, shrunk = read_checked(maps, views, starts, lengths, self._max_offset, offsets)
        for i, now in shrunk:
            self._shrunk(files[i], now)
        return records

    def iter_records(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[int, memoryview]]:
        """Yield ``(offset, record view)`` for every whole record from ``start`` across files.

        Stops quietly at the first record that does not check (the written end, or a torn tail);
        a blank end-of-file marker moves on to the next file. Records a live writer appended after
        the last ``refresh()`` are included if they check (the walk validates each one), unless
        ``end`` bounds the walk (an indexer passes ``settled_end``): no record starting at or past
        it is yielded.
        """
        files, starts, views = self._snap
        if not files:
            return
        offset = files[0].start if start is None else max(start, files[0].start)
        idx = bisect.bisect_right(starts, offset) - 1
        if idx < 0 or (offset >= files[idx].end and files[idx].error is None):
            return
        for rec_offset, size in self._walk(idx, offset, files, views, end):
            i = bisect.bisect_right(starts, rec_offset) - 1
            pos = rec_offset - files[i].start
            yield rec_offset, views[i][pos : pos + size]

    def next_offset(self, offset: int) -> int | None:
        """The offset of the record after the one at ``offset`` (skipping a blank to the next file)."""
        for rec_offset, size in self._walk_from(offset):
            return self._after_blank_end(rec_offset + size)
        return None

    def _walk_from(self, offset: int) -> Iterator[tuple[int, int]]:
        idx = self._file_index(offset)
        if idx is None:
            return iter(())
        return self._walk(idx, offset)

    def close(self) -> None:
        with self._lock:
            self._views = []
            for f in self._files:
                f.close()
            self._files = []
            self._starts = []
            self._names = []
            self._paths = []
            self._snap = ([], [], [])
            self._copy_snap = ([], [], [], self._shrunk_at([]))
            self._max_offset = 0
