"""The CommitLog: the broker's queue of 20-digit-named, preallocated, memory-mapped files.

Each file is named by the absolute offset of its first byte and has the configured size. Records are
size-prefixed; when a record does not fit, the broker writes an 8-byte blank marker
(``[size][BLANK_MAGIC_CODE]``) and continues in the next file. Files are preallocated, so the end of
the data is found by walking records until one fails to check (zeros, or a torn tail of a record
being written): that is the broker's own recovery rule, and it is re-applied on ``refresh()`` so a
store a live broker is still writing shows new files and a growing tail without a restart.

Reads hand out ``memoryview`` slices of the maps, never copies of files.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import re
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.message_flags import MAGIC_CODE_V1, MAGIC_CODE_V2
from store import record
from store.errors import CommitLogError
from store.warn_once import WarnOnce

_NAME = re.compile(r"^\d{20}$")
_I32 = struct.Struct(">i")
_MAGICS = tuple(m.to_bytes(4, "big", signed=True) for m in (MAGIC_CODE_V1, MAGIC_CODE_V2))
log = logging.getLogger("store.commitlog")
#: A walk over the CommitLog hands the pages it read back to the kernel every this many bytes.
RELEASE_EVERY = 64 << 20


@dataclass(slots=True)
class MappedFile:
    """One CommitLog file mapped read-only; ``length`` is the file's size when it was mapped."""

    start: int
    path: Path
    length: int
    mm: mmap.mmap | None

    @property
    def end(self) -> int:
        return self.start + self.length

    def view(self) -> memoryview:
        if self.mm is None:
            return memoryview(b"")
        return memoryview(self.mm)

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # a view handed out earlier still uses it; the GC unmaps it later
            self.mm = None


def _map(path: Path) -> tuple[int, mmap.mmap | None]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, None
        return size, mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


