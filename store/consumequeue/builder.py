"""Builds ConsumeQueues from the CommitLog as the broker's reput does (4.9.7), byte for byte.

The reput's consume queue dispatcher: the walk is the reput's (``store.reput``, shared with the
index), which hands runs of whole, checked records; each record's entry is
``store.reput.decode.dispatch_entry``. For every whole record from where building got to
(``CommitLogDispatcherBuildConsumeQueue``): only non-transactional and COMMIT records get an entry
(PREPARED and ROLLBACK ones stay in the CommitLog only); the entry is ``(offset, size, tagsCode)`` in
queue ``(topic, QUEUEID)`` at the record's QUEUEOFFSET; tagsCode is ``String.hashCode`` of TAGS,
except for a ``SCHEDULE_TOPIC_XXXX`` record with a positive DELAY, whose tagsCode is its delivery
time (store time + the level's delay from ``messageDelayLevel``).

Appending follows ``ConsumeQueue.putMessagePositionInfo``: a record already covered (its end not past
the queue's last entry's end, or its queue offset below the queue's end) is skipped; the first file of
a queue is created at the file boundary below the first entry and, when that entry is not at offset 0
of the queue, filled up to it with blank entries ``(0, Integer.MAX_VALUE, 0)``; a full file rolls to
the next; an entry whose queue offset is past the queue's end goes at the end anyway (the broker's
"[BUG]logic queue order maybe wrong" case). Files are zero-filled to ``mappedFileSizeConsumeQueue``.

Batches: a run's entries are computed per queue in one compiled call
(``store.consumequeue.consume_queue_build.extract_entries``, at most ``BATCH_RECORDS`` records at a
time, which bounds what is held in memory) and each queue's batch is appended with one ``pwrite``
where it goes in whole (the queue's next offsets, inside its last file); anything else (a queue's
first file, a roll to the next file, a hole, a duplicate, a scheduled message's delivery time) goes
entry by entry through the rules above, as before. With the compiled module built, the common case
of a whole run (every queue's batch going in whole, as a settle's nearly always does) is written by
one compiled call, ``append_entries``, on the appenders' own state (``_QueueAppender.state``); the
rest of a run it hands back to this Python path, the reference (``ConsumeQueueBuilder._dispatch``).

Crash safety and resuming: batches of several queues are not written in CommitLog order, so before
writing a stretch's batches the builder records where the stretch starts in ``RESUME_MARK`` (a file
of 8 bytes beside the topics) and clears it once every batch is written. A builder opening queues
with a mark set (a kill or a failed write mid-stretch) first takes back every entry of a record at or
after the mark (``_QueueAppender``: the entries, whole or torn, are zeroed and files past them
removed), so every queue again holds exactly the entries of the records before some point, as with one
``pwrite`` per entry. Building resumes where the broker's reput would: from the largest end
(offset + size) of any queue's last entry, at least the CommitLog's first offset; the record there is
dispatched again and de-duplicated by the rules above. That is this dispatcher's resume point; the
reput starts at the least of its dispatchers', and records before it are skipped. A stretch whose
entries all go to one queue is written without a mark (a lone SEND's entry, a batch's 32): its
writes follow CommitLog order, so a kill leaves that queue a prefix of them (a torn last entry is
zeroed at open, ``_clear_tail``) and the resume point is where that prefix ends, as with one
``pwrite`` per entry.
The checkpoint's ``logicsMsgTimestamp`` is the store time of the last record given an entry,
written at ``flush()`` (after the files are synced), as the broker's checkpoint flush does.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import struct
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

from store.checkpoint import UPDATE_LOCK as CHECKPOINT_UPDATE_LOCK
from store.checkpoint import Checkpoint
from store.commitlog.gaps import Gap
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import (
    CQ_STORE_UNIT_SIZE,
    PRE_BLANK_SIZE,
    ConsumeQueue,
    delay_level_table,
    entry_bytes,
)
from store.consumequeue.consume_queue_build import SPECIAL, Group, append_entries, extract_entries
from store.errors import ConsumeQueueWriteError, StoreError
from store.reput.decode import DispatchError, dispatch_entry
from store.reput.dispatcher import Run, skip_to
from store.reput.walk import Reput, run_to_end
from store.staging import staged_output

__all__ = ["ConsumeQueueBuilder", "rebuild_consume_queues", "safe_topic_dir"]

log = logging.getLogger("store.consumequeue.consume_queue")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qiq")
_PRE_BLANK = entry_bytes(0, PRE_BLANK_SIZE, 0)
#: Queue files kept open between writes (each queue writes only to its last file).
MAX_OPEN_FILES = 256
#: The resume's tail check reads and zeroes past-the-end data in stretches of this many bytes.
_TAIL_CHUNK = 64 << 10
_ZERO_CHUNK = bytes(_TAIL_CHUNK)
#: Records whose entries one ``extract_entries`` call returns: ~36 bytes each held at once (entry,
#: queue offset, store time), so under 2.5 MB whatever the run's size.
BATCH_RECORDS = 65536
#: The file beside the topics that holds where the stretch being written starts (``_Mark``).
RESUME_MARK = ".building-from"
_NO_MARK = -1
#: The file beside the topics that holds where dispatch stood when a topic's queues were deleted
#: (``ConsumeQueueBuilder.forget_topic``): building never resumes before it.
DISPATCHED_MARK = ".dispatched-to"


def safe_topic_dir(topic: str) -> bool:
    """A topic that names one directory under ``consumequeue/`` (no path tricks from a bad record)."""
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\0" not in topic


def check_geometry(root: Path, file_size: int) -> None:
    """Refuse to touch consume queues whose files have another size than ``file_size``: the
    configuration is not the one the store was written with (a rebuild would change every file)."""
    try:
        topics = [e.path for e in os.scandir(root) if e.is_dir()]
    except FileNotFoundError:
        return
    for topic in topics:
        for queue in os.scandir(topic):
            if not queue.is_dir():
                continue
            for entry in os.scandir(queue.path):
                if entry.name.isdigit() and len(entry.name) == 20:
                    size = entry.stat().st_size
                    if size not in (0, file_size):
                        raise StoreError(
                            f"consume queue file {entry.path} has {size} bytes but "
                            f"mappedFileSizeConsumeQueue gives {file_size}: not the configuration the store "
                            "was written with (pass the broker's broker.conf with --config): nothing written"
                        )


def _data_stretch(fd: int, pos: int, end: int) -> tuple[int, int]:
    """``[data, hole)``: the first stretch at or after ``pos`` the file system holds data for, cut at
    ``end`` (``data >= end``: only holes are left). Without ``SEEK_DATA`` all of it is data."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return pos, end
    try:
        data = os.lseek(fd, pos, seek_data)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data at or past pos
            return end, end
        return pos, end  # not supported here: read it all
    if data >= end:
        return end, end
    try:
        hole = os.lseek(fd, data, seek_hole)
    except OSError:
        hole = end
    return data, min(hole, end)


