"""A store writer for tests, the demo and benchmarks: appends records the way the broker does.

Records are encoded by ``protocol.message.encode_message`` with the broker's fields filled in: the
physical offset, queue offset per (topic, queue), BODYCRC, store host and store timestamp, and a
``UNIQ_KEY`` generated like the Java client's (``UniqueIdGenerator``) unless one is given.
CommitLog files are created preallocated to ``mappedFileSizeCommitLog`` and a record that does not
fit (with room for the 8-byte end marker) ends the file with a blank record, as the broker does.
``index()`` feeds what was appended through the reput (``store.reput``) to the ConsumeQueue builder
(unless ``consume_queues=False``) and the index builder, so the consume queues and IndexFiles are
the broker's too (``index=False``: neither, the caller dispatches). As in the broker, PREPARED and ROLLBACK
transaction records carry queue offset 0 and take no queue position.

The store directory gets the broker's layout: ``commitlog/``, ``index/``, ``checkpoint``, ``abort``
while open, and ``config/topics.json`` listing the topics written (the topic table the broker keeps).
This is not a broker: one writer per store, no flush policy beyond ``close()``.
"""

from __future__ import annotations

import errno
import os
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from protocol.accel import load
from protocol.message import (
    MessageExt,
    body_crc,
    decode_message,
    encode_message,
)
from protocol.message_flags import (
    COMPRESSED_FLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_id import MessageIdError, UniqueIdGenerator, create_offset_msg_id, pack_host
from protocol.message_properties import properties_to_string, string_to_properties
from protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    BORNHOST_V6_FLAG,
    IPV6_WIDTH,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PHYSICAL_OFFSET_AT,
    QUEUE_OFFSET_AT,
    QUEUE_OFFSET_WIDTH,
    SIZE_MAGIC,
    STOREHOST_V6_FLAG,
    TOPIC_MAX_LENGTH_V1,
)
from store.checkpoint import Checkpoint, create_abort_marker, remove_abort_marker
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.config.topics import UNLISTED_TOPICS, TopicConfig, TopicTable
from store.consumequeue.builder import ConsumeQueueBuilder
from store.consumequeue.trim import trim_queues_past
from store.errors import StoreError
from store.index.builder import IndexBuilder
from store.index.trim import drop_index_files_past
from store.platform.broker_lock import StoreLockBusy, hold_store_lock, release_store_lock
from store.platform.file_facts import fd_facts, path_facts
from store.reput.walk import Reput
from store.write.cache_window import CacheWindow

#: The compiled batch append (``_batch_encode_fast.c``), or None: ``StoreWriter._put_uniform``.
_batch_fast = load("store.write._batch_encode_fast")

