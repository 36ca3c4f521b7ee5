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

Crash safety and resuming: every entry is written with one ``pwrite`` as its record is read, in
CommitLog order, so after a kill at any instant every queue holds exactly the entries of the records
before some point, plus maybe that record's. Building resumes where the broker's reput would: from
the largest end (offset + size) of any queue's last entry, at least the CommitLog's first offset; the
record there is dispatched again and de-duplicated by the rules above. That is this dispatcher's
resume point; the reput starts at the least of its dispatchers', and records before it are skipped.
The checkpoint's ``logicsMsgTimestamp`` is the store time of the last record given an entry,
written at ``flush()`` (after the files are synced), as the broker's checkpoint flush does.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

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
from store.errors import ConsumeQueueWriteError, StoreError
from store.reput.decode import DispatchError, dispatch_entry
from store.reput.dispatcher import Run, skip_to
from store.reput.walk import Reput, run_to_end
from store.staging import staged_output

__all__ = ["ConsumeQueueBuilder", "rebuild_consume_queues", "safe_topic_dir"]

log = logging.getLogger("store.consumequeue.consume_queue")
_I32 = struct.Struct(">i")
_PRE_BLANK = entry_bytes(0, PRE_BLANK_SIZE, 0)
#: Queue files kept open between writes (each queue writes only to its last file).
MAX_OPEN_FILES = 256
#: The resume's tail check reads and zeroes past-the-end data in stretches of this many bytes.
_TAIL_CHUNK = 64 << 10
_ZERO_CHUNK = bytes(_TAIL_CHUNK)


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


class _QueueAppender:
    """One queue's write side: its last file, where it ends, the end of its last entry's record."""

    __slots__ = (
        "directory",
        "fd",
        "file_size",
        "fill_holes",
        "first_created",
        "last_start",
        "max_physic",
        "tail_bytes_read",
        "wrote",
    )

    def __init__(
        self, root: Path, topic: str, queue_id: int, file_size: int, *, fill_holes: bool = False
    ) -> None:
        self.directory = root / topic / str(queue_id)
        self.file_size = file_size
        #: Building around CommitLog gaps: queue offsets whose records were lost get the broker's blank
        #: entry, so the entries after a gap stay at the queue offsets they were stored with.
        self.fill_holes = fill_holes
        self.last_start: int | None = None
        self.wrote = 0
        self.max_physic = -1
        self.first_created = False
        self.fd: int | None = None
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
            self.wrote = end * CQ_STORE_UNIT_SIZE - self.last_start
            last = reader.entry(end - 1) if end > 0 else None
            if last is not None:
                self.max_physic = last.commit_log_offset + last.size
        finally:
            reader.close()
        self._clear_tail()

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
        self.entries_written = 0
        self.records_read = 0
        #: What failed after a rebuild's swap (the new queues are in place regardless).
        self.after_swap: list[str] = []
        #: The queues this builder added entries to.
        self.queues_built: set[tuple[str, int]] = set()
        self._last_store_ts = 0
        self._dirty = False
        #: Queues whose file was closed (too many open) since the last flush: synced by ``flush``.
        self._unsynced: set[tuple[str, int]] = set()
        #: Bytes past the queues' written ends read at start to check them (``_QueueAppender._clear_tail``).
        self.resume_bytes_read = 0
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
        for topic, queue_id in queue_dirs:
            queue = self._queue(topic, queue_id)
            resume = max(resume, queue.max_physic)
            self.resume_bytes_read += queue.tail_bytes_read
        return max(resume, self.commitlog.min_offset, 0)

    @property
    def next_offset(self) -> int:
        """The CommitLog offset from which records may lack their entries (the next pass's start)."""
        return max(self._next_offset, self.commitlog.min_offset)

    def _queue(self, topic: str, queue_id: int) -> _QueueAppender:
        key = (topic, queue_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = _QueueAppender(self.root, topic, queue_id, self.file_size, fill_holes=self._fill_holes)
            self._queues[key] = queue
        return queue

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
        delays = self._delays
        opened = self._open
        unpack = _I32.unpack_from
        seen = 0
        try:
            while pos < end:
                size = unpack(view, pos)[0]
                offset = base + pos
                buf = view[pos : pos + size]
                pos += size
                seen += 1
                try:
                    entry = dispatch_entry(buf, delays)
                except (DispatchError, ValueError, struct.error) as exc:
                    log.warning("CommitLog record at %d gets no consume queue entry: %s", offset, exc)
                    continue
                if entry is None:
                    continue
                topic, queue_id, queue_offset, code, store_ts = entry
                if not safe_topic_dir(topic):
                    log.warning(
                        "CommitLog record at %d: topic %r cannot name a directory: skipped", offset, topic
                    )
                    continue
                key = (topic, queue_id)
                try:
                    queue = self._queues.get(key) or self._queue(topic, queue_id)
                    put = queue.put(offset, size, code, queue_offset)
                except OSError as exc:
                    # The record stays the next to dispatch (``next_offset``): its entry is written
                    # by the next pass, at its own queue offset, once the disk takes it. Skipping it
                    # would shift every later entry of the queue (the broker's "[BUG]logic queue
                    # order maybe wrong").
                    pos -= size
                    seen -= 1
                    raise ConsumeQueueWriteError(
                        f"consume queue {topic}/{queue_id}: the entry of the CommitLog record at {offset} "
                        f"(queue offset {queue_offset}) cannot be written: {exc.strerror or exc}; it is "
                        "written again from the CommitLog by the next pass"
                    ) from exc
                if put:
                    self.entries_written += 1
                    self.queues_built.add(key)
                    self._last_store_ts = store_ts
                    self._dirty = True
                if key in opened:
                    opened.move_to_end(key)
                else:
                    opened[key] = queue
                    if len(opened) > MAX_OPEN_FILES:
                        old_key, old = opened.popitem(last=False)
                        old.close_fd(sync=False)
                        self._unsynced.add(old_key)
        finally:
            # A record whose put failed counts as read, as it did when each builder walked alone.
            self.records_read += seen
            self._next_offset = base + pos

    def flush(self) -> None:
        """Sync the written files, then record ``logicsMsgTimestamp`` in the checkpoint."""
        with self._lock:
            if not self._dirty and not self._unsynced:
                return
            for queue in self._open.values():
                if queue.fd is not None:
                    os.fsync(queue.fd)
            for key in self._unsynced:
                queue = self._queues.get(key)
                if queue is not None and queue.fd is None and queue.last_start is not None:
                    queue.open_fd()
                    queue.close_fd(sync=True)
            self._unsynced.clear()
            if self._dirty and self._last_store_ts:
                checkpoint = Checkpoint.read_or_default(self.checkpoint_path)
                if checkpoint.logics_msg_timestamp != self._last_store_ts:
                    checkpoint.logics_msg_timestamp = self._last_store_ts
                    checkpoint.write(self.checkpoint_path)
            self._dirty = False

    def close(self) -> None:
        self.flush()
        with self._lock:
            for queue in self._open.values():
                queue.close_fd(sync=False)
            self._open.clear()
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
