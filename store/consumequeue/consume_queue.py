"""The ConsumeQueue: the broker's per-queue logical offset index, read as 4.9.7 reads it.

Every rule of the format lives here. A queue is ``consumequeue/TOPIC/QID/`` holding files named by
the 20-digit *byte* offset of their first entry, each ``mappedFileSizeConsumeQueue`` bytes (rounded
up to whole entries), zero padded. Entry N of the queue (its logical offset N) sits at byte N*20:
``commitLogOffset(i64) size(i32) tagsCode(i64)``, big endian.

What the broker derives from the files, reproduced here:

- **The written end** (``ConsumeQueue.recover``): from the third-last file on, entries are read
  until one has ``commitLogOffset < 0`` or ``size <= 0`` (the zero padding, or a torn entry a live
  broker is writing: its size is not there yet); a file read to its end goes on to the next one.
  Files before that window count as full; files after the end are dirty (the broker deletes them;
  we ignore them). ``max_offset`` = end of the last file kept, in entries.
- **The min offset** (``correctMinOffset``, run at load and after every clean-up): the first entry
  of the first file that points at or above the CommitLog's first offset; if none does, the value
  stays 0 as after a broker's ``load()``.
- **A read at offset N** (``getIndexBuffer``): only within N's file, from N to that file's written
  end; below the min offset, or without a file covering N, there is nothing.
- **Offset by time** (``getOffsetInQueueByTime``): one file picked by file mtime, then the broker's
  binary search in it with its exact probe order, its tie and equal-timestamp choices.

The maps are read-only; ``refresh()`` follows a live broker (new files, a growing tail, files the
broker deleted). The written end is proposed by a binary search over the entries (append-only, so
normally a valid prefix), which probes the entries before a file's first hole first and so does not
fault in zero pages, then confirmed by a forward scan of the entries before it (``_written_end``,
compiled twin ``first_invalid_entry``): garbage where the search probes cannot move the end past the
broker's.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import re
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.accel import load
from protocol.errors import ProtocolError
from protocol.index_key import java_string_hash
from protocol.message import decode_message
from protocol.record_layout import HOST_KIND_SHIFT, STORE_TIMESTAMP_AT, SYS_FLAG_AT
from store.commitlog.mapped_files import CommitLog
from store.warn_once import WarnOnce

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "ConsumeQueue",
    "CqEntry",
    "delay_level_table",
    "deliver_timestamp",
    "entry_bytes",
    "is_ext_addr",
    "store_time_picker",
    "tags_code",
]

CQ_STORE_UNIT_SIZE = 20
_ENTRY = struct.Struct(">qiq")
_OFFSET_SIZE = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
#: Bytes up to the end of SYSFLAG: fewer cannot say where STORETIMESTAMP is.
_SYS_FLAG_END = SYS_FLAG_AT + _I32.size
_NAME = re.compile(r"^\d{20}$")
#: ``ConsumeQueueExt.MAX_ADDR``: tagsCodes at or below it are addresses in a ConsumeQueueExt file.
_MAX_EXT_ADDR = -(2**31) - 1
#: Pre-blank entries (``fillPreBlank``) of a queue whose first file starts mid-file.
PRE_BLANK_SIZE = 2**31 - 1
log = logging.getLogger("store.consumequeue.consume_queue")


@dataclass(frozen=True, slots=True)
class CqEntry:
    """One 20-byte entry: where the record is in the CommitLog, its size, its tagsCode."""

    commit_log_offset: int
    size: int
    tags_code: int


def entry_bytes(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    """The 20 bytes of an entry as the broker writes them."""
    return _ENTRY.pack(commit_log_offset, size, tags_code)


def tags_code(tags: str | None) -> int:
    """``tagsString2tagsCode``: ``String.hashCode`` of TAGS (signed 32-bit), 0 without tags."""
    if not tags:
        return 0
    return java_string_hash(tags)


def is_ext_addr(code: int) -> bool:
    """``ConsumeQueueExt.isExtAddr``: the broker treats such a tagsCode as unknown (matches any filter)."""
    return code <= _MAX_EXT_ADDR


def delay_level_table(levels: str) -> tuple[dict[int, int], int]:
    """``ScheduleMessageService.parseDelayLevel``: (level -> delay in ms, max level) from "1s 5s ... 2h".

    As in the broker, a bad item ends the parse: the levels before it keep their delays, and the max
    level counts the bad one (which then has no delay: its messages are due 1 s after storing).
    """
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    table: dict[int, int] = {}
    max_level = 0
    for level, item in enumerate(levels.split(" "), start=1):
        max_level = max(max_level, level)
        unit = units.get(item[-1:])
        number = item[:-1]
        if unit is None or not re.fullmatch(r"[+-]?\d+", number):
            log.warning(
                "messageDelayLevel item %r is not a delay: levels from %d on are unknown", item, level
            )
            break
        table[level] = int(number) * unit
    return table, max_level


def deliver_timestamp(delay_level: int, store_timestamp: int, table: dict[int, int], max_level: int) -> int:
    """A scheduled record's tagsCode (``computeDeliverTimestamp``), or -1 if the level is not positive.

    The level is clamped to the max level; an unknown level is due 1 s after storing.
    """
    level = min(delay_level, max_level)
    if level <= 0:
        return -1
    delay = table.get(level)
    return store_timestamp + (delay if delay is not None else 1000)


def _java_div(a: int, b: int) -> int:
    """Java's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _java_labs(v: int) -> int:
    """``Math.abs(long)`` of a wrapped 64-bit difference (Long.MIN_VALUE stays negative)."""
    v = _wrap64(v)
    return v if v == -(2**63) else abs(v)