def _write_all(fd: int, data: bytes, at: int) -> None:
    """Write all of ``data`` at ``at``, or undo what was written and raise.

    On a full disk ``pwrite`` takes what fits (a 20-byte entry can straddle a page the disk cannot
    back) and then fails: a part left behind would read as a torn entry past the queue's end, so it
    is zeroed again (its page is allocated: rewriting it needs no new space)."""
    done = 0
    try:
        while done < len(data):
            n = os.pwrite(fd, data[done:], at + done)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except OSError:
        if done:
            try:
                os.pwrite(fd, bytes(done), at)
            except OSError:
                pass  # left past the written end: the next entry written there covers it
        raise


class BatchWriteError(OSError):
    """A batch's write failed: ``put`` entries went in before it (the last at index ``last``)."""

    def __init__(self, cause: OSError, put: int, last: int) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.put = put
        self.last = last


class _Mark:
    """``RESUME_MARK``: where the stretch whose batches are being written starts, or none.

    Written (8 bytes, big-endian) before a stretch's batches and set back to -1 once all are
    written: a builder that finds a mark takes back the queues' entries from it (``_QueueAppender``).
    The file is made once and rewritten in place (its block exists: a full disk cannot refuse it
    once made) and removed when the builder closes with nothing pending."""

    def __init__(self, root: Path) -> None:
        self.path = root / RESUME_MARK
        self.fd: int | None = None
        #: Set and not cleared yet: a stretch is (or was left) half written.
        self.pending = False

    def read(self) -> int | None:
        """The mark a stopped builder left, or None."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != 8:
            return None  # cut while first made: no batch was written after it
        at = _I64.unpack(data)[0]
        return at if at >= 0 else None

    def open(self) -> int:
        """The mark's descriptor, the file made when first needed."""
        if self.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self.fd

    def set(self, at: int) -> None:
        _write_all(self.open(), _I64.pack(at), 0)
        self.pending = True

    def clear(self) -> None:
        if self.fd is not None:
            _write_all(self.fd, _I64.pack(_NO_MARK), 0)
        self.pending = False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def remove(self) -> None:
        """Close and delete the mark (nothing pending: a clean close)."""
        self.close()
        self.path.unlink(missing_ok=True)
        self.pending = False


#: The fields of ``_QueueAppender.state`` (an ``array("q")``), where the compiled ``append_entries``
#: reads and moves them: the last file's descriptor (-1: closed), its start (-1: no file yet),
#: bytes written in it, the file size, the end of the last entry's record.
_FD, _LAST_START, _WROTE, _FILE_SIZE, _MAX_PHYSIC = range(5)