#: The end-of-file blank: TOTALSIZE (the free bytes) and BLANK_MAGIC_CODE.
_BLANK = SIZE_MAGIC
#: QUEUEOFFSET and PHYSICALOFFSET, back to back at QUEUE_OFFSET_AT of a record.
_QUEUE_AND_PHYSICAL_OFFSET = struct.Struct(">qq")
assert PHYSICAL_OFFSET_AT == QUEUE_OFFSET_AT + QUEUE_OFFSET_WIDTH


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one appended record went and the ids a client would print for it."""

    offset: int
    size: int
    offset_msg_id: str
    unique_key: str | None
    store_timestamp: int
    #: The record's offset in its consume queue (0 for a prepared or rolled-back transaction).
    queue_offset: int = 0


@dataclass(slots=True)
class StoreRecord:
    """One record as the broker's encoder takes it (``MessageExtBrokerInner``).

    Everything the append itself fills in is left out: the store timestamp, the queue and physical
    offsets, BODYCRC and the IPv6 bits of ``sys_flag`` (set from the hosts). ``body`` is the body as
    stored (still compressed when ``sys_flag`` says so) and ``properties`` the exact string stored.
    ``store_host``/``store_port`` default to the writer's (the broker's ``brokerIP1:listenPort``).
    """

    topic: str
    body: bytes
    properties: str | bytes = ""
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1"
    born_port: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_host: str | None = None
    store_port: int | None = None


class WriterLockedError(StoreError):
    """Another writer holds the store's ``lock`` file (a broker, a writer of another process or of this one).

    ``holder``: the pid holding it when known (-1: an OFD lock whose process could not be found).
    """

    def __init__(self, message: str, *, holder: int | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class RecordTooLargeError(StoreError):
    """Records (one message or a whole batch) larger than a CommitLog file can hold with its end
    marker: refused before anything is written (no blank end-of-file record, no queue offset taken).

    Only a store whose ``mappedFileSizeCommitLog`` is below ``maxMessageSize`` (+ headers) meets it;
    the send path answers it as the broker answers a message it cannot store as sent.
    """


class CommitLogFullError(OSError):
    """The disk is full (ENOSPC, EDQUOT): the records were not written, and whatever part of them
    the kernel took was zeroed again, so the CommitLog still ends at its last whole record.
    Appending works again once space returns."""


class CommitLogCutError(StoreError):
    """The CommitLog file being appended to lost bytes the writer had written (cut short, deleted or
    replaced under it): nothing was written now.

    Records appended after such a cut lie behind a hole no walk crosses, so the reput would never
    dispatch them and the broker's recovery would truncate them away at the next start
    (``recoverAbnormally`` -> ``truncateDirtyFiles``). The writer cannot serve them, so it must not
    take them; reopening the store recovers (the open walks to the last whole record and trims the
    queues and IndexFiles past it, as the broker's recovery does).
    """


#: Bytes scrubbed per step past the end of the data when a writer opens a store (a torn record).
_SCRUB_CHUNK = 64 * 1024


class StoreWriter:
    """Appends records to a store directory and keeps its index up to date.

    One writer per store: from construction to ``close`` it holds an exclusive lock on byte 0 of the
    store's ``lock`` file, the byte a broker locks, so neither a second writer nor a Java broker can
    start on the store while it writes (``WriterLockedError`` for the second writer).
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        store_host: str | None = None,
        store_port: int | None = None,
        clock: Callable[[], int] | None = None,
        unique_ids: UniqueIdGenerator | None = None,
        index_now: Callable[[], int] | None = None,
        index: bool = True,
        mark_in_use: bool = True,
        consume_queues: bool = True,
        scan_queues: bool = True,
    ) -> None:
        self.config = config
        self.store_host = store_host or config.broker_ip1
        self.store_port = store_port if store_port is not None else config.listen_port
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._unique_ids = unique_ids or UniqueIdGenerator()
        self.file_size = config.mapped_file_size_commit_log
        root = config.store_path_root_dir
        root.mkdir(parents=True, exist_ok=True)
        config.store_path_commit_log.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_store(root)
        self._fd: int | None = None
        #: CommitLog offsets [begin, end) a failed write left torn and not yet zeroed again.
        self._torn: tuple[int, int] | None = None
        #: Hands back the page cache of what was written more than a window ago (None: off).
        self._cache_window: CacheWindow | None = None
        #: The bytes the last ``put_batch`` wrote (its records, back to back from its first
        #: ``Appended.offset``): a writable store's settle hands them to the dispatchers instead of
        #: reading them back from a map (``WritableStore.settle``).
        self.last_written: bytes = b""
        # Whatever fails from here on releases the lock again: a writer that never opened must
        # not keep the store locked for the rest of this process.
        try:
            self._reader = CommitLog(config.store_path_commit_log, self.file_size)
            self._position = self._reader.max_offset
            self._queue_offsets: dict[tuple[str, int], int] = {}
            self._topics: dict[str, int] = {}
            #: ``config/topics.json``, loaded when a topic is first written; the topics this writer added.
            self._table: TopicTable | None = None
            self._created: set[str] = set()
            #: Set by ``resume_queues``: until then the next queue offsets are unknown and nothing is put.
            self._queues_known = False
            self._fd_start = -1
            self._scrub_torn_tail()
            # Queue entries pointing at or past the end (the log was cut short or lost its last files)
            # are trimmed before anything reads the queues, as the broker's recovery does: otherwise the
            # old queue offsets would be handed out again and new records skipped or misnamed.
            trim_queues_past(config.consume_queue_dir, config.consume_queue_file_size, self._position)
            drop_index_files_past(
                config.index_dir, config.max_hash_slot_num, config.max_index_num, self._position
            )
            self._last_store_ts = 0
            self.builder: IndexBuilder | None = (
                IndexBuilder(config, self._reader, now_millis=index_now)
                if index and config.message_index_enable
                else None
            )
            self.cq_builder: ConsumeQueueBuilder | None = (
                ConsumeQueueBuilder(config, self._reader) if index and consume_queues else None
            )
            #: False when the caller dispatches the records itself (``WritableStore``: the query
            #: side's builders).
            self._dispatches = index
            #: One walk of what was appended feeds both builders (``store.reput``), in the broker's order.
            dispatchers = [d for d in (self.cq_builder, self.builder) if d is not None]
            self._reput = Reput(self._reader, dispatchers) if dispatchers else None
            if self.cq_builder is not None:
                # The queues as the broker recovers its topic queue table: from the consume queues,
                # brought up to the end of the CommitLog first (only what they lack is read; the index
                # is brought up at the first ``index()``).
                Reput(self._reader, [self.cq_builder]).run_once()
                self.resume_queues(self.cq_builder.queue_ends(), self.cq_builder.next_offset)
            elif scan_queues:
                self.resume_queues({}, self._reader.min_offset)  # no consume queues kept: every record
            # Marked in use only now: the builder above must see only a marker a crashed writer left.
            if mark_in_use:
                self.mark_in_use()
            window = config.commit_log_cache_window
            if window and hasattr(os, "posix_fadvise"):
                self._cache_window = CacheWindow(
                    config.store_path_commit_log,
                    self.file_size,
                    window,
                    start=self._position,
                    unmap=self._reader.release,
                )
        except BaseException:
            if self._fd is not None:
                os.close(self._fd)
            if hasattr(self, "_reader"):
                self._reader.close()
            _unlock_store(root, self._lock_fd)
            raise

    def resume_queues(self, queue_ends: Mapping[tuple[str, int], int], covered: int) -> None:
        """Start from the consume queues' ends (``ConsumeQueueBuilder.queue_ends``), which hold every
        record before CommitLog offset ``covered``, and read only the records from there on.

        The broker takes its next queue offsets from its consume queues at start
        (``recoverTopicQueueTable``) instead of reading its CommitLog: a store of many GiB opens in
        the time its queues' last files take to read. Topics are those with a queue, plus those of the
        records read; a topic whose every record is a prepared or rolled-back transaction before
        ``covered`` (no queue entry) is not among ``topics``, but ``config/topics.json`` has listed
        it since its first record was written (``_register_topic``, as the broker at send time).
        """
        self._queue_offsets = dict(queue_ends)
        self._topics = {}
        for topic, queue_id in queue_ends:
            self._topics[topic] = max(self._topics.get(topic, 0), queue_id + 1)
        for _offset, buf in self._reader.iter_records(covered):
            msg = decode_message(buf, 0, read_body=False)
            self._topics[msg.topic] = max(self._topics.get(msg.topic, 0), msg.queue_id + 1)
            if not _skips_queue(msg.sys_flag):
                key = (msg.topic, msg.queue_id)
                self._queue_offsets[key] = max(self._queue_offsets.get(key, 0), msg.queue_offset + 1)
        self._queues_known = True

    def mark_in_use(self) -> None:
        """Create the ``abort`` marker (removed by ``close``): until then a crash leaves no trace of
        this writer, so call it once whatever reads the store's markers at start-up has done so."""
        create_abort_marker(self.config.store_path_root_dir)

    # -- files ---------------------------------------------------------------------------------------

    def _scrub_torn_tail(self) -> None:
        """Zero what a writer killed mid-record left past the end of the data, as far as it is dirty.

        The broker's recovery only moves its write position back; zeroing as well means a torn
        record can never be mistaken for data behind a shorter record written over its start.
        """
        pos = self._position
        start = pos - pos % self.file_size
        path = self.config.store_path_commit_log / f"{start:020d}"
        if not path.exists():
            return
        fd = self._file_for(start)
        at = pos - start
        while at < self.file_size:
            n = min(_SCRUB_CHUNK, self.file_size - at)
            chunk = os.pread(fd, n, at)
            if not chunk.strip(b"\0"):
                break
            os.pwrite(fd, bytes(n), at)
            at += n

    def open_file(self) -> tuple[int, int] | None:
        """(CommitLog offset the file starts at, its descriptor) of the file this writer has open
        (the one its last append went to), or None. For a settle's check that the file it wrote
        is still the one the read side maps (``CommitLog.refresh_written``): one ``fstat`` of this
        descriptor instead of a ``stat`` of the path and a look for the next file. The caller must
        not close or keep it: the writer closes it at roll-over and ``close``."""
        fd = self._fd
        return None if fd is None else (self._fd_start, fd)

    def _file_for(self, start: int) -> int:
        if self._fd is not None and self._fd_start == start:
            return self._fd
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        path = self.config.store_path_commit_log / f"{start:020d}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < self.file_size:
            os.ftruncate(fd, self.file_size)
        self._fd, self._fd_start = fd, start
        return fd

    def _place(self, total: int) -> int:
        """Where ``total`` bytes of records go: here, or (after a blank end-of-file record) the next file.

        ``doAppend``: records plus the 8-byte blank must fit what is left of the file, else the file
        is closed with ``[free bytes][BLANK_MAGIC_CODE]`` and the records go to the next one.
        """
        if total + BLANK_SIZE > self.file_size:
            raise RecordTooLargeError(
                f"{total} bytes of records cannot fit a {self.file_size}-byte CommitLog file"
            )
        start = self._position - self._position % self.file_size
        pos = self._position - start
        free = self.file_size - pos
        if total + BLANK_SIZE > free:
            self._write(start, _BLANK.pack(free, BLANK_MAGIC_CODE), pos)
            self._position = start + self.file_size
        return self._position

    def _write(self, start: int, data: bytes, at: int) -> None:
        """Write all of ``data`` at byte ``at`` of the file beginning at CommitLog offset ``start``, or
        leave the file as it was and raise (``CommitLogFullError`` when the disk is full).

        A full disk shows as a short ``pwrite`` (what fitted) and then ENOSPC. Unchecked, the short
        write left a torn record after the last acknowledged one, answered SEND_OK, and every later
        record went after it: a gap fsck reports and the broker's recovery truncates at, losing all
        of them. The part written is zeroed again (pages already written need no new space), so the
        data still ends at the last whole record and the next append goes exactly there; if even
        that fails, ``_clean_torn_write`` zeroes it before the next append.
        """
        fd = self._file_for(start)
        view = memoryview(data)
        done = 0
        try:
            while done < len(view):
                n = os.pwrite(fd, view[done:], at + done)
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
        except OSError as exc:
            if done:
                self._torn = (start + at, start + at + done)
                self._clean_torn_write()
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CommitLogFullError(
                    exc.errno,
                    f"{exc.strerror}: {len(view)} bytes at CommitLog offset {start + at} "
                    f"({done} written and undone)",
                ) from exc
            raise
        if self._cache_window is not None:
            self._cache_window.wrote(start + at + done)

    def _check_not_cut(self) -> None:
        """Raise ``CommitLogCutError`` when the file the next record goes to no longer holds what this
        writer wrote into it: shorter than the writer's position in it, or unlinked (deleted, or
        replaced by a rename). One ``fstat`` per append.

        Unchecked, ``pwrite`` past the new end silently re-extends the file with a hole in the middle,
        and every record after it was acknowledged but never dispatched (issue 18, item 6).
        """
        at = self._position % self.file_size
        if at == 0:
            return  # the next record starts a file: nothing of this file was written yet
        start = self._position - at
        size: int | None
        if self._fd is not None and self._fd_start == start:
            _, links, size = fd_facts(self._fd)  # (``fd_facts``: the numbers without an os.stat_result)
            gone = links == 0
        else:
            try:
                _, _, size = path_facts(self.config.store_path_commit_log / f"{start:020d}")
                gone = False
            except FileNotFoundError:
                size, gone = None, True
        if gone or size is None or size < at:
            found = "gone" if gone or size is None else f"{size} bytes"
            raise CommitLogCutError(
                f"CommitLog file {start:020d} was cut under the writer ({found}; it had written {at} "
                f"bytes into it): records appended now would lie behind a hole and never be "
                "dispatched; refusing to append until the store is reopened (its recovery truncates "
                "at the last whole record, as the broker's does)"
            )

    def _clean_torn_write(self) -> None:
        """Zero what a failed write left past the end of the data (``_write``), if it is still there."""
        if self._torn is None:
            return
        begin, end = self._torn
        start = begin - begin % self.file_size
        try:
            os.pwrite(self._file_for(start), bytes(end - begin), begin - start)
        except OSError as exc:
            raise CommitLogFullError(
                exc.errno or errno.ENOSPC,
                f"{exc.strerror}: the torn write at CommitLog offset {begin} cannot be undone yet",
            ) from exc
        self._torn = None

    # -- appending -----------------------------------------------------------------------------------

    def _encode(self, rec: StoreRecord, store_timestamp: int, physical_offset: int) -> tuple[bytes, int]:
        """The record's bytes and its queue offset, with every field the append fills in."""
        store_host = rec.store_host or self.store_host
        store_port = self.store_port if rec.store_port is None else rec.store_port
        sys_flag = rec.sys_flag & ~(STOREHOST_V6_FLAG | BORNHOST_V6_FLAG)
        if len(pack_host(store_host)) == IPV6_WIDTH:
            sys_flag |= STOREHOST_V6_FLAG
        if len(pack_host(rec.born_host)) == IPV6_WIDTH:
            sys_flag |= BORNHOST_V6_FLAG
        queue_offset = 0 if _skips_queue(sys_flag) else self._queue_offsets.get((rec.topic, rec.queue_id), 0)
        msg = MessageExt(
            magic=MAGIC_CODE_V2 if len(rec.topic.encode("utf-8")) > TOPIC_MAX_LENGTH_V1 else MAGIC_CODE_V1,
            body_crc=body_crc(rec.body),
            queue_id=rec.queue_id,
            flag=rec.flag,
            queue_offset=queue_offset,
            commit_log_offset=physical_offset,
            sys_flag=sys_flag,
            born_timestamp=rec.born_timestamp,
            born_host=rec.born_host,
            born_port=rec.born_port,
            store_timestamp=store_timestamp,
            store_host=store_host,
            store_port=store_port,
            reconsume_times=rec.reconsume_times,
            prepared_transaction_offset=rec.prepared_transaction_offset,
            body=rec.body,
            stored_body=rec.body if sys_flag & COMPRESSED_FLAG else None,
            topic=rec.topic,
        )
        return encode_message(msg, properties_string=rec.properties), queue_offset

    def put(self, rec: StoreRecord, *, store_timestamp: int | None = None) -> Appended:
        """Append one record (``CommitLog.asyncPutMessage`` after the broker's checks)."""
        return self.put_batch([rec], store_timestamp=store_timestamp)[0]

    def put_batch(self, recs: list[StoreRecord], *, store_timestamp: int | None = None) -> list[Appended]:
        """Append records back to back with one store timestamp (``asyncPutMessages``).

        They land in one file: when the whole batch does not fit what is left, the file is closed
        with the blank record and the batch goes to the next. Queue offsets are consecutive.
        """
        if not recs:
            return []
        if not self._queues_known:
            raise StoreError("the writer's queue offsets are not known yet: call resume_queues first")
        now = self._clock() if store_timestamp is None else store_timestamp
        self._check_not_cut()
        self._clean_torn_write()
        if _batch_fast is not None:
            appended = self._put_uniform(recs, now)
            if appended is not None:
                return appended
        # Sizes do not depend on the offsets: encode, place the whole batch, then fill in the queue
        # and physical offsets (as doAppend patches the pre-encoded buffer).
        chunks = [bytearray(self._encode(rec, now, 0)[0]) for rec in recs]
        offset = self._place(sum(len(c) for c in chunks))
        out: list[Appended] = []
        for rec, data in zip(recs, chunks, strict=True):
            size = len(data)
            queue_offset = (
                0 if _skips_queue(rec.sys_flag) else self._queue_offsets.get((rec.topic, rec.queue_id), 0)
            )
            _QUEUE_AND_PHYSICAL_OFFSET.pack_into(data, QUEUE_OFFSET_AT, queue_offset, offset)
            host = rec.store_host or self.store_host
            port = self.store_port if rec.store_port is None else rec.store_port
            out.append(
                Appended(
                    offset,
                    size,
                    create_offset_msg_id(host, port, offset),
                    _unique_key(rec.properties),
                    now,
                    queue_offset,
                )
            )
            self._note(rec.topic, rec.queue_id, rec.sys_flag, now)
            offset += size
        start = self._position - self._position % self.file_size
        written = b"".join(chunks)
        try:
            self._write(start, written, self._position - start)
        except OSError:
            for rec in recs:  # nothing was stored: the queue offsets taken are given back
                self._unnote(rec.topic, rec.queue_id, rec.sys_flag)
            raise
        self.last_written = written
        self._position = offset
        self._last_store_ts = now
        return out

    def _put_uniform(self, recs: list[StoreRecord], now: int) -> list[Appended] | None:
        """``put_batch`` in one compiled call (``_batch_encode_fast.encode_uniform``) when the records
        share all but their flag, body and properties (a SEND_BATCH_MESSAGE's do); None, with nothing
        done, when the call cannot take them (the per-record path below stores the same bytes)."""
        first = recs[0]
        store_host = first.store_host or self.store_host
        store_port = self.store_port if first.store_port is None else first.store_port
        try:
            born_addr, store_addr = pack_host(first.born_host), pack_host(store_host)
        except (MessageIdError, AttributeError):
            return None  # the per-record path raises its own error
        sys_flag = first.sys_flag & ~(STOREHOST_V6_FLAG | BORNHOST_V6_FLAG)
        if len(store_addr) == IPV6_WIDTH:
            sys_flag |= STOREHOST_V6_FLAG
        if len(born_addr) == IPV6_WIDTH:
            sys_flag |= BORNHOST_V6_FLAG
        skips = _skips_queue(first.sys_flag)
        key = (first.topic, first.queue_id)
        queue_offset = None if skips else self._queue_offsets.get(key, 0)
        encoded = _batch_fast.encode_uniform(  # type: ignore[union-attr]
            recs, born_addr, store_addr, store_port, sys_flag, now, queue_offset, self._place
        )
        if encoded is None:
            return None
        data, sizes, ids, keys = encoded
        offset = self._position
        start = offset - offset % self.file_size
        self._note(first.topic, first.queue_id, first.sys_flag, now)  # as per record: one queue, one topic
        if not skips and len(recs) > 1:
            self._queue_offsets[key] += len(recs) - 1
        try:
            self._write(start, data, offset - start)
        except OSError:
            if not skips:  # nothing was stored: the queue offsets taken are given back
                self._queue_offsets[key] -= len(recs)
            raise
        self.last_written = data
        out = []
        for i, size in enumerate(sizes):
            out.append(Appended(offset, size, ids[i], keys[i], now, 0 if skips else queue_offset + i))
            offset += size
        self._position = offset
        self._last_store_ts = now
        return out

    def encoded_state(
        self,
    ) -> tuple[dict[tuple[str, int], int], dict[str, int], int, int, int, bytes, int, set[str]]:
        """What a caller that encodes records itself needs to append them (``write_encoded``): the
        next queue offset per (topic, queue id), which it takes for each record, the queues known per
        topic (which it raises as ``_note`` does for a topic this writer did not create), where the
        next record goes, the file size, the store timestamp, the store host (packed) and port, and
        the topics this writer created (whose growth ``_register_topic`` saves: left to it). The
        checks ``put_batch`` makes before an append are made here (``CommitLogCutError``,
        ``CommitLogFullError`` when a torn write cannot be undone).

        The compiled request path's plain SENDs (``server/remoting/_request_path_plain.h``) take
        the queue offsets from the returned dict itself, so the caller must write or give back
        every offset it took before anything else appends."""
        if not self._queues_known:
            raise StoreError("the writer's queue offsets are not known yet: call resume_queues first")
        self._check_not_cut()
        self._clean_torn_write()
        return (
            self._queue_offsets,
            self._topics,
            self._position,
            self.file_size,
            self._clock(),
            pack_host(self.store_host),
            self.store_port,
            self._created,
        )

    def write_encoded(self, data: bytes, position: int, now: int, keys: list[tuple[str, int]]) -> None:
        """Write records encoded from ``encoded_state`` (each of ``keys`` took one queue offset, in
        order) at ``position``, the writer's position, all within its current file, with one
        ``pwrite``. On a failed write nothing is stored: the file is as it was (``_write``) and the
        queue offsets taken are given back; the error is raised."""
        if position != self._position:
            raise StoreError(f"records encoded for offset {position} but the writer is at {self._position}")
        start = position - position % self.file_size
        try:
            if position - start + len(data) + BLANK_SIZE > self.file_size:
                raise StoreError("encoded records must fit the current CommitLog file with its blank")
            self._write(start, data, position - start)
        except BaseException:
            offsets = self._queue_offsets
            for key in keys:
                offsets[key] -= 1
            raise
        self.last_written = data
        self._position = position + len(data)
        self._last_store_ts = now

    def _unnote(self, topic: str, queue_id: int, sys_flag: int) -> None:
        if not _skips_queue(sys_flag):
            self._queue_offsets[(topic, queue_id)] -= 1

    def _note(self, topic: str, queue_id: int, sys_flag: int, now: int) -> None:
        if not _skips_queue(sys_flag):
            key = (topic, queue_id)
            self._queue_offsets[key] = self._queue_offsets.get(key, 0) + 1
        queues = self._topics.get(topic, 0)
        if queue_id >= queues:
            self._topics[topic] = queue_id + 1
            self._register_topic(topic, queue_id + 1, now)

    def use_topic_table(self, table: TopicTable) -> None:
        """Keep topics in ``table`` (the caller's, saved to ``config/topics.json``) instead of a copy
        of its own, so the two never overwrite each other's topics."""
        self._table = table

    def _topic_table(self) -> TopicTable:
        if self._table is None:
            try:
                self._table = TopicTable.load(self.config.store_path_root_dir / "config" / "topics.json")
            except StoreError:
                self._table = TopicTable(self.config.store_path_root_dir / "config" / "topics.json", {}, 0, 0)
        return self._table

    def forget_topic(self, topic: str) -> int:
        """The topic was deleted from the table and its consume queues removed: stop putting it back
        (at ``close``; its next record written registers it anew) and start its queues again from
        offset 0, as the broker's ``removeQueueFromTopicQueueTable`` does. Returns how many queues it
        had here (the highest queue id written + 1), so the caller need not list its directory."""
        queues = self._topics.pop(topic, 0)
        self._created.discard(topic)
        for queue_id in range(queues):
            self._queue_offsets.pop((topic, queue_id), None)
        return queues

    def register_missing_topics(self, now: int) -> list[str]:
        """Put every topic with records that the table lacks into it, saved once; returns them.

        A table saved off the event loop (``TopicPersister``) whose write failed lags the CommitLog:
        topics created by SENDs have records and queue entries but no line in ``topics.json``.
        Called when a writable store opens, this brings them back as they were created at send time
        (``_register_topic``'s queue count and perm), as ``close`` always did.
        """
        added = [
            topic
            for topic, queues in sorted(self._topics.items())
            if self._register_topic(topic, queues, now, save=False)
        ]
        if added:
            self._topic_table().save()
        return added

    def _register_topic(self, topic: str, queues: int, now: int, *, save: bool = True) -> bool:
        """Put a topic the table lacks into ``topics.json`` as its first record is written, as the
        broker creates a topic's config at send time (``msgCheck`` ->
        ``createTopicInSendMessageMethod``, persisted at once): it is listed whatever its records are
        (prepared or rolled-back transactions get no queue entry, so a reopen could not find them
        from the queues) and whether or not this writer is closed. Queue count: the highest queue id
        written + 1, at least 4; grown only for topics this writer added. True when it was added.
        A topic the broker never lists (``UNLISTED_TOPICS``) is never added.

        Saved at once: on the send path the topic was created (and saved) by the SEND's check, so
        only records put directly (the test kit, ``make-store``) get here."""
        if topic in UNLISTED_TOPICS:
            return False
        table = self._topic_table()
        known = table.get(topic)
        nums = max(queues, 4)
        if known is None or (topic in self._created and known.write_queue_nums < nums):
            table.put(TopicConfig(topic, nums, nums), now)
            if save:
                table.save()
            self._created.add(topic)
            return True
        return False

    def append(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | Iterable[str] | None = None,
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        unique_key: str | bool = True,
        queue_id: int = 0,
        sys_flag: int = 0,
        flag: int = 0,
        born_host: str = "127.0.0.1",
        born_port: int = 50000,
        born_timestamp: int | None = None,
        store_timestamp: int | None = None,
    ) -> Appended:
        """Append one message; ``unique_key`` True generates one, False omits it, a str sets it.

        A compressed ``sys_flag`` (0x1 plus a codec in bits 8-10) compresses ``body`` with that codec.
        Properties are stored in the order given (KEYS, TAGS, ``properties``, UNIQ_KEY).
        """
        now = self._clock() if store_timestamp is None else store_timestamp
        props: dict[str, str] = {}
        if keys is not None:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else " ".join(keys)
        if tags is not None:
            props[PROPERTY_TAGS] = tags
        if properties:
            props.update(properties)
        if unique_key is True:
            props[PROPERTY_UNIQ_KEY] = self._unique_ids.next_id()
        elif isinstance(unique_key, str):
            props[PROPERTY_UNIQ_KEY] = unique_key
        stored = body
        if sys_flag & COMPRESSED_FLAG:
            from protocol.compression import compress
            from protocol.message_flags import compression_type_value

            stored = compress(body, compression_type_value(sys_flag))
        rec = StoreRecord(
            topic,
            stored,
            properties_to_string(props),
            queue_id=queue_id,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=now if born_timestamp is None else born_timestamp,
            born_host=born_host,
            born_port=born_port,
        )
        return self.put(rec, store_timestamp=now)

    @property
    def commitlog(self) -> CommitLog:
        """The writer's read view of its CommitLog (open until ``close``), for a query side to share."""
        return self._reader

    @property
    def position(self) -> int:
        """The CommitLog offset the next record will be written at."""
        return self._position

    @property
    def topics(self) -> set[str]:
        return set(self._topics)

    def index(self) -> int:
        """Index everything appended so far; returns the number of records read."""
        self._reader.refresh()
        return self._reput.run_once() if self._reput is not None else 0

    def close(self) -> None:
        """Index what is left, write the checkpoint and topic table, and remove the abort marker."""
        self.index()
        if self._cache_window is not None:
            self._cache_window.close()
            self._cache_window = None
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self.builder is not None:
            self.builder.close()
        if self.cq_builder is not None:
            self.cq_builder.close()
        root = self.config.store_path_root_dir
        checkpoint = Checkpoint.read_or_default(self.config.checkpoint_path)
        checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, self._last_store_ts)
        if self.cq_builder is None and self._dispatches:
            checkpoint.logics_msg_timestamp = checkpoint.physic_msg_timestamp
        checkpoint.write(self.config.checkpoint_path)
        self._write_topics()
        self._reader.close()
        remove_abort_marker(root)
        _unlock_store(root, self._lock_fd)

    def _write_topics(self) -> None:
        """Add every topic written that the table lacks (those read back at open included), keeping
        what the table already says."""
        for topic, queues in sorted(self._topics.items()):
            self._register_topic(topic, queues, self._last_store_ts)
        table = self._topic_table()
        if not table.path.exists():
            table.save()  # the broker's layout: a store that was written to has its topic table

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _skips_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transactions get queue offset 0 and no consume-queue entry."""
    return sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def _unique_key(properties: str | bytes) -> str | None:
    if isinstance(properties, bytes):
        properties = properties.decode("utf-8", "replace")
    return string_to_properties(properties).get(PROPERTY_UNIQ_KEY) if properties else None


def _lock_store(root: Path) -> int:
    """Hold ``root/lock`` for the writer's whole life (``store.platform.broker_lock.hold_store_lock``:
    the byte the broker's ``tryLock`` takes, with a lock no other open and close of the file in this
    process can drop), so a broker and a second writer, in this process or another, are kept out."""
    try:
        return hold_store_lock(root)
    except StoreLockBusy as busy:
        raise WriterLockedError(
            f"{busy.strerror}: the store is in use, refusing to write it",
            holder=busy.holder,
        ) from None


def _unlock_store(root: Path, fd: int) -> None:
    release_store_lock(fd)