@dataclass(slots=True)
class _File:
    """One consume queue file mapped read-only; ``written`` bytes of it hold entries."""

    start: int
    path: Path
    length: int
    mm: mmap.mmap | None
    view: memoryview
    mtime_ms: int
    written: int = 0
    #: Where the file's first hole began when it was mapped (``SEEK_HOLE``; ``length`` if unknown):
    #: the entries end before it in a file written in order, so the search for the end probes there
    #: first instead of faulting in (and reading ahead over) never-written pages. Only a hint: a
    #: live broker's tail grows past it.
    data_end: int = -1
    #: The mapped inode: a file of the same name with another one was replaced under us.
    inode: int = 0
    #: The first entry and the last written one as the last refresh saw them (``_overwritten``:
    #: a writer never changes a written entry), and the written bytes then.
    seen_first: bytes = b""
    seen_last: bytes = b""
    seen_written: int = 0
    #: An in-memory copy rebuilt from the CommitLog stands for the file on disk, which failed its
    #: checks (``store.consumequeue.file_rebuild``); ``pending`` while it is being filled: it
    #: answers nothing then.
    rebuilt: bool = False
    pending: bool = False
    #: The rebuilt copy of the queue's last file, still filled as the CommitLog grows: nothing is
    #: answered past what it holds yet.
    following: bool = False

    def close(self) -> None:
        self.view.release()
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # a view handed out earlier still uses it; the GC unmaps it later
            self.mm = None


#: A file to rebuild (``ConsumeQueue.rebuilds``): the empty copy answering for it, the buffer it is
#: filled into, the CommitLog offsets to walk, whether it is the queue's last file.
RebuildRequest = tuple[_File, bytearray, int, int, bool]


def _valid(view: memoryview, pos: int) -> bool:
    offset, size = _OFFSET_SIZE.unpack_from(view, pos)
    return offset >= 0 and size > 0


def _valid_prefix(view: memoryview, limit: int, known: int = 0) -> int:
    """Bytes of whole valid entries at the start of ``view[:limit]`` (entries are a valid prefix).

    ``known``: bytes already known valid (the last refresh), so a live tail costs a few probes.
    """
    units = limit // CQ_STORE_UNIT_SIZE
    lo = known // CQ_STORE_UNIT_SIZE  # entries [0, lo) valid
    hi = units  # entries [hi, units) invalid (none yet)
    while lo < hi:
        mid = (lo + hi) // 2
        if _valid(view, mid * CQ_STORE_UNIT_SIZE):
            lo = mid + 1
        else:
            hi = mid
    return lo * CQ_STORE_UNIT_SIZE