class _QueueAppender:
    """One queue's write side: its last file, where it ends, the end of its last entry's record.

    Those live in ``state``, an ``array("q")`` the compiled ``append_entries`` updates in place when
    it writes a settle's entries itself (``ConsumeQueueBuilder._dispatch``): the attributes below
    read and write it, so the Python path and the compiled one always see one state."""

    __slots__ = (
        "directory",
        "fill_holes",
        "first_created",
        "state",
        "tail_bytes_read",
    )

    @property
    def fd(self) -> int | None:
        fd = self.state[_FD]
        return None if fd < 0 else fd

    @fd.setter
    def fd(self, value: int | None) -> None:
        self.state[_FD] = -1 if value is None else value

    @property
    def last_start(self) -> int | None:
        start = self.state[_LAST_START]
        return None if start < 0 else start

    @last_start.setter
    def last_start(self, value: int | None) -> None:
        self.state[_LAST_START] = -1 if value is None else value

    @property
    def wrote(self) -> int:
        return self.state[_WROTE]

    @wrote.setter
    def wrote(self, value: int) -> None:
        self.state[_WROTE] = value

    @property
    def file_size(self) -> int:
        return self.state[_FILE_SIZE]

    @property
    def max_physic(self) -> int:
        return self.state[_MAX_PHYSIC]

    @max_physic.setter
    def max_physic(self, value: int) -> None:
        self.state[_MAX_PHYSIC] = value

    def __init__(
        self,
        root: Path,
        topic: str,
        queue_id: int,
        file_size: int,
        *,
        fill_holes: bool = False,
        take_back_from: int | None = None,
    ) -> None:
        self.directory = root / topic / str(queue_id)
        self.state = array("q", (-1, -1, 0, file_size, -1))
        #: Building around CommitLog gaps: queue offsets whose records were lost get the broker's blank
        #: entry, so the entries after a gap stay at the queue offsets they were stored with.
        self.fill_holes = fill_holes
        self.first_created = False
        #: Bytes past the written end read at resume to check they are zero (``_clear_tail``).
        self.tail_bytes_read = 0
        if not self.directory.is_dir():
            return
        reader = ConsumeQueue(root, topic, queue_id, file_size)
        try:
            starts = reader.file_starts
            if not starts:
                return
            self.last_start = starts[-1]
            end = reader.max_offset
            if take_back_from is not None:
                kept = self._take_back(reader, end, take_back_from)
                if kept < end:
                    end = kept
                    earlier = [start for start in starts if start < end * CQ_STORE_UNIT_SIZE]
                    self.last_start = earlier[-1] if earlier else starts[0]
            self.wrote = end * CQ_STORE_UNIT_SIZE - self.last_start
            last = reader.entry(end - 1) if end > 0 else None
            if last is not None:
                self.max_physic = last.commit_log_offset + last.size
        finally:
            reader.close()
        self._clear_tail()

    def _take_back(self, reader: ConsumeQueue, end: int, mark: int) -> int:
        """The queue's end once the entries of records at or after ``mark`` are taken back.

        A stretch's batches were being written when the builder stopped (``RESUME_MARK``): this
        queue may hold entries of records after ones another queue lacks, and its last one may be
        torn anywhere inside (a kill splits a write at a page). Those entries are at its end (a
        queue's entries follow CommitLog order); ``_clear_tail`` zeroes them and removes files past
        them, and the records are dispatched again."""
        first = reader.file_starts[0] // CQ_STORE_UNIT_SIZE
        n = end
        while n > first:
            e = reader.entry(n - 1)
            if e is None or e.commit_log_offset < mark or e.size == PRE_BLANK_SIZE:
                break  # a blank entry (no record's): written before the batch, or as it fills
            n -= 1
        if n < end:
            log.warning(
                "%s: taking back %d entries of records at or after %d (a batch was being written)",
                self.directory,
                end - n,
                mark,
            )
        return n

    def _path(self, start: int) -> Path:
        return self.directory / f"{start:020d}"

    def _clear_tail(self) -> None:
        """Zero what lies past the written end of the last file (a torn entry, a dirty next file).

        New entries go at ``wrote`` one by one, and the readers (ours by binary search, the broker's
        ``recover`` up to the first invalid entry) take the zero padding for the end: a stale non-zero
        entry left past the end would be read as written once the entries reach it. Only the stretches
        the file system holds data for are read (``_nonzero_spans``); every non-zero byte past the end
        is zeroed, so the file's bytes are what zeroing the whole tail gives.
        """
        assert self.last_start is not None
        path = self._path(self.last_start)
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            dirty = list(self._nonzero_spans(fd, self.wrote, size))
            if dirty:
                log.warning("%s: clearing %d bytes past its last whole entry", path, size - self.wrote)
                for start, end in dirty:
                    os.pwrite(fd, bytes(end - start), start)
            if size != self.file_size:
                os.ftruncate(fd, self.file_size)
        finally:
            os.close(fd)
        for name in os.listdir(self.directory):
            if name.isdigit() and len(name) == 20 and int(name) > self.last_start:
                log.warning("%s: removing a file past the queue's written end", self.directory / name)
                (self.directory / name).unlink()

    def _nonzero_spans(self, fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
        """The ``_TAIL_CHUNK`` stretches of ``[start, end)`` holding a non-zero byte.

        Holes (``SEEK_HOLE``: never written, which is most of a queue's last file, created sparse by
        the broker and by ``_create``) read as zeros by definition and are skipped; data stretches are
        read and compared with zeros chunk by chunk. A file system without ``SEEK_DATA`` reports the
        whole file as data, which is the full read. ``tail_bytes_read`` counts what was read.
        """
        pos = start
        while pos < end:
            data, hole = _data_stretch(fd, pos, end)
            if data >= end:
                return
            for at in range(data, hole, _TAIL_CHUNK):
                n = min(_TAIL_CHUNK, hole - at)
                chunk = os.pread(fd, n, at)
                self.tail_bytes_read += len(chunk)
                if chunk != (_ZERO_CHUNK if n == _TAIL_CHUNK else bytes(n)):
                    yield at, at + n
            pos = hole

    def open_fd(self) -> int:
        if self.fd is None:
            assert self.last_start is not None
            self.fd = os.open(self._path(self.last_start), os.O_RDWR)
        return self.fd

    def close_fd(self, sync: bool = False) -> None:
        if self.fd is not None:
            try:
                if sync:
                    os.fsync(self.fd)
            finally:
                os.close(self.fd)
                self.fd = None

    def _create(self, start: int, *, first: bool) -> None:
        self.close_fd(sync=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(start)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, self.file_size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.last_start = start
        self.wrote = 0
        self.first_created = first

    def put(self, offset: int, size: int, code: int, queue_offset: int) -> bool:
        """``putMessagePositionInfo``; False when the entry was already there (skipped)."""
        if offset + size <= self.max_physic:
            return False
        expect = queue_offset * CQ_STORE_UNIT_SIZE
        if self.last_start is None:
            self._create(expect - expect % self.file_size, first=True)
        elif self.wrote >= self.file_size:
            self._create(self.last_start + self.file_size, first=False)
        assert self.last_start is not None
        fd = self.open_fd()
        if self.first_created and queue_offset != 0 and self.wrote == 0:
            until = expect % self.file_size
            if until:
                _write_all(fd, _PRE_BLANK * (until // CQ_STORE_UNIT_SIZE), 0)
                self.wrote = until
        if queue_offset != 0:
            current = self.last_start + self.wrote
            if expect < current:
                return False
            if expect != current and self.fill_holes:
                log.warning(
                    "%s: queue offsets %d..%d lost in a CommitLog gap: filled with blank entries",
                    self.directory,
                    current // CQ_STORE_UNIT_SIZE,
                    expect // CQ_STORE_UNIT_SIZE - 1,
                )
                fd = self._fill_blank(expect - current)
            elif expect != current:
                log.warning(
                    "%s: [BUG]logic queue order maybe wrong, expectLogicOffset %d currentLogicOffset %d "
                    "(written at the end, as the broker does)",
                    self.directory,
                    expect,
                    current,
                )
        if self.wrote >= self.file_size:  # a hole just filled ended at a file boundary
            self._create(self.last_start + self.file_size, first=False)
            fd = self.open_fd()
        # Only a whole entry moves the queue's end: a failed write (a full disk) leaves the queue as
        # it was, and the same record is put again by the next pass.
        _write_all(fd, entry_bytes(offset, size, code), self.wrote)
        self.max_physic = offset + size
        self.wrote += CQ_STORE_UNIT_SIZE
        return True

    def put_batch(self, entries: bytes, queue_offsets: memoryview, consecutive: bool) -> tuple[int, int]:
        """Append a batch of entries (``extract_entries``' group, in CommitLog order): ``(entries
        put, index of the last one put or -1)``.

        Where the batch continues the queue (its next queue offsets, inside the last file, past the
        last entry's record) it goes in one ``pwrite``, cut at the file's end; every other entry goes
        through ``put`` and its rules. A failed write raises OSError with the entries before it put
        and the queue's end after them (``_write_all`` leaves no part of the failed write)."""
        unit = CQ_STORE_UNIT_SIZE
        count = len(queue_offsets)
        i = put = 0
        last = -1
        while i < count:
            if consecutive and self.last_start is not None and self.wrote < self.file_size:
                offset, size, _code = _ENTRY.unpack_from(entries, i * unit)
                at_end = queue_offsets[i] * unit == self.last_start + self.wrote
                if at_end and offset + size > self.max_physic:
                    n = min(count - i, (self.file_size - self.wrote) // unit)
                    try:
                        _write_all(self.open_fd(), entries[i * unit : (i + n) * unit], self.wrote)
                    except OSError as exc:
                        raise BatchWriteError(exc, put, last) from exc
                    last_offset, last_size, _code = _ENTRY.unpack_from(entries, (i + n - 1) * unit)
                    self.max_physic = last_offset + last_size
                    self.wrote += n * unit
                    i += n
                    put += n
                    last = i - 1
                    continue
            offset, size, code = _ENTRY.unpack_from(entries, i * unit)
            try:
                if self.put(offset, size, code, queue_offsets[i]):
                    put += 1
                    last = i
            except OSError as exc:
                raise BatchWriteError(exc, put, last) from exc
            i += 1
        return put, last

    def _fill_blank(self, length: int) -> int:
        """Write ``length`` bytes of blank entries from the end, rolling files as the broker would."""
        assert self.last_start is not None
        fd = self.open_fd()
        while length > 0:
            if self.wrote >= self.file_size:
                self._create(self.last_start + self.file_size, first=False)
                fd = self.open_fd()
            n = min(length, self.file_size - self.wrote)
            _write_all(fd, _PRE_BLANK * (n // CQ_STORE_UNIT_SIZE), self.wrote)
            self.wrote += n
            length -= n
        return fd


class ConsumeQueueBuilder:
    """Builds the ConsumeQueues under ``root`` (the store's ``consumequeue/`` unless told otherwise).

    A dispatcher of the reput (``store.reput``): ``dispatch`` takes runs of whole records,
    ``resume_offset`` says where it got to. ``run_once`` feeds it alone through a reput of its own.
    """

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog | None = None,
        *,
        root: Path | None = None,
        checkpoint_path: Path | None = None,
        fill_holes: bool = False,
    ) -> None:
        self.config = config
        #: Building around CommitLog gaps (a rebuild's ``--index-around-gaps``): queue offsets whose
        #: records were lost get blank entries (``_QueueAppender.fill_holes``).
        self._fill_holes = fill_holes
        #: The gaps a rebuild built around (``rebuild_consume_queues`` sets them from its reput).
        self.gaps: list[Gap] = []
        self._own_commitlog = commitlog is None
        self.commitlog = commitlog or CommitLog(
            config.store_path_commit_log, config.mapped_file_size_commit_log
        )
        self.root = Path(root) if root is not None else config.consume_queue_dir
        self.checkpoint_path = checkpoint_path if checkpoint_path is not None else config.checkpoint_path
        self.file_size = config.consume_queue_file_size
        self._delays = delay_level_table(config.message_delay_level)
        self._queues: dict[tuple[str, int], _QueueAppender] = {}
        self._open: OrderedDict[tuple[str, int], _QueueAppender] = OrderedDict()
        self._lock = threading.Lock()
        #: Held for a whole ``flush`` (its syncs included): one flush at a time.
        self._flush_lock = threading.Lock()
        self.entries_written = 0
        self.records_read = 0
        #: What failed after a rebuild's swap (the new queues are in place regardless).
        self.after_swap: list[str] = []
        #: The queues this builder added entries to.
        self.queues_built: set[tuple[str, int]] = set()
        #: The queues given entries since the store last refreshed its view of them
        #: (``take_changed``): a put refreshes those, not every opened queue.
        self.changed: set[tuple[str, int]] = set()
        self._last_store_ts = 0
        self._dirty = False
        #: Queues whose file was closed (too many open) since the last flush: synced by ``flush``.
        self._unsynced: set[tuple[str, int]] = set()
        #: Bytes past the queues' written ends read at start to check them (``_QueueAppender._clear_tail``).
        self.resume_bytes_read = 0
        #: Where the stretch being written starts, on disk (``_Mark``).
        self._mark = _Mark(self.root)
        #: (topic bytes, queue id) -> the key and appender of ``extract_entries``' groups (None: a
        #: topic that cannot name a directory).
        self._by_raw: dict[tuple[bytes, int], tuple[tuple[str, int], _QueueAppender] | None] = {}
        #: (topic bytes, queue id) -> the key and ``_QueueAppender.state`` of each queue this builder
        #: opened (at most 4096), for the compiled ``append_entries``.
        self._states: dict[tuple[bytes, int], tuple[tuple[str, int], array[int]]] = {}
        #: Told of each queue this builder starts after it opened (topic, queue id), before its
        #: first entry is written: the store's topic counts learn of it without listing directories.
        self.new_queue: Callable[[str, int], None] | None = None
        self._next_offset = self._resume_point()
        self._reput: Reput | None = None

    # -- where building got to -----------------------------------------------------------------------

    def _resume_point(self) -> int:
        """Max over the queues of their last entry's record end, at least the CommitLog's start."""
        resume = -1
        try:
            topics = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        except FileNotFoundError:
            topics = []
        queue_dirs = [
            (topic, int(entry.name))
            for topic in topics
            for entry in os.scandir(self.root / topic)
            if entry.is_dir() and entry.name.isdigit()
        ]
        check_geometry(self.root, self.file_size)
        mark = self._mark.read()
        for topic, queue_id in queue_dirs:
            queue = self._queue(topic, queue_id, take_back_from=mark)
            resume = max(resume, queue.max_physic)
            self.resume_bytes_read += queue.tail_bytes_read
        # Every queue now ends before the mark's stretch (a mark cut short while first made: no batch
        # was written after it): it has done its work.
        self._mark.remove()
        return max(resume, self._dispatched_floor(), self.commitlog.min_offset, 0)

    def _dispatched_floor(self) -> int:
        """Where dispatch stood when a topic's queues were last deleted (``forget_topic``), or -1.

        The broker resumes from the largest end of any queue's last entry; a deleted topic whose
        queue held that entry would lower it, and the records after the new largest end (the
        deleted topic's among them) would be dispatched again, making its queues anew. A floor past
        the CommitLog's recovered end (records a crash lost) says nothing of the records written
        there next: it is dropped.
        """
        path = self.root / DISPATCHED_MARK
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return -1
        at = _I64.unpack(data)[0] if len(data) == 8 else -1
        if at > self.commitlog.max_offset:
            log.warning(
                "consume queues under %s: %s says %d was dispatched, past the CommitLog's end %d: ignored",
                self.root,
                DISPATCHED_MARK,
                at,
                self.commitlog.max_offset,
            )
            path.unlink(missing_ok=True)
            return -1
        return at

    @property
    def next_offset(self) -> int:
        """The CommitLog offset from which records may lack their entries (the next pass's start)."""
        return max(self._next_offset, self.commitlog.min_offset)

    def _queue(self, topic: str, queue_id: int, *, take_back_from: int | None = None) -> _QueueAppender:
        key = (topic, queue_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = _QueueAppender(
                self.root,
                topic,
                queue_id,
                self.file_size,
                fill_holes=self._fill_holes,
                take_back_from=take_back_from,
            )
            self._queues[key] = queue
            if len(self._states) < 4096 and safe_topic_dir(topic):
                # Known to the compiled path from the start (a queue found at open, or made now):
                # its records' topic bytes are the name's UTF-8 (the group's bytes are looked up).
                try:
                    self._states[(topic.encode(), queue_id)] = (key, queue.state)
                except UnicodeEncodeError:
                    pass  # a directory name that is no UTF-8: the Python path's lookup takes it
            if self.new_queue is not None:
                self.new_queue(topic, queue_id)
        return queue

    def forget_topic(self, topic: str, queue_count: int) -> int:
        """``cleanUnusedTopic`` for one deleted topic: its queues ``0 .. queue_count - 1`` (any others
        found in its directory too) are closed and their directory removed; returns the number of
        queues removed. Records of the topic stay in the CommitLog.

        Where dispatch stands is written first (``DISPATCHED_MARK``, synced), so a restart does not
        dispatch the topic's records again and bring its queues back (``_dispatched_floor``). Runs
        under the builder's lock: no batch is being written meanwhile, and a record of the topic
        dispatched later (a topic created again) starts a new queue from offset 0.
        """
        if not safe_topic_dir(topic):
            return 0
        with self._lock:
            path = self.root / DISPATCHED_MARK
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, _I64.pack(self.next_offset), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            keys = [(topic, qid) for qid in range(queue_count)]
            topic_dir = self.root / topic
            try:
                keys.extend(
                    (topic, int(e.name))
                    for e in os.scandir(topic_dir)
                    if e.name.isdigit() and int(e.name) >= queue_count
                )
            except OSError:
                pass
            removed = 0
            for key in keys:
                queue = self._queues.pop(key, None)
                if queue is not None:
                    queue.close_fd(sync=False)
                    removed += 1
                self._open.pop(key, None)
                self._unsynced.discard(key)
                self.changed.discard(key)
                self.queues_built.discard(key)
            # The remembered appenders by topic bytes: the topic's are stale now (at most 4096 kept).
            self._by_raw = {k: v for k, v in self._by_raw.items() if v is None or v[0][0] != topic}
            self._states = {k: v for k, v in self._states.items() if v[0][0] != topic}
            shutil.rmtree(topic_dir, ignore_errors=True)
            return removed

    def take_changed(self) -> set[tuple[str, int]]:
        """The queues given entries since the last call (and forget them)."""
        with self._lock:
            changed, self.changed = self.changed, set()
        return changed

    def written_tail(self, key: tuple[str, int]) -> tuple[int, int, int] | None:
        """The file this builder's appends to queue ``key`` go to: (its first byte offset, the bytes
        of entries it holds, this builder's descriptor of it), or None when the queue has no file
        or its descriptor is closed (``MAX_OPEN_FILES``). What a put's refresh of the queue takes
        instead of listing its directory (``ConsumeQueue.refresh_written``); read under the
        caller's lock, on the thread that dispatches, so the descriptor is not closed meanwhile."""
        queue = self._queues.get(key)
        if queue is None:
            return None
        state = queue.state
        fd, start = state[_FD], state[_LAST_START]
        if fd < 0 or start < 0:
            return None
        return start, state[_WROTE], fd

    def queue_ends(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> the queue's written end in entries: the next record's queue offset.

        What the broker's ``recoverTopicQueueTable`` reads at start (each queue's max offset), so a
        writer resuming a store need not walk the CommitLog for it. Every queue that existed at start
        or was written since.
        """
        with self._lock:
            return {
                key: (q.last_start + q.wrote) // CQ_STORE_UNIT_SIZE
                for key, q in self._queues.items()
                if q.last_start is not None
            }

    # -- building: the reput's dispatcher -------------------------------------------------------------

    def begin(self) -> bool:
        return True

    def resume_offset(self) -> int:
        return self.next_offset

    def run_once(self, max_records: int | None = None) -> int:
        """Dispatch every whole record not yet built (at most ``max_records``) through a reput that
        feeds this builder alone; returns records read."""
        if self._reput is None:
            self._reput = Reput(self.commitlog, [self])
        return self._reput.run_once(max_records)

    def dispatch(self, run: Run) -> None:
        """``CommitLogDispatcherBuildConsumeQueue`` for each record of ``run`` from ``next_offset``."""
        with self._lock:
            self._dispatch(run)

    def _dispatch(self, run: Run) -> None:
        view, base, end = run.view, run.base, run.end
        pos = run.pos
        if base + end <= self._next_offset:
            return  # every record of the run already has its entry
        if base + pos < self._next_offset:
            pos = skip_to(run, self._next_offset)
        if append_entries is not None and pos < end:
            # The common case (each queue's entries go in whole at its end) in one compiled call;
            # None: not that case, nothing written, the Python path below takes the run.
            mark_fd = self._mark.fd
            args = (view, pos, end, base, self._states, self.changed, self.queues_built)
            done = append_entries(*args, -1 if mark_fd is None else mark_fd)
            if done is False:  # several queues: the mark is needed, made once (as ``_Mark.set`` does)
                try:
                    done = append_entries(*args, self._mark.open())
                except OSError:
                    done = None  # the Python path meets it (``_write_groups``)
            if done:
                put, after, seen, last_ts, failed, marked = done
                if put:
                    self.entries_written += put
                    self._last_store_ts = last_ts
                    self._dirty = True
                if marked:
                    self._mark.pending = bool(failed)  # set and cleared, or left set by a failure
                if not failed:
                    self.records_read += seen
                    self._next_offset = base + after
                    return
                # A write failed (a full disk): the mark, if set, stays set until a pass writes the
                # stretch whole; the Python path redoes the run, skipping what went in (duplicates),
                # and meets the failure itself, with its errors and its records-at-a-time fallback.
        while pos < end:
            stop, after, seen, groups = extract_entries(view, pos, end, base, BATCH_RECORDS)
            # A failure raises with ``next_offset`` at the stretch's start: its records are
            # dispatched again by the next pass (those with entries are skipped as duplicates).
            if not groups or self._write_groups(groups, base + pos):
                self.records_read += seen
                pos = after
            else:
                # No mark (a full disk cannot take its first block): one record at a time, in
                # CommitLog order, which needs none.
                while pos < after:
                    pos = self._dispatch_one(view, base, pos, end)
                    self._next_offset = base + pos
            self._next_offset = base + pos
            if stop == SPECIAL:
                pos = self._dispatch_one(view, base, pos, end)
                self._next_offset = base + pos

    def _write_groups(self, groups: list[Group], start: int) -> bool:
        """Append each queue's batch; the stretch from CommitLog ``start`` is marked meanwhile when
        it holds the entries of more than one queue (``_Mark``: a kill or a failure in between is
        taken back); one queue's entries are written in CommitLog order and need none (see the
        module docstring). False, with nothing written, when the mark cannot be set."""
        marked = len(groups) > 1
        if marked:
            try:
                self._mark.set(start)
            except OSError as exc:
                log.warning(
                    "consume queues under %s: the build mark cannot be written (%s): entries written "
                    "one at a time",
                    self.root,
                    exc.strerror or exc,
                )
                return False
        last_at = -1
        last_ts = 0
        for raw_topic, queue_id, entries, queue_offsets, times, consecutive in groups:
            found = self._by_raw.get((raw_topic, queue_id), False)
            if found is False:
                found = self._appender_for(raw_topic, queue_id, entries)
            if found is None:
                continue
            key, queue = found
            try:
                put, last = queue.put_batch(entries, memoryview(queue_offsets).cast("q"), consecutive)
            except BatchWriteError as exc:
                put, last = exc.put, exc.last
                if put:
                    self.entries_written += put
                    self.queues_built.add(key)
                    self.changed.add(key)
                    self._dirty = True
                offset, _size, _code = _ENTRY.unpack_from(entries, max(last + 1, 0) * CQ_STORE_UNIT_SIZE)
                raise ConsumeQueueWriteError(
                    f"consume queue {key[0]}/{key[1]}: the entry of the CommitLog record at {offset} cannot "
                    f"be written: {exc.strerror or exc}; the records from {start} are written again from "
                    "the CommitLog by the next pass"
                ) from exc
            if put:
                self.entries_written += put
                self.queues_built.add(key)
                self.changed.add(key)
                self._dirty = True
                at = _ENTRY.unpack_from(entries, last * CQ_STORE_UNIT_SIZE)[0]
                if at > last_at:
                    last_at = at
                    last_ts = memoryview(times).cast("q")[last]
            self._touch(key, queue)
        if last_at >= 0:
            self._last_store_ts = last_ts
        if marked:
            try:
                self._mark.clear()
            except OSError as exc:
                raise ConsumeQueueWriteError(
                    f"consume queues under {self.root}: the build mark cannot be cleared: "
                    f"{exc.strerror or exc}; the records from {start} are written again by the next pass"
                ) from exc
        return True

    def _appender_for(
        self, raw_topic: bytes, queue_id: int, entries: bytes
    ) -> tuple[tuple[str, int], _QueueAppender] | None:
        """The appender of a group's queue, remembered by the topic's bytes; None (and a warning per
        record, as ``dispatch_entry``'s path gives) for a topic that cannot name a directory."""
        topic = raw_topic.decode("utf-8", "replace")
        if not safe_topic_dir(topic):
            for offset, _size, _code in _ENTRY.iter_unpack(entries):
                log.warning(
                    "CommitLog record at %d: topic %r cannot name a directory: skipped", offset, topic
                )
            return None
        key = (topic, queue_id)
        found = (key, self._queues.get(key) or self._queue(topic, queue_id))
        if len(self._by_raw) < 4096:
            self._by_raw[(raw_topic, queue_id)] = found
            self._states[(raw_topic, queue_id)] = (key, found[1].state)
        return found

    def _touch(self, key: tuple[str, int], queue: _QueueAppender) -> None:
        """Keep at most ``MAX_OPEN_FILES`` queue files open, the least recently written closed."""
        opened = self._open
        if key in opened:
            opened.move_to_end(key)
        else:
            opened[key] = queue
            if len(opened) > MAX_OPEN_FILES:
                old_key, old = opened.popitem(last=False)
                old.close_fd(sync=False)
                self._unsynced.add(old_key)

    def _dispatch_one(self, view: memoryview, base: int, pos: int, end: int) -> int:
        """``CommitLogDispatcherBuildConsumeQueue`` for the one record at ``pos`` that
        ``extract_entries`` leaves to ``dispatch_entry``; returns the position after it."""
        size = _I32.unpack_from(view, pos)[0]
        if size <= 0 or pos + size > end:
            raise StoreError(f"CommitLog record at {base + pos}: not a whole record ({size} bytes) in a run")
        offset = base + pos
        try:
            entry = dispatch_entry(view[pos : pos + size], self._delays)
        except (DispatchError, ValueError, struct.error) as exc:
            log.warning("CommitLog record at %d gets no consume queue entry: %s", offset, exc)
            entry = None
        if entry is not None:
            topic, queue_id, queue_offset, code, store_ts = entry
            if not safe_topic_dir(topic):
                log.warning(
                    "CommitLog record at %d: topic %r cannot name a directory: skipped", offset, topic
                )
            else:
                key = (topic, queue_id)
                queue = self._queues.get(key) or self._queue(topic, queue_id)
                try:
                    put = queue.put(offset, size, code, queue_offset)
                except OSError as exc:
                    # The record stays the next to dispatch (``next_offset``): its entry is written
                    # by the next pass, at its own queue offset, once the disk takes it. Skipping it
                    # would shift every later entry of the queue (the broker's "[BUG]logic queue
                    # order maybe wrong").
                    raise ConsumeQueueWriteError(
                        f"consume queue {topic}/{queue_id}: the entry of the CommitLog record at {offset} "
                        f"(queue offset {queue_offset}) cannot be written: {exc.strerror or exc}; it is "
                        "written again from the CommitLog by the next pass"
                    ) from exc
                if put:
                    self.entries_written += 1
                    self.queues_built.add(key)
                    self.changed.add(key)
                    self._last_store_ts = store_ts
                    self._dirty = True
                self._touch(key, queue)
        self.records_read += 1
        return pos + size

    def flush(self) -> None:
        """Sync the written files, then record ``logicsMsgTimestamp`` in the checkpoint.

        Safe from another thread while ``dispatch`` runs: the builder's lock is held only to note
        what to sync (a duplicate of each open file's descriptor, the path of each closed unsynced
        one), never across an ``fsync``, so a dispatch on the event loop
        does not wait for the disk (the broker's ``FlushConsumeQueueService`` flushes in a thread of
        its own too). Flushes run one at a time, so the checkpoint never goes back. A failed sync
        leaves everything to sync again by the next flush."""
        with self._flush_lock:
            with self._lock:
                if not self._dirty and not self._unsynced:
                    return
                dirty, last_store_ts, unsynced = self._dirty, self._last_store_ts, self._unsynced
                fds = [os.dup(queue.fd) for queue in self._open.values() if queue.fd is not None]
                paths = []
                for key in unsynced:
                    queue = self._queues.get(key)
                    if queue is not None and queue.fd is None and queue.last_start is not None:
                        paths.append(queue._path(queue.last_start))
                self._dirty, self._unsynced = False, set()
            try:
                try:
                    for fd in fds:
                        os.fsync(fd)
                finally:
                    for fd in fds:
                        os.close(fd)
                for path in paths:
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        continue  # its topic was deleted meanwhile
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            except BaseException:
                with self._lock:
                    self._dirty = self._dirty or dirty
                    self._unsynced |= unsynced
                raise
            if dirty and last_store_ts:
                # outside the builder's lock too (the write syncs); flushes are one at a time
                with CHECKPOINT_UPDATE_LOCK:
                    checkpoint = Checkpoint.read_or_default(self.checkpoint_path)
                    if checkpoint.logics_msg_timestamp != last_store_ts:
                        checkpoint.logics_msg_timestamp = last_store_ts
                        checkpoint.write(self.checkpoint_path)

    def close(self) -> None:
        self.flush()
        with self._lock:
            for queue in self._open.values():
                queue.close_fd(sync=False)
            self._open.clear()
            if self._mark.pending:
                self._mark.close()  # a stretch failed half written: the next builder takes it back
            else:
                self._mark.remove()
            self._queues.clear()
            if self._own_commitlog:
                self.commitlog.close()


def rebuild_consume_queues(config: StoreConfig, *, around_gaps: bool = False) -> ConsumeQueueBuilder:
    """Rebuild ``<storeRoot>/consumequeue`` from the CommitLog, staged and swapped in whole.

    The new queues are written beside ``consumequeue/`` (``store.staging``); only when complete and
    synced do they replace it, and the checkpoint's ``logicsMsgTimestamp`` is set. Killed at any
    point, the old queues stay whole (or are restored by the next run). Returns the closed builder.

    The index rebuild's gap rule (``store.commitlog.gaps``): a gap in the CommitLog raises
    ``CommitLogGapError`` and nothing is replaced (queues built across it would lack every entry
    after it), unless ``around_gaps``: then the records on both sides get their entries (at the
    queue offsets they were stored with) and ``builder.gaps`` lists the gaps.
    """
    check_geometry(config.consume_queue_dir, config.consume_queue_file_size)
    # Read before anything is built: a checkpoint that cannot be read refuses the rebuild up front.
    if os.path.lexists(config.checkpoint_path):
        Checkpoint.read(config.checkpoint_path)
    with staged_output(config.consume_queue_dir) as staging:
        tmp_checkpoint = staging / "checkpoint.rebuild"  # a file: no broker takes it for a topic
        builder = ConsumeQueueBuilder(
            config, root=staging, checkpoint_path=tmp_checkpoint, fill_holes=around_gaps
        )
        try:
            builder.gaps = run_to_end(builder.commitlog, builder, around_gaps=around_gaps)
        finally:
            builder.close()
        logics_ts = Checkpoint.read_or_default(tmp_checkpoint).logics_msg_timestamp
        tmp_checkpoint.unlink(missing_ok=True)
    # The new queues are in place: a failure from here on is reported, not raised (``after_swap``).
    try:
        checkpoint = Checkpoint.read_or_default(config.checkpoint_path)
        checkpoint.logics_msg_timestamp = logics_ts
        checkpoint.write(config.checkpoint_path)
    except (StoreError, OSError) as exc:
        builder.after_swap.append(f"the checkpoint's logicsMsgTimestamp was not set to {logics_ts}: {exc}")
    return builder