class CommitLog:
    """Read access to a CommitLog directory; ``refresh()`` picks up what a live writer added."""

    def __init__(self, directory: str | os.PathLike[str], mapped_file_size: int) -> None:
        self.directory = Path(directory)
        self.mapped_file_size = mapped_file_size
        self._files: list[MappedFile] = []
        self._starts: list[int] = []
        self._views: list[memoryview] = []
        # (files, starts, views) replaced as one object, so a reader on another thread never pairs
        # one refresh's file list with another's views.
        self._snap: tuple[list[MappedFile], list[int], list[memoryview]] = ([], [], [])
        self._max_offset = 0
        self._lock = threading.RLock()
        #: Damage met while reading (a file of the wrong size), each logged once.
        self.warn = WarnOnce(log)
        #: Corrupt stretches the walks skipped: offset of the bad record -> offset where records resume.
        self.corrupt: dict[int, int] = {}
        self.refresh()

    # -- file queue ----------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the directory: map new files, remap grown ones, forget deleted ones, find the end."""
        with self._lock:
            try:
                names = sorted(n for n in os.listdir(self.directory) if _NAME.match(n))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                raise CommitLogError(f"cannot list CommitLog directory {self.directory}: {exc}") from exc
            old = {f.start: f for f in self._files}
            files: list[MappedFile] = []
            for name in names:
                start = int(name)
                path = self.directory / name
                known = old.pop(start, None)
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    continue
                if known is not None and known.length == size:
                    files.append(known)
                    continue
                if known is not None:
                    known.close()
                try:
                    length, mm = _map(path)
                except OSError as exc:
                    raise CommitLogError(f"cannot map CommitLog file {path}: {exc}") from exc
                if length and length != self.mapped_file_size:
                    # Files are preallocated to full size: a short one was truncated (its records
                    # past the cut are gone; the ones before it still answer).
                    self.warn(
                        f"size:{name}:{length}",
                        f"CommitLog file {path} has {length} bytes, not mappedFileSizeCommitLog "
                        f"{self.mapped_file_size}: truncated or damaged; reading the whole records it holds",
                    )
                files.append(MappedFile(start, path, length, mm))
            for gone in old.values():
                gone.close()
            self._files = files
            self._starts = [f.start for f in files]
            self._views = [f.view() for f in files]
            self._snap = (self._files, self._starts, self._views)
            self._max_offset = self._find_end()

    def release(self, start: int, end: int) -> None:
        """Tell the kernel the pages of ``[start, end)`` are not needed by this process any more.

        Walking a CommitLog touches every page it reads; the pages stay in the page cache, but
        without this they would also stay counted in this process's resident memory.
        """
        page = mmap.PAGESIZE
        for f in self._files:
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
            return 0
        known = self._max_offset
        start_idx = len(self._files) - 1
        pos_abs = self._files[-1].start
        if known and self._starts[0] <= known:
            idx = self._file_index(known)
            if idx is not None:
                start_idx, pos_abs = idx, known
            elif known >= self._files[-1].end:
                return self._files[-1].end
        end = released = pos_abs
        for offset, size in self._walk(start_idx, pos_abs):
            end = offset + size
            if end - released >= RELEASE_EVERY:
                # Hand the walked pages back as we go: released only at the end, a 1 GiB last file
                # would be resident all at once while the store opens.
                self.release(released, end)
                released = end
        self.release(released, end)
        return max(end, self._after_blank_end(end))

    def _after_blank_end(self, end: int) -> int:
        # A blank marker (or an exactly full file) at the very end makes the file full: the next
        # record goes to the next file, which may not exist yet.
        idx = self._file_index(end)
        if idx is None:
            return end
        f = self._files[idx]
        pos = end - f.start
        view = self._views[idx]
        if pos + 8 <= f.length and record.check(view, pos, f.length) == record.BLANK:
            return f.end
        return end

    def _walk(
        self,
        idx: int,
        pos_abs: int,
        files: list[MappedFile] | None = None,
        views: list[memoryview] | None = None,
    ) -> Iterator[tuple[int, int]]:
        """(offset, size) of each valid record from ``pos_abs`` in file ``idx`` onwards.

        A record that does not check is where the data ends, unless whole records follow it: then it
        is corruption, skipped (logged once) so the records after it still answer (``_resync``).
        """
        files = self._files if files is None else files
        views = self._views if views is None else views
        while idx < len(files):
            f = files[idx]
            view = views[idx]
            pos = pos_abs - f.start
            length = f.length
            check = record.check
            last = idx == len(files) - 1
            while True:
                if pos + 8 > length:
                    result = record.BLANK  # no room even for a blank marker: the file is full
                else:
                    result = check(view, pos, length, f.start + pos, check_crc=True)
                if result > 0:
                    yield f.start + pos, result
                    pos += result
                    continue
                if result == record.BLANK:
                    break
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
    def _resync(view: memoryview, pos: int, length: int, base: int, *, last: bool) -> int | None:
        """Where whole records resume after the bad one at ``pos``, or None (the data ends here).

        First at ``pos + TOTALSIZE`` (a corrupt body or header field, the size intact): one check,
        cheap enough for the tail of a live file, where a torn record is followed by zeros. In a
        file that is not the last (records never span files, so it was complete), also by searching
        for the next magic code whose record checks at exactly its own PHYSICALOFFSET.
        """
        size = _I32.unpack_from(view, pos)[0]
        nxt = pos + size
        if size >= record.MIN_RECORD_SIZE and nxt + 8 <= length:
            if record.check(view, nxt, length, base + nxt, check_crc=True) > 0:
                return nxt
        if last:
            return None
        search = pos + 1
        while search < length:
            hits = [h for h in (view.obj.find(m, search) for m in _MAGICS) if h >= 0]  # type: ignore[union-attr]
            if not hits:
                return None
            at = min(hits) - 4
            if at > pos and record.check(view, at, length, base + at, check_crc=True) > 0:
                return at
            search = min(hits) + 1
        return None

    def _skipped_corrupt(self, f: MappedFile, pos: int, resume: int) -> None:
        offset = f.start + pos
        self.corrupt[offset] = f.start + resume
        self.warn(
            f"corrupt:{offset}",
            f"CommitLog record at offset {offset} ({f.path}, byte {pos}) is corrupt: bytes up to offset "
            f"{f.start + resume} are skipped, the records after them still answer",
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

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record (exactly TOTALSIZE bytes) at ``offset``, or None if there is none.

        Like the broker's ``selectOneMessageByOffset``: the size is read at ``offset`` and the record
        must lie within the written data; an offset inside a record yields None or that garbage size's
        bytes only if they fit, never an error.
        """
        if offset < 0 or offset >= self._max_offset:
            return None
        files, starts, views = self._snap
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or offset >= files[i].end:
            return None
        f = files[i]
        view = views[i]
        pos = offset - f.start
        limit = min(f.length, self._max_offset - f.start)
        if pos + 4 > limit:
            return None
        size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        if size <= 0 or pos + size > limit:
            return None
        return view[pos : pos + size]

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
        pos = offset % self.mapped_file_size
        readable = min(f.length, self._max_offset - f.start)
        if pos + size > readable:
            return None
        return views[i][pos : pos + size]

    def iter_records(self, start: int | None = None) -> Iterator[tuple[int, memoryview]]:
        """Yield ``(offset, record view)`` for every whole record from ``start`` across files.

        Stops quietly at the first record that does not check (the written end, or a torn tail);
        a blank end-of-file marker moves on to the next file. Records a live writer appended after
        the last ``refresh()`` are included if they check (the walk validates each one).
        """
        files, starts, views = self._snap
        if not files:
            return
        offset = files[0].start if start is None else max(start, files[0].start)
        idx = bisect.bisect_right(starts, offset) - 1
        if idx < 0 or offset >= files[idx].end:
            return
        for rec_offset, size in self._walk(idx, offset, files, views):
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
            self._snap = ([], [], [])
            self._max_offset = 0