def _first_hole(fd: int, length: int) -> int:
    """Where the first hole of the file begins (``length`` without hole reporting or without holes)."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None:
        return length
    try:
        return min(os.lseek(fd, 0, seek_hole), length)
    except OSError:
        return length


def first_invalid_entry(view: memoryview, start: int, stop: int) -> int:
    """The byte position of the first entry at or after ``start`` that is not valid (the broker's
    ``recover`` test: ``commitLogOffset < 0`` or ``size <= 0``), scanning forward over the whole
    entries below ``min(stop, len(view))``; that bound, rounded down to whole entries past
    ``start``, when all of them are valid.

    The readable reference of the compiled twin ``store/consumequeue/_consume_queue_fast.c`` (same name, same
    results). ``start`` must be a non-negative multiple of the entry size.
    """
    if start < 0 or start % CQ_STORE_UNIT_SIZE:
        raise ValueError(f"start {start} is not a non-negative multiple of {CQ_STORE_UNIT_SIZE}")
    end = min(stop, len(view))
    pos = start
    while pos + CQ_STORE_UNIT_SIZE <= end and _valid(view, pos):
        pos += CQ_STORE_UNIT_SIZE
    return pos


#: The pure-Python reference, kept reachable after the compiled twin replaces the name below.
REFERENCE = {"first_invalid_entry": first_invalid_entry}

_fast = load("store.consumequeue._consume_queue_fast")
#: True when the compiled twin is in use.
COMPILED = _fast is not None
if _fast is not None:
    first_invalid_entry = _fast.first_invalid_entry  # type: ignore[assignment]


def _written_end(f: _File) -> int:
    """The bytes of whole valid entries at the start of ``f``, up to the first entry that is not
    valid: where the broker's linear ``recover`` stops.

    A binary search (``_valid_prefix``) proposes the end cheaply, first among the entries that start
    before the file's first hole: the end of a file written in order lies there, and probing a 6 MB
    file's hole faults in pages the kernel zero-fills and reads ahead over (5 CPU-s for 1,000 mostly
    empty queues opened twice on a cold cache); only when every entry there is valid does the search
    go on over the rest of the file. The search assumes the valid entries are a prefix, which garbage
    breaks: a valid-looking entry where it probes (in a copy that filled the holes, or in the block
    the entries end in) would move the end far past the last written entry. So the entries before
    the proposed end are then checked linearly (``first_invalid_entry``, compiled): the first
    invalid one among them, else the proposed end (itself invalid, or the file's end), is the
    broker's answer. The check reads only entries before the proposed end, which lies at or before
    the first hole of a file written in order, and only from ``known`` (entries already checked by
    an earlier refresh of the same map), so a live tail costs its new entries.
    """
    known = f.written if f.written <= f.length else 0
    data_end = f.length if f.data_end < 0 else f.data_end
    limit = min(f.length, -(-data_end // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE)
    proposed = _valid_prefix(f.view, limit, known)
    if proposed >= limit // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE:
        proposed = _valid_prefix(f.view, f.length, proposed)
    return first_invalid_entry(f.view, known, proposed)


class ConsumeQueue:
    """One topic's queue ``queue_id`` under ``root`` (the store's ``consumequeue`` directory).

    ``commitlog`` is what the entries point into: the min offset follows its first offset. Without
    one (fsck, the builder's resume) the min offset assumes a CommitLog starting at 0. ``root`` None
    gives the empty in-memory queue the broker makes up for an unknown topic or queue id.
    ``repair``: a served queue; files that fail their checks are rebuilt from the CommitLog (issue 31,
    item 7: an overwritten file seen at refresh, a mapped one naming another queue's records).
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None,
        topic: str,
        queue_id: int,
        mapped_file_size: int,
        commitlog: CommitLog | None = None,
        *,
        repair: bool = False,
    ) -> None:
        if mapped_file_size <= 0 or mapped_file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"consume queue file size {mapped_file_size} is not a positive multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.directory = None if root is None else Path(root) / topic / str(queue_id)
        self.commitlog = commitlog
        #: A served queue (``QueueTable``): a file it maps that holds another file's entries is
        #: rebuilt rather than answered from (``_check_mapped``); a check (fsck) reads files as they are.
        self.repair = repair
        self.warn = WarnOnce(log)
        self._lock = threading.RLock()
        self._files: list[_File] = []
        self._starts: list[int] = []
        self._min_logic_offset = 0
        #: The min offset names an entry of the first file (``_correct_min_offset``): entries
        #: appended later cannot move it (their CommitLog offsets are higher), only a change of the
        #: CommitLog's first offset or of the first file, which a full refresh sees.
        self._min_found = False
        #: Files replaced by bytes that are not this queue's: start -> the rejected inode.
        self._rejected: dict[int, int] = {}
        #: Files overwritten in place, waiting to be rebuilt from the CommitLog: (the empty copy
        #: answering for it, its buffer, the CommitLog offsets to walk, whether it is the queue's
        #: last file); taken by the store (``store.file_repairs``).
        self.rebuilds: list[RebuildRequest] = []
        #: Files that failed their checks, and files rebuilt, since the queue was opened.
        self.failed_checks = 0
        self.files_rebuilt = 0
        self.refresh()

    # -- file queue ----------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the directory: new files, a grown tail, deleted files, the min offset again."""
        with self._lock:
            if self.directory is None:
                return
            try:
                names = sorted(n for n in os.listdir(self.directory) if _NAME.match(n))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                self.warn(f"list:{exc}", f"cannot list consume queue {self.directory}: {exc}")
                names = []
            old = {f.start: f for f in self._files}
            files: list[_File] = []
            fresh: list[_File] = []
            for i, name in enumerate(names):
                start = int(name)
                path = self.directory / name
                try:
                    st = path.stat()
                except OSError:
                    continue
                mtime_ms = st.st_mtime_ns // 1_000_000
                known = old.pop(start, None)
                if known is not None and known.length == st.st_size and known.inode == st.st_ino:
                    if known.mtime_ms != mtime_ms:
                        # Written since: by a writer appending, or by something overwriting it.
                        if known.rebuilt and not known.pending and self._restored(known, path):
                            known.close()
                            known = None
                        elif not known.rebuilt and self.repair and self._overwritten(known):
                            known = self._rebuild(known, path, st.st_ino, last=i == len(names) - 1)
                    if known is not None:
                        known.mtime_ms = mtime_ms
                        files.append(known)
                        continue
                if known is not None and known.inode != st.st_ino and self._keep_over(known, path, st.st_ino):
                    files.append(known)
                    continue
                if known is not None:
                    known.close()
                if st.st_size == 0:
                    continue  # being created: no entries yet
                if start % self.mapped_file_size:
                    self.warn(
                        f"name:{path}",
                        f"consume queue file {path} does not start at a multiple of "
                        f"mappedFileSizeConsumeQueue {self.mapped_file_size}: ignored",
                    )
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        length = min(os.fstat(fd).st_size, self.mapped_file_size)
                        mm = mmap.mmap(fd, length, access=mmap.ACCESS_READ)
                        data_end = _first_hole(fd, length)
                    finally:
                        os.close(fd)
                except OSError as exc:
                    self.warn(f"map:{path}", f"cannot map consume queue file {path}: {exc}; ignored")
                    continue
                if st.st_size != self.mapped_file_size:
                    self.warn(
                        f"size:{path}:{st.st_size}",
                        f"consume queue file {path} has {st.st_size} bytes, not mappedFileSizeConsumeQueue "
                        f"{self.mapped_file_size}: reading the whole entries it holds",
                    )
                mapped = _File(
                    start, path, length, mm, memoryview(mm), mtime_ms, data_end=data_end, inode=st.st_ino
                )
                files.append(mapped)
                fresh.append(mapped)
            kept = [gone for gone in old.values() if self._keep_deleted(gone)]
            for gone in old.values():
                if gone not in kept:
                    gone.close()
            if kept:
                files = sorted(files + kept, key=lambda f: f.start)
            self._recover(files)
            if fresh and self.repair and self.commitlog is not None:
                self._check_mapped(fresh)
            self._correct_min_offset()
            for f in self._files:
                if f.seen_written != f.written and not f.rebuilt:
                    self._remember(f)

    def refresh_written(self, start: int, wrote: int, fd: int) -> bool:
        """``refresh`` after this process's own builder appended entries to the queue's last file,
        without listing the directory: True when taken so, False with nothing changed otherwise (the
        caller then refreshes in full, which lists, stats and checks every file).

        ``start``, ``wrote``, ``fd``: the file the builder's appends went to (its first byte offset,
        the bytes of entries it holds now, the builder's descriptor of it;
        ``ConsumeQueueBuilder.written_tail``). The case taken: that file is the last one this queue
        maps (no new file started since the last full look), mapped from disk (not a rebuilt copy),
        the descriptor's ``fstat`` names the same inode, still linked, at the same size (not
        deleted, replaced by a rename, cut or grown), its first entry and the last one seen are
        still the ones the last look saw (``_overwritten``, the check a full refresh makes of a
        file whose mtime moved; made here always, as the mtime taken here would hide a move from
        the next full refresh), and the map reads valid entries from the old written end up to
        ``wrote`` and none at ``wrote`` (the broker's ``recover`` rule, ``first_invalid_entry``,
        over the new entries only). Then the written end is ``wrote``, as the full refresh would
        find it, and the file's mtime the one ``fstat`` gave. Anything only the full refresh sees
        (a file deleted or added beside it, another process's writes past ``wrote``) is left to
        it: the caller bounds how long a queue goes without one (``QueueTable.refresh_some``)."""
        with self._lock:
            files = self._files
            if self.directory is None or not files or fd < 0:
                return False
            f = files[-1]
            if f.start != start or f.rebuilt or f.mm is None:
                return False
            old = f.written
            if wrote < old or wrote > f.length or wrote % CQ_STORE_UNIT_SIZE or f.seen_written != old:
                return False
            try:
                st = os.fstat(fd)
            except OSError:
                return False
            if st.st_nlink == 0 or st.st_ino != f.inode or st.st_size != f.length:
                return False  # deleted, or replaced by a rename (the old inode unlinked), cut, grown
            if self._overwritten(f):
                return False
            stop = min(wrote + CQ_STORE_UNIT_SIZE, f.length)
            if first_invalid_entry(f.view, old, stop) != wrote:
                return False
            f.written = wrote
            f.mtime_ms = st.st_mtime_ns // 1_000_000
            if not self._min_found:
                self._correct_min_offset()
            if wrote != old:
                self._remember(f)
            return True

    # -- a file overwritten in place (issue 31, item 7): rebuilt from the CommitLog -------------------

    @staticmethod
    def _remember(f: _File) -> None:
        """Note the first and last written entries: a writer never changes them again. The first
        one is kept as first seen (not read again as the file grows): a full refresh compares only
        when the file's mtime moved, and an overwrite in the same mtime tick as an append it then
        reads would otherwise become the entry compared against, and never be found."""
        f.seen_written = f.written
        if f.written >= CQ_STORE_UNIT_SIZE:
            if not f.seen_first:
                f.seen_first = bytes(f.view[:CQ_STORE_UNIT_SIZE])
            f.seen_last = bytes(f.view[f.written - CQ_STORE_UNIT_SIZE : f.written])
        else:
            f.seen_first = f.seen_last = b""

    @staticmethod
    def _overwritten(f: _File) -> bool:
        """Do the entries the last refresh saw in ``f``'s map differ now (the same inode written
        over: ``cp`` of other bytes onto it)? Two 20-byte compares, made only when its mtime moved.
        A last entry now zeroed under an unchanged first one is a writer cutting the queue back
        (read as before), not other bytes."""
        if not f.seen_first:
            return False
        if bytes(f.view[:CQ_STORE_UNIT_SIZE]) != f.seen_first:
            return True
        last = f.seen_written - CQ_STORE_UNIT_SIZE
        now = bytes(f.view[last : f.seen_written])
        return now != f.seen_last and _valid(memoryview(now), 0)

    def _rebuild(self, known: _File, path: Path, inode: int, *, last: bool) -> _File:
        """``known``'s entries were overwritten: an empty copy takes its place, to be filled from the
        CommitLog records between its first and last entries as they were (``rebuilds`` hands the
        work to the store); said once."""
        first_phy, first_size = _OFFSET_SIZE.unpack_from(known.seen_first, 0)
        last_phy, last_size = _OFFSET_SIZE.unpack_from(known.seen_last, 0)
        if first_size == PRE_BLANK_SIZE:
            first_phy = self.commitlog.min_offset if self.commitlog is not None else 0
        copy = self._copy_for(known, inode, first_phy, last_phy + max(last_size, 1), last=last)
        copy.written = known.seen_written
        self.warn(
            f"overwritten:{path}:{known.mtime_ms}",
            f"consume queue file {path} was overwritten while in use (its first or last entry is not "
            f"the one it held; {self.topic}/{self.queue_id} from queue offset "
            f"{known.start // CQ_STORE_UNIT_SIZE}): not answering from it; rebuilding it in memory "
            f"from the CommitLog records {first_phy}..{self.rebuilds[-1][3]}",
        )
        return copy

    def _copy_for(self, f: _File, inode: int, first_phy: int, to_offset: int, *, last: bool) -> _File:
        """An empty copy to stand for ``f`` (closed here) while it is rebuilt from the CommitLog
        records ``first_phy..to_offset`` (to the CommitLog's end, and on, for the queue's last file);
        counted as a file that failed its checks."""
        if last and self.commitlog is not None:
            # The queue's last file: the entries a writer adds from now on are in the CommitLog too.
            to_offset = max(to_offset, self.commitlog.max_offset)
        buffer = bytearray(f.length)
        # While pending its view is empty: every reader (the compiled request path too, which leaves
        # a file whose written end lies past its view to the Python path) finds nothing to answer.
        copy = _File(
            f.start,
            f.path,
            f.length,
            None,
            memoryview(b""),
            f.mtime_ms,
            written=f.written,
            data_end=f.length,
            inode=inode,
            rebuilt=True,
            pending=True,
        )
        f.close()
        self.failed_checks += 1
        self.rebuilds.append((copy, buffer, first_phy, to_offset, last))
        return copy

    def _check_mapped(self, mapped: list[_File]) -> None:
        """Files this refresh mapped (a queue opened after the damage, a file that appeared): their
        first and last entries must not name another queue's record, or this queue's at another
        queue offset (another file's bytes: ``cp`` of another queue's file over it). Two record
        reads a file, once per map. Such a file is rebuilt from the CommitLog between its
        neighbours' entries; other damage (an entry naming no whole record) is answered as the
        broker answers it."""
        files = self._files
        for f in mapped:
            if f.written < CQ_STORE_UNIT_SIZE:
                continue
            i = next((i for i, g in enumerate(files) if g is f), None)
            if i is None:
                continue
            wrong = self._foreign_entry(f, 0) or self._foreign_entry(f, f.written - CQ_STORE_UNIT_SIZE)
            if wrong is None:
                continue
            first_phy = self.commitlog.min_offset if self.commitlog is not None else 0
            before = files[i - 1] if i > 0 else None
            if before is not None and not before.pending and before.written >= CQ_STORE_UNIT_SIZE:
                phy, size = _OFFSET_SIZE.unpack_from(before.view, before.written - CQ_STORE_UNIT_SIZE)
                if size != PRE_BLANK_SIZE:
                    first_phy = phy + size
            after = files[i + 1] if i + 1 < len(files) else None
            to_offset = self.commitlog.max_offset if self.commitlog is not None else 0
            if after is not None and not after.pending and after.written >= CQ_STORE_UNIT_SIZE:
                to_offset = _OFFSET_SIZE.unpack_from(after.view, 0)[0]
            last = after is None
            written = f.written if last else f.length  # until rebuilt: the bounds the file gave
            copy = self._copy_for(f, f.inode, first_phy, to_offset, last=last)
            copy.written = written
            files[i] = copy
            self.warn(
                f"foreign:{f.path}:{f.inode}",
                f"consume queue file {f.path} holds another file's entries ({wrong}; "
                f"{self.topic}/{self.queue_id} from queue offset {f.start // CQ_STORE_UNIT_SIZE}): not "
                "answering from it; rebuilding it in memory from the CommitLog records "
                f"{first_phy}..{self.rebuilds[-1][3]}",
            )

    def _foreign_entry(self, f: _File, pos: int) -> str | None:
        """Does the entry at ``pos`` of ``f`` name a whole record of another queue, or of this queue
        at another queue offset? What it names, or None (also when it names no whole record: a
        blank, a record gone or cut, which the broker answers its own way)."""
        offset, size = _OFFSET_SIZE.unpack_from(f.view, pos)
        commitlog = self.commitlog
        if commitlog is None or size == PRE_BLANK_SIZE or offset < commitlog.min_offset:
            return None
        buf = commitlog.read_record(offset)
        if buf is None or len(buf) != size:
            return None
        try:
            msg = decode_message(buf, read_body=False)
        except ProtocolError:
            return None
        queue_offset = (f.start + pos) // CQ_STORE_UNIT_SIZE
        if (msg.topic, msg.queue_id, msg.queue_offset) == (self.topic, self.queue_id, queue_offset):
            return None
        return (
            f"queue offset {queue_offset} names the record at {offset} of {msg.topic}/{msg.queue_id} "
            f"queue offset {msg.queue_offset}"
        )

    def rebuilt(self, copy: _File, buffer: bytearray, written: int, *, following: bool) -> None:
        """The rebuild of ``copy`` caught up: it answers from ``buffer`` from now on, ``written``
        bytes of entries (more to come while ``following``)."""
        with self._lock:
            copy.view = memoryview(buffer)
            copy.written = written
            copy.seen_written = written
            copy.pending = False
            copy.following = following
            self.files_rebuilt += 1
            log.warning(
                "consume queue file %s: rebuilt from the CommitLog (%d entries); answering from the "
                "rebuilt copy until the file is restored",
                copy.path,
                written // CQ_STORE_UNIT_SIZE,
            )
            if self.holds(copy):
                self._recover(self._files)
                self._correct_min_offset()

    def extend(self, copy: _File, written: int, *, following: bool) -> None:
        """The rebuilt copy of the last file holds ``written`` bytes of entries now."""
        with self._lock:
            copy.written = copy.seen_written = written
            copy.following = following

    def holds(self, copy: _File) -> bool:
        """Does ``copy`` still answer for its file (not dropped for a restored one)?"""
        return any(f is copy for f in self._files)

    def _restored(self, copy: _File, path: Path) -> bool:
        """Does the file on disk hold the rebuilt copy's entries again (its first and last)?"""
        if copy.written < CQ_STORE_UNIT_SIZE:
            return False
        last = copy.written - CQ_STORE_UNIT_SIZE
        try:
            with open(path, "rb") as fh:
                head = fh.read(CQ_STORE_UNIT_SIZE)
                fh.seek(last)
                tail = fh.read(CQ_STORE_UNIT_SIZE)
        except OSError:
            return False
        if head != bytes(copy.view[:CQ_STORE_UNIT_SIZE]) or tail != bytes(copy.view[last : copy.written]):
            return False
        log.info("consume queue file %s holds its entries again: answering from it", path)
        return True

    def rebuilding(self, offset: int) -> bool:
        """Is the file holding logical ``offset`` being rebuilt (nothing to answer there yet)?"""
        byte_offset = offset * CQ_STORE_UNIT_SIZE
        f = self._file_for(byte_offset) if offset >= 0 else None
        return f is not None and (f.pending or (f.following and byte_offset - f.start >= f.written))

    # -- damage under a running reader (issue 18, item 11): said once, answered from what is intact --

    def _keep_deleted(self, gone: _File) -> bool:
        """A known file no longer listed: keep answering from its map when it was damage, not the
        broker's own doing; say so once.

        The broker deletes consume queue files only when their records are gone: expired with the
        CommitLog files before them (``deleteExpiredFile``), or past the end its recovery truncated
        to (``truncateDirtyLogicFiles``). A file whose entries still name records of the CommitLog
        was deleted by something else; this process still maps its bytes, so the queue keeps
        pulling what it held (until a restart, or a rebuild with ``rmq-query rebuild-index``).
        """
        if self.commitlog is None or gone.written < CQ_STORE_UNIT_SIZE or gone.pending:
            return False
        first = _I64.unpack_from(gone.view, 0)[0]
        last = _I64.unpack_from(gone.view, gone.written - CQ_STORE_UNIT_SIZE)[0]
        files = self.commitlog.files
        if not files or last < files[0].start or first >= self.commitlog.max_offset:
            return False  # expired with its records, or past the recovered end: the broker's own doing
        self.warn(
            f"deleted:{gone.path}:{gone.inode}",
            f"consume queue file {gone.path} was deleted while in use, though its entries still name "
            "records of the CommitLog: answering from the copy this process still maps until it is "
            "restarted (rmq-query rebuild-index rebuilds the queue)",
        )
        return True

    def _keep_over(self, known: _File, path: Path, inode: int) -> bool:
        """A known file replaced by another inode: keep the old map unless the new bytes are this
        queue's (a rebuild swapped in, a copy restored); say a replacement by other bytes once.

        This queue's entries at ``start`` name records of this topic and queue at queue offsets
        ``start / 20`` onward; the new file's first and last entries are checked against the
        CommitLog (two record reads, once per replacement).
        """
        if self.commitlog is None:
            return False
        if self._rejected.get(known.start) != inode:
            if self._names_own_records(path, known.start):
                return False
            self._rejected[known.start] = inode  # checked once: later refreshes keep the old map
            self.failed_checks += 1
        self.warn(
            f"replaced:{path}:{inode}",
            f"consume queue file {path} was replaced by another file whose entries are not this "
            f"queue's ({self.topic}/{self.queue_id} from queue offset {known.start // CQ_STORE_UNIT_SIZE}): "
            "answering from the file as it was, which this process still maps, until it is restored "
            "or rebuilt (rmq-query rebuild-index)",
        )
        return True

    def _names_own_records(self, path: Path, start: int) -> bool:
        """Do the first and last valid entries of the file at ``path`` name this queue's records?"""
        try:
            with open(path, "rb") as f:
                data = f.read(self.mapped_file_size)
        except OSError:
            return True  # unreadable now: the map of the new file reports it as usual
        view = memoryview(data)
        end = _valid_prefix(view, len(data) - len(data) % CQ_STORE_UNIT_SIZE)
        if end == 0:
            return True  # no entries yet (a queue being rebuilt): nothing to contradict
        for pos in sorted({0, end - CQ_STORE_UNIT_SIZE}):
            offset, size = _OFFSET_SIZE.unpack_from(view, pos)
            if size == PRE_BLANK_SIZE:
                continue
            buf = self.commitlog.read_record(offset) if self.commitlog is not None else None
            if buf is None:
                return False
            try:
                msg = decode_message(buf, read_body=False)
            except ProtocolError:
                return False
            if (msg.topic, msg.queue_id, msg.queue_offset) != (
                self.topic,
                self.queue_id,
                (start + pos) // CQ_STORE_UNIT_SIZE,
            ):
                return False
        return True

    def _recover(self, files: list[_File]) -> None:
        """``ConsumeQueue.recover``: the written end, from the third-last file on; later files are dirty."""
        first = max(0, len(files) - 3)
        for f in files[:first]:
            if not f.rebuilt:
                f.written = f.length
        kept = len(files)
        for i in range(first, len(files)):
            f = files[i]
            if not f.rebuilt:
                f.written = _written_end(f)
            elif f.following:
                continue  # filled as the CommitLog grows: the files after it are the writer's
            if f.written < self.mapped_file_size:
                kept = i + 1
                break
        if kept < len(files):
            for f in files[kept:]:
                self.warn(
                    f"dirty:{f.path}",
                    f"consume queue file {f.path} lies past the queue's written end in "
                    f"{files[kept - 1].path}: ignored (the broker deletes such files on recovery)",
                )
                f.close()
            files = files[:kept]
        self._files = files
        self._starts = [f.start for f in files]

    def _commitlog_min_offset(self) -> int:
        if self.commitlog is None:
            return 0
        files = self.commitlog.files
        return files[0].start if files else -1

    def _correct_min_offset(self) -> None:
        """``correctMinOffset``: the first entry of the first file at or past the CommitLog's start."""
        self._min_found = False
        if not self._files:
            self._min_logic_offset = 0
            return
        f = self._files[0]
        if f.pending:
            return  # nothing to read in it yet: the min offset is corrected once it is rebuilt
        phy_min = self._commitlog_min_offset()
        view = f.view
        # The entries' CommitLog offsets grow (pre-blank entries say 0), so search for the first >= phy_min.
        lo, hi = 0, f.written // CQ_STORE_UNIT_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if _I64.unpack_from(view, mid * CQ_STORE_UNIT_SIZE)[0] >= phy_min:
                hi = mid
            else:
                lo = mid + 1
        if lo < f.written // CQ_STORE_UNIT_SIZE:
            self._min_logic_offset = f.start + lo * CQ_STORE_UNIT_SIZE
            self._min_found = True
        elif self._min_logic_offset < f.start:
            # No entry qualifies: a loaded broker keeps 0 (the value before any correction).
            self._min_logic_offset = 0

    # -- reads ---------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """``getMinOffsetInQueue``, in entries."""
        return self._min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """``getMaxOffsetInQueue``: the end of the last file's written entries, in entries."""
        files = self._files
        if not files:
            return 0
        return (files[-1].start + files[-1].written) // CQ_STORE_UNIT_SIZE

    @property
    def min_logic_offset(self) -> int:
        """The min offset in bytes (``getMinLogicOffset``)."""
        return self._min_logic_offset

    @property
    def file_starts(self) -> list[int]:
        return list(self._starts)

    def _file_for(self, byte_offset: int) -> _File | None:
        """``MappedFileQueue.findMappedFileByOffset`` (without the return-first fallback)."""
        i = bisect.bisect_right(self._starts, byte_offset) - 1
        if i < 0:
            return None
        f = self._files[i]
        if byte_offset >= f.start + self.mapped_file_size:
            return None
        return f

    def index_buffer(self, offset: int) -> memoryview | None:
        """``getIndexBuffer``: the entries from logical ``offset`` to the written end of its file."""
        byte_offset = offset * CQ_STORE_UNIT_SIZE
        if offset < 0 or byte_offset < self._min_logic_offset:
            return None
        f = self._file_for(byte_offset)
        if f is None:
            return None
        pos = byte_offset % self.mapped_file_size
        if pos >= f.written or f.pending:
            return None
        return f.view[pos : f.written]

    def entry(self, offset: int) -> CqEntry | None:
        """The entry at logical ``offset``, or None where the broker reads nothing."""
        buf = self.index_buffer(offset)
        if buf is None:
            return None
        return CqEntry(*_ENTRY.unpack_from(buf, 0))

    def entries(self, offset: int, max_count: int) -> list[CqEntry]:
        """Up to ``max_count`` entries from ``offset``, crossing into the next files."""
        out: list[CqEntry] = []
        while len(out) < max_count:
            buf = self.index_buffer(offset)
            if buf is None:
                break
            n = min(len(buf) // CQ_STORE_UNIT_SIZE, max_count - len(out))
            out.extend(CqEntry(*e) for e in _ENTRY.iter_unpack(buf[: n * CQ_STORE_UNIT_SIZE]))
            offset += n
        return out

    def offset_by_time(self, timestamp: int, store_time: Callable[[int, int], int]) -> int:
        """``getOffsetInQueueByTime``; ``store_time(offset, size)`` is ``pickupStoreTimestamp``."""
        files = self._files
        if not files:
            return 0
        f = files[-1]
        for candidate in files:
            if candidate.mtime_ms >= timestamp:
                f = candidate
                break
        if f.written <= 0 or f.pending:
            return 0
        low = self._min_logic_offset - f.start if self._min_logic_offset > f.start else 0
        high = f.written - CQ_STORE_UNIT_SIZE
        target = left = right = -1
        left_value = right_value = -1
        min_phy = self._commitlog_min_offset()
        view = f.view
        while high >= low:
            mid = (low + high) // (2 * CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            phy, size = _OFFSET_SIZE.unpack_from(view, mid)
            if phy < min_phy:
                low = mid + CQ_STORE_UNIT_SIZE
                left = mid
                continue
            t = store_time(phy, size)
            if t < 0:
                return 0
            if t == timestamp:
                target = mid
                break
            if t > timestamp:
                high = mid - CQ_STORE_UNIT_SIZE
                right = mid
                right_value = t
            else:
                low = mid + CQ_STORE_UNIT_SIZE
                left = mid
                left_value = t
        if target != -1:
            offset = target
        elif left_value == -1:
            offset = right
        elif right_value == -1:
            offset = left
        else:
            nearer_right = _java_labs(timestamp - left_value) > _java_labs(timestamp - right_value)
            offset = right if nearer_right else left
        return _java_div(f.start + offset, CQ_STORE_UNIT_SIZE)

    def roll_next_file(self, offset: int) -> int:
        """``rollNextFile``: the first logical offset of the file after ``offset``'s."""
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return offset + per_file - offset % per_file

    def release(self) -> None:
        """Drop this process's mapping of the pages read so far (they stay in the page cache): a
        walk over every entry (``fsck``) otherwise keeps the whole queue resident."""
        with self._lock:
            for f in self._files:
                if f.mm is not None:
                    try:
                        f.mm.madvise(mmap.MADV_DONTNEED)
                    except (OSError, ValueError):
                        pass

    def close(self) -> None:
        with self._lock:
            for f in self._files:
                f.close()
            self._files = []
            self._starts = []


def store_time_picker(commitlog: CommitLog) -> Callable[[int, int], int]:
    """``CommitLog.pickupStoreTimestamp`` over our CommitLog: the store time of the record at
    ``offset`` if ``size`` bytes are readable there (and ``offset`` is not below the first file), else -1.

    STORETIMESTAMP follows BORNHOST, which is 8 bytes or, when the sysflag says the born host is
    IPv6, 20: the ``size`` bytes (a consume-queue entry's, which a damaged queue can make anything)
    must hold the field where this record's sysflag puts it. The broker reads it from any buffer
    long enough and throws on a shorter one; a buffer too short here answers -1."""

    def pick(offset: int, size: int) -> int:
        files = commitlog.files
        if not files or offset < files[0].start:
            return -1
        buf = commitlog.select(offset, size)
        if buf is None or len(buf) < _SYS_FLAG_END:
            return -1
        sys_flag = _I32.unpack_from(buf, SYS_FLAG_AT)[0]
        at = STORE_TIMESTAMP_AT[(sys_flag >> HOST_KIND_SHIFT) & 3]
        if len(buf) < at + _I64.size:
            return -1
        return _I64.unpack_from(buf, at)[0]

    return pick
