"""``MessageStore``: the one object the server talks to, answering like ``DefaultMessageStore``.

``query_message`` reproduces ``DefaultMessageStore.queryMessage``: up to three rounds of
``queryOffset``; each round sorts the offsets, takes the store time of the smallest readable one as
the new end of the range, and collects the records; it stops once anything was collected (the retry
only matters when index hits point into deleted CommitLog files). The two ``indexLastUpdate`` values
are those of the last round that found offsets, else 0, as the broker reports them.

Calls are synchronous (memory-mapped reads) and may come from several threads: the server answers
cheap queries on its event loop and runs a key query whose chain walk exceeds a small budget on a
thread pool (``server.query_pool``); ``budget`` bounds the index entries one query visits.
``refresh()`` picks up what a live broker wrote since (new CommitLog and index files, a growing tail)
and, when this store builds its own index, feeds the new records through one reput
(``store.reput``) to the consume queue and index builders.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import ProtocolError
from protocol.message import read_index_fields
from protocol.record_layout import MAGIC_CODE_V1, MAGIC_CODE_V2
from store.checkpoint import Checkpoint, abnormal_exit
from store.commitlog import record
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.config.topics import read_topic_attributes
from store.consumequeue.consume_queue import store_time_picker
from store.consumequeue.get_message import GetMessageResult, GetMessageStatus, RecordFilter, get_message
from store.consumequeue.queue_table import QueueTable
from store.consumequeue.topic_counts import TopicQueueNums
from store.errors import CheckpointError, DispatchWriteError
from store.file_repairs import FileRepairs
from store.index.index_file import UNBOUNDED
from store.index.service import IndexService, QueryArgumentError, ResumePoint
from store.platform.broker_lock import broker_lock_holder, index_files_mapped_by
from store.platform.resident import resident_file_bytes
from store.reput.walk import Reput
from store.warn_once import WarnOnce

__all__ = [
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "QueryArgumentError",
    "QueryMessageResult",
]

#: Budget for resident mapped pages: past it (measured, or by record bytes served plus a page per
#: record) the mapped pages are handed back to the kernel.
DEFAULT_RSS_TRIM_BYTES = 128 << 20
#: Records served between two looks at the process's resident file pages (``store.platform.resident``).
#: A look costs ~1.7 us; a record read can map far more than its bytes: the kernel maps a fault's
#: whole page-cache folio (ext4 with large folios on Linux 6.x: 0.4 to 1.4 MiB a random touch of
#: a store written or read in sequence, measured in issue 22), so 256 records between looks could
#: map ~360 MiB past the budget before the look came.
RSS_CHECK_EVERY_RECORDS = 32
#: Records dispatched from a writer's own appends as written (``refresh_written``: not read back
#: through the CommitLog's maps, as a walk's records are, which are looked at every
#: ``RSS_CHECK_EVERY_RECORDS``) between two looks at the resident file pages. That dispatch
#: touches the index file only (its hash slot and its entry; the consume queues are written with
#: ``pwrite``): measured over 1,000 batches of 32 (``serve --writable``'s default geometry, issue
#: 33 h39), the resident pages grew by 36 KiB a batch at the median and 224 KiB at most, so 256
#: records between looks leave at most ~2 MiB past the budget, and a server taking one batch per
#: turn of its loop pays the look every eighth batch instead of every one.
RSS_CHECK_EVERY_DISPATCHED = 256
#: Seconds between two audits of the index file by the settles of a server's puts
#: (``IndexService.audit(tail=True)``: a ``stat`` of its path and a read of its header; a store
#: used without a loop, ``once_per_turn`` None, audits every put's settle). The audit only warns
#: (the builder's own ``intact`` check still guards every write through the map), so a file
#: deleted, replaced, cut or zeroed under the builder is said within this much of the next put,
#: and a server taking one batch per turn of its loop does not pay it on every batch (it was once
#: per turn only).
AUDIT_EVERY = 0.01
log = logging.getLogger("store")


@dataclass(frozen=True, slots=True)
class QueryResume:
    """Where ``query_message``'s budget ran out, to finish the same query from there.

    The round of the broker's three it was in, that round's end of the time range, what the
    earlier rounds left in the answer, and where the index walk stopped.
    """

    round: int
    last_query_time: int
    visited: int
    index_last_update_timestamp: int
    index_last_update_phyoffset: int
    offsets: ResumePoint


@dataclass(slots=True)
class QueryMessageResult:
    """Raw records (ascending CommitLog offset) and the index's last-update values."""

    buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    #: Index entries the chain walks visited (all rounds).
    visited: int = 0
    #: True when the walk stopped at its budget: the records are those found until then.
    budget_exhausted: bool = False
    #: Where it stopped: ``query_message(..., resume=...)`` finishes the query (None when it did
    #: not stop, or when the walk cannot be continued and must start over).
    resume: QueryResume | None = None

    @property
    def buffer_total_size(self) -> int:
        return sum(map(len, self.buffers))  # byte views: len is nbytes


def key_matches(buf: memoryview, topic: str, key: str) -> bool:
    """Exact match, as the Java client filters: same topic and ``key`` among KEYS or equal to UNIQ_KEY."""
    try:
        fields = read_index_fields(buf, 0)
    except ProtocolError:
        return False
    if fields.topic != topic:
        return False
    if fields.unique_key == key:
        return True
    return fields.keys is not None and key in fields.keys.split(" ")


class MessageStore:
    """A store directory opened for queries (and, optionally, for building its own index)."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        build_index: bool = False,
        rss_trim_bytes: int = DEFAULT_RSS_TRIM_BYTES,
        catch_up: bool = True,
        index_keys: bool = True,
        commitlog: CommitLog | None = None,
    ) -> None:
        self.config = config
        self.rss_trim_bytes = rss_trim_bytes
        self._served_since_trim = 0
        self._records_since_check = 0
        #: Records the dispatchers were handed since the last look at the resident pages.
        self._dispatched_since_check = 0
        #: ``time.monotonic()`` of the last audit a put's settle made (``AUDIT_EVERY``).
        self._audited_at = -AUDIT_EVERY
        self.build_index = build_index
        self._lock = threading.RLock()
        self.warn = WarnOnce(log)
        self._report_markers()
        #: A CommitLog view given by the caller (the write path's writer) stays the caller's to close.
        self._own_commitlog = commitlog is None
        self.commitlog = commitlog or CommitLog(
            config.store_path_commit_log, config.mapped_file_size_commit_log
        )
        self.queues = QueueTable(config, self.commitlog)
        self._store_time = store_time_picker(self.commitlog)
        self._builder = None
        self._cq_builder = None
        #: Set by a caller that runs ``flush_queues`` itself, off its thread (a server's refresh
        #: loop: an fsync must not hold the event loop): a caught-up ``refresh`` then only sets
        #: ``flush_due`` instead of syncing the consume queues it built.
        self.defer_flush = False
        #: A caught-up ``refresh`` found consume queues to sync (with ``defer_flush``).
        self.flush_due = False
        #: Set by a server that settles many puts per turn of its event loop (``QueryServer``):
        #: called when a put's settle first does this turn's once-a-turn work (``_first_this_turn``:
        #: the index audit, the look at resident memory and the page release it may bring), it
        #: arranges ``next_turn`` for the loop's next turn; the settles in between skip that work.
        #: None (a store used without a loop): every put's settle does it.
        self.once_per_turn: Callable[[], object] | None = None
        #: The once-a-turn work done this turn (``_first_this_turn``).
        self._turn_spent: set[str] = set()
        #: The topics are those of the topic table and the consume queues only, not also those the
        #: index builder walked past: set by a writable store, whose table lists every topic with
        #: records (a deleted topic's records stay, and the index walks its last one again at start).
        self.listed_topics_only = False
        #: The reput feeding the builders (``build_index``): one walk of the CommitLog for both.
        self._reput: Reput | None = None
        #: Why the last pass of the reput could not write an entry (a full disk), None when it could.
        self.dispatch_error: str | None = None
        # ``build_index`` is an explicit request, so it holds even when broker.conf says
        # messageIndexEnable=false: that store's broker never indexed it, which is why we are asked to.
        if build_index and (mapped := _maintained_by_broker(config, config.index_dir)):
            # A second writer of the broker's own IndexFiles (and consume queues) would corrupt them:
            # serve what it writes.
            log.warning(
                "not building the index: a running broker (pid %d) maintains it (it has %d file(s) of "
                "%s mapped); serving its index read-only",
                mapped[0],
                mapped[1],
                config.index_dir,
            )
            build_index = self.build_index = False
        if build_index:
            from store.consumequeue.builder import ConsumeQueueBuilder
            from store.index.builder import IndexBuilder  # the builder writes; plain serving never needs it

            if index_keys:
                self._builder = IndexBuilder(config, self.commitlog)
                self.index = self._builder.index
            else:
                # The broker's dispatch without CommitLogDispatcherBuildIndex: the index files that
                # exist are served as they are, none is added to.
                self.index = IndexService(config)
            cq_mapped = _maintained_by_broker(config, config.consume_queue_dir)
            if cq_mapped:
                # A broker that does not index still writes its consume queues: never a second writer.
                log.warning(
                    "not building consume queues: a running broker (pid %d) maintains them (it has %d "
                    "file(s) of %s mapped)",
                    cq_mapped[0],
                    cq_mapped[1],
                    config.consume_queue_dir,
                )
            else:
                self._cq_builder = ConsumeQueueBuilder(config, self.commitlog)
                # The queues it creates from now on are told to the topic counts (no directory
                # listing per new queue).
                self._cq_builder.new_queue = self.queues.counts.note_queue
                self.queues.written_tail = self._cq_builder.written_tail
            # One walk feeds both, in the broker's order: consume queue, then index.
            dispatchers = [d for d in (self._cq_builder, self._builder) if d is not None]
            self._reput = Reput(self.commitlog, dispatchers) if dispatchers else None
            if catch_up:
                if self._reput is not None:
                    try:
                        self._reput.run_once()
                    except DispatchWriteError as exc:
                        # A full disk at start: the store opens and serves what is built; the
                        # entries are written by a later refresh (the writer refuses SENDs until then).
                        self.dispatch_error = str(exc)
                        log.error("the consume queues or index cannot be brought up to date now: %s", exc)
                self.queues.refresh()
        else:
            self.index = IndexService(config)
        #: ``topics()``'s answer and the (counts version, topics seen) it was made for.
        self._topics_cache: frozenset[str] = frozenset()
        self._topics_key: tuple[int, int] = (-1, -1)
        #: Files that failed their checks under us, rebuilt from the CommitLog in refresh's slices.
        self.repairs = FileRepairs(config, self.commitlog, self.index, self.queues)

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        *,
        build_index: bool = False,
        rss_trim_bytes: int = DEFAULT_RSS_TRIM_BYTES,
        catch_up: bool = True,
        index_keys: bool = True,
        commitlog: CommitLog | None = None,
    ) -> MessageStore:
        """Open the store ``config`` describes; ``build_index`` indexes records the index lacks.

        ``catch_up=False`` leaves a backlog to later ``refresh(max_records=...)`` slices, so a server
        can answer from the index it has while the rest is indexed. ``index_keys=False`` (with
        ``build_index``) builds the consume queues only, as a broker with ``messageIndexEnable=false``
        dispatches: the IndexFiles already there are served, none is written. ``commitlog``: an open
        view of the store's CommitLog to share (the writer's, so the end is found once), left open.

        ``rss_trim_bytes``: once this many record bytes were served, or (checked every
        ``RSS_CHECK_EVERY_RECORDS`` records) this process's resident file pages reach it, the mapped
        pages are handed back to the kernel (they stay cached; hot ones fault back in cheaply),
        which keeps resident memory bounded however much of a multi-GiB store the queries touch.
        """
        return cls(
            config,
            build_index=build_index,
            rss_trim_bytes=rss_trim_bytes,
            catch_up=catch_up,
            index_keys=index_keys,
            commitlog=commitlog,
        )

    def _report_markers(self) -> None:
        """Say once what the store's marker files tell: an unclean broker exit, a lost checkpoint."""
        config = self.config
        holder = broker_lock_holder(config.store_path_root_dir)
        if abnormal_exit(config.store_path_root_dir) and holder is not None:
            # A running broker keeps ``abort`` until it shuts down cleanly: its layout, not damage.
            log.info(
                "a broker (pid %d) is running on this store (it holds %s): %s is its running marker, "
                "and its pre-created next CommitLog file and unwritten zeros are normal",
                holder,
                config.store_path_root_dir / "lock",
                config.abort_path,
            )
        elif abnormal_exit(config.store_path_root_dir):
            self.warn(
                "abort",
                f"{config.abort_path} exists and no broker holds the store's lock: the last broker "
                "did not shut down cleanly; the newest index file may miss its last keys (queries use "
                "what it holds; rmq-query rebuild-index --follow repairs and completes it)",
            )
        if not config.checkpoint_path.exists():
            self.warn(
                "checkpoint",
                f"no checkpoint at {config.checkpoint_path}: queries do not need it, but a broker "
                "restarting on this store cannot tell which index files are complete",
            )
            return
        try:
            Checkpoint.read(config.checkpoint_path)
        except CheckpointError as exc:
            self.warn(
                "checkpoint",
                f"{exc}: queries do not need it, but a broker restarting on this store cannot tell "
                "which index files are complete",
            )

    def _served(self, nbytes: int, records: int) -> None:
        self._served_since_trim += nbytes
        self._records_since_check += records
        trim = self._served_since_trim >= self.rss_trim_bytes
        if not trim and self._records_since_check >= RSS_CHECK_EVERY_RECORDS:
            # Small records fault in far more than their bytes (fault-around): ask the kernel.
            self._records_since_check = 0
            trim = self._resident_over_limit()
        if trim:
            self._release_pages()

    def _resident_over_limit(self) -> bool:
        resident = resident_file_bytes()
        return resident is not None and resident >= self.rss_trim_bytes

    def _release_pages(self) -> None:
        self._served_since_trim = 0
        self._records_since_check = 0
        self.commitlog.release_all()
        for f in self.index.files:
            f.release()

    # -- queries -------------------------------------------------------------------------------------

    def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        *,
        exact_key: bool = False,
        budget: int = UNBOUNDED,
        resume: QueryResume | None = None,
        deadline: int = 0,
    ) -> QueryMessageResult:
        """``DefaultMessageStore.queryMessage``; ``exact_key`` also drops hash collisions and other topics.

        ``budget`` bounds the index entries all rounds visit together; when it runs out the answer is
        what was found until then (``budget_exhausted`` says so, ``resume`` where it stopped). Safe
        to call from several threads. Raises ``QueryArgumentError`` where the broker throws (a
        negative ``max_num``).

        ``resume``, an earlier answer's to the same query, finishes that query: the answer is the
        one a single call with this ``budget`` (which counts the entries already read) gives, and
        the index entries read before are not read again.

        ``deadline`` (``time.monotonic_ns()``; 0 for none) stops the index walks as a spent budget
        does once it has passed: the answer says ``budget_exhausted`` and where to ``resume``.
        """
        result = QueryMessageResult()
        buffers = result.buffers
        last_query_time = end
        read_records = self.commitlog.read_records
        query_offsets = self.index.query_offsets
        first_round = 0
        point: ResumePoint | None = None
        if resume is not None:
            first_round, last_query_time, point = resume.round, resume.last_query_time, resume.offsets
            result.visited = resume.visited
            result.index_last_update_timestamp = resume.index_last_update_timestamp
            result.index_last_update_phyoffset = resume.index_last_update_phyoffset
        for round_ in range(first_round, 3):
            visited_before = result.visited
            # A resumed round's walk counts the entries its first part read: ``visited`` is the
            # round's whole, as in one uninterrupted call.
            offsets = query_offsets(
                topic,
                key,
                max_num,
                begin,
                last_query_time,
                budget=budget - visited_before,
                resume=point,
                deadline=deadline,
            )
            point = None
            result.visited += offsets.visited
            result.budget_exhausted = exhausted = offsets.budget_exhausted
            if exhausted and offsets.resume is not None:
                result.resume = QueryResume(
                    round_,
                    last_query_time,
                    visited_before,
                    result.index_last_update_timestamp,
                    result.index_last_update_phyoffset,
                    offsets.resume,
                )
            phy_offsets = offsets.phy_offsets
            if not phy_offsets:
                break
            phy_offsets.sort()
            result.index_last_update_timestamp = offsets.index_last_update_timestamp
            result.index_last_update_phyoffset = offsets.index_last_update_phyoffset
            # Read and checked whole in one call (one safe-length check per CommitLog file touched).
            # BODYCRC is not checked here: the broker serves a damaged body as stored, and a CRC per
            # served record would cost ~25% of a 64-hit query; the CommitLog walk (the builder,
            # fsck) reports such a record once.
            records = read_records(phy_offsets)
            first = records[0]
            if first is not None:
                last_query_time = record.store_timestamp(first, 0)
            # One list pass for the common case (``None in records`` would compare each memoryview
            # with None: ~8x slower); the per-record loop only for exact keys.
            found = [buf for buf in records if buf is not None]
            if len(found) != len(records):
                self._skipped_offsets(phy_offsets, records)
            if exact_key:
                found = [buf for buf in found if key_matches(buf, topic, key)]
            buffers += found
            if buffers or exhausted:
                break
            if last_query_time < begin:
                break
        # Each index entry visited is a page read at random in an IndexFile, like a small record: a
        # query returning one record may walk chains in every file (issue 22: on a 16 GiB store with
        # four IndexFiles, 300 one-hit key queries left 846 MiB resident between two looks). And the
        # slot read in each file walked is one more, uncounted by ``visited``: with the kernel
        # mapping a fault's whole folio, a key query on a 20 GiB store (five IndexFiles) mapped
        # ~4.8 MiB, so the peak grew with the files. Every key query is due a look (~1.7 us against
        # the query's 100 us or more): the peak is the budget plus one query's pages.
        self._records_since_check += RSS_CHECK_EVERY_RECORDS
        self._served(sum(map(len, buffers)) + 4096 * len(buffers), len(buffers) + result.visited)
        return result

    def query_snapshot(self) -> tuple[Any, ...] | None:
        """What ``query_message`` reads of the index, for the compiled request path, which runs its
        loop in C (``server/remoting/_query_loop.h``) over the CommitLog's ``view_snapshot``:
        (index files, their maps, descriptors, a writer's headers or None, file size, hash slots,
        index entries, maxMsgsNumBatch, the files' walked-segment caches); None without index files
        (the Python path answers)."""
        index = self.index
        files, maps, fds, headers, caches = index.query_maps()
        if not files:
            return None
        return (files, maps, fds, headers, files[0].size, index.hash_slot_num, index.index_num,
                index.max_msgs_num_batch, caches)  # fmt: skip

    def _skipped_offsets(self, phy_offsets: list[int], records: list[memoryview | None]) -> None:
        """Warn (once) about an index entry whose offset holds no whole record, if it is damage."""
        commitlog = self.commitlog
        for offset, buf in zip(phy_offsets, records, strict=True):
            # The broker's lookMessageByOffset fails: this offset is skipped. Below the CommitLog's
            # start (retention) or past its end (a live broker's index runs ahead of our last
            # refresh) that is normal; in between it is damage.
            if buf is None and commitlog.min_offset <= offset < commitlog.max_offset:
                self.warn(
                    "entry",
                    f"an index entry points at CommitLog offset {offset}, where no whole record "
                    "starts (a damaged index entry or record); such hits are skipped "
                    "(rmq-query fsck --store names them)",
                )
                return

    def view_message(self, offset: int) -> memoryview | None:
        """The raw record at ``offset`` (``selectOneMessageByOffset``), or None."""
        buf = self.commitlog.read_record(offset)
        self._served(4096 if buf is None else len(buf) + 4096, 1)
        return buf

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        """``view_message`` as the server sends it: a copy of the record, or None (also for a size
        word over ``max_size``, which cannot be a record the server could send: it is not copied)."""
        buf = self.commitlog.read_record_copy(offset, max_size)
        # ``_served(size, 1)`` with its common case (no trim, no look due) inline: 4% of a VIEW's
        # in-process instructions.
        self._served_since_trim += 4096 if buf is None else len(buf) + 4096
        self._records_since_check += 1
        if (
            self._served_since_trim >= self.rss_trim_bytes
            or self._records_since_check >= RSS_CHECK_EVERY_RECORDS
        ):
            self._served(0, 0)
        return buf

    def view_snapshot(self) -> tuple[list[Any], list[int], list[int], Any, int]:
        """The CommitLog's read snapshot for VIEWs answered in a batch (``CommitLog.view_snapshot``)."""
        return self.commitlog.view_snapshot()

    def served(self, nbytes: int, records: int) -> None:
        """Count records served outside ``view_message_copy`` (the compiled request path answers a
        batch of VIEWs from ``view_snapshot``): the same accounting, which may release pages."""
        self._served(nbytes, records)

    # -- consume queues (DefaultMessageStore's queue reads, 4.9.7) ------------------------------------

    def opened_queues(self) -> dict[tuple[str, int], Any]:
        """The consume queues opened so far (``QueueTable.opened``): the compiled request path
        answers the offset requests of these from their maps, as ``min_offset`` and the others do."""
        return self.queues.opened()

    def queue_nums(self) -> Mapping[str, int]:
        """topic -> read queue count: ``config/topics.json``, else highest consumequeue id + 1. A
        view of the kept table (``TopicCounts``): O(1) per lookup, never copied."""
        return _CountView(self.queues.queue_nums(), write=False)

    def write_queue_nums(self) -> Mapping[str, int]:
        """topic -> write queue count (what GET_TOPIC_STATS_INFO walks), same sources as ``queue_nums``."""
        return _CountView(self.queues.queue_nums(), write=True)

    def min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue`` (0 for an unknown queue, as the broker's made-up empty queue says)."""
        return self.queues.get(topic, queue_id).min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: one past the last entry."""
        return self.queues.get(topic, queue_id).max_offset

    def message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """``getMessageStoreTimeStamp``: store time of the message at queue ``offset``, or -1."""
        entry = self.queues.get(topic, queue_id).entry(offset)
        if entry is None:
            return -1
        return self._store_time(entry.commit_log_offset, entry.size)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """``getEarliestMessageTime(topic, queueId)``: store time at the min offset, -1 when none."""
        queue = self.queues.get(topic, queue_id)
        return self.message_store_timestamp(topic, queue_id, queue.min_offset)

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """``getOffsetInQueueByTime`` (file by mtime, then the broker's binary search in it)."""
        return self.queues.get(topic, queue_id).offset_by_time(timestamp, self._store_time)

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tags_codes: frozenset[int] | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """``getMessage`` as a master answers it (``store.consumequeue.get_message`` has the rules)."""
        result = get_message(
            self.config,
            self.commitlog,
            self.queues.get(topic, queue_id),
            offset,
            max_msg_nums,
            tags_codes,
            record_filter,
        )
        if result.buffers:
            self._served(result.buffer_total_size + 4096 * len(result.buffers), len(result.buffers))
        return result

    def topic_stats(self, topic: str) -> list[tuple[int, int, int, int]]:
        """GET_TOPIC_STATS_INFO's rows: (queueId, minOffset, maxOffset, lastUpdateTimestamp).

        One row per write queue; lastUpdateTimestamp is the store time at maxOffset-1 (0 when
        empty). An unknown topic gives ``[]`` (the broker answers TOPIC_NOT_EXIST).
        """
        counts = self.queues.queue_nums().get(topic)
        if counts is None:
            return []
        nums = counts.write
        if not self.queues.counts.has_dir(topic):
            # no consume queue at all: every queue is empty (the broker's made-up empty queues)
            return [(qid, 0, 0, 0) for qid in range(nums)]
        rows = []
        for qid in range(nums):
            queue = self.queues.get(topic, qid)  # once per queue, not once per figure
            lo = max(queue.min_offset, 0)
            hi = max(queue.max_offset, 0)
            last = 0
            if hi > 0:
                entry = queue.entry(hi - 1)
                last = -1 if entry is None else self._store_time(entry.commit_log_offset, entry.size)
            rows.append((qid, lo, hi, last))
        return rows

    def store_earliest_message_time(self) -> int:
        """The store-wide ``getEarliestMessageTime()`` (runtime info's earliestMessageTimeStamp).

        The broker reads 2 x maxMessageSize bytes at the CommitLog's first offset: if they are not
        all readable in its first file (files smaller than 8 MiB by default) the answer is -1.
        """
        files = self.commitlog.files
        first = files[0].start if files else -1
        return self._store_time(first, 2 * self.config.max_message_size)

    def first_message_time(self) -> int:
        """The store time of the CommitLog's first record (-1 for an empty CommitLog or a first
        record that cannot be read whole). Unlike ``store_earliest_message_time`` it reads only that
        record, so it answers on stores whose first file is smaller than 2 x maxMessageSize (the
        test kit's and the demo's): ``/metrics`` exports it where the broker's rule gives -1."""
        files = self.commitlog.files
        if not files:
            return -1
        first = files[0].start
        head = self.commitlog.select(first, 8)
        if head is None or len(head) < 8:
            return -1
        size, magic = (
            int.from_bytes(head[:4], "big", signed=True),
            int.from_bytes(head[4:8], "big", signed=True),
        )
        if size <= 8 or magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):  # a blank end marker or no record
            return -1
        return self._store_time(first, size)

    def index_last_update(self) -> tuple[int, int]:
        """(indexLastUpdateTimestamp, indexLastUpdatePhyoffset) of the newest index file: where
        indexing stands, for ``/metrics``' index lag; (0, 0) without an index."""
        return self.index.last_update()

    def topic_attributes(self) -> dict[str, dict[str, str]]:
        """topic -> its 5.x attributes in ``config/topics.json`` (``message.type``, ...), topics with
        none left out: what the gRPC route's accepted message types are read from."""
        return read_topic_attributes(self.config.store_path_root_dir / "config" / "topics.json")

    def topics(self) -> AbstractSet[str]:
        """Topics present in the store: ``config/topics.json``, the consumequeue directories, and the
        topics the index builder saw. Kept, rebuilt only when one of them changed (not per call)."""
        counts = self.queues.queue_nums()
        seen = self._builder.topics_seen if self._builder is not None and not self.listed_topics_only else ()
        key = (self.queues.counts.version, len(seen))
        if key != self._topics_key:
            found = set(counts)
            found.update(seen)
            self._topics_cache = frozenset(found)
            self._topics_key = key
        return self._topics_cache

    def forget_topic(self, topic: str, queue_count: int) -> None:
        """``cleanUnusedTopic`` for a topic the writable store deleted: the consume queues this store
        builds lose its directory (``ConsumeQueueBuilder.forget_topic``), the read side its opened
        queues and counts, the topic list its name. Its records stay in the CommitLog (and its keys
        in the IndexFiles, as in the broker)."""
        with self._lock:
            if self._cq_builder is not None:
                self._cq_builder.forget_topic(topic, queue_count)
            self.queues.forget_topic(topic)
            if self._builder is not None:
                self._builder.topics_seen.discard(topic)

    def queue_ends(self) -> tuple[dict[tuple[str, int], int], int] | None:
        """The consume queues this store builds: (each queue's next queue offset, the CommitLog offset
        before which every record is in them); None when it builds none (``ConsumeQueueBuilder``)."""
        builder = self._cq_builder
        if builder is None:
            return None
        return builder.queue_ends(), builder.next_offset

    # -- lifecycle -----------------------------------------------------------------------------------

    def flush_queues(self) -> None:
        """Sync the consume queues this store built and record ``logicsMsgTimestamp``: what a
        caught-up ``refresh`` does, callable from another thread (``ConsumeQueueBuilder.flush``; the
        store's lock is not taken, so a refresh on the event loop does not wait for the disk)."""
        builder = self._cq_builder
        if builder is not None:
            builder.flush()

    def refresh(
        self, max_records: int | None = None, *, tail: bool = False, whole_to: int | None = None
    ) -> bool:
        """Pick up new CommitLog data and index files; index new records when this store builds its own.

        ``max_records`` bounds the indexing done by this call (the caller can serve in between);
        returns True when records are left to index, so the caller should call again soon. ``tail``:
        the CommitLog's files before the known end were checked recently enough
        (``CommitLog.refresh``'s; a writable store's refresh after a put). ``whole_to``: the end of
        what this process's own writer wrote (``CommitLog.vouch_whole``): a SEND it acknowledges
        after this call is dispatched even when its last byte is 0.
        """
        with self._lock:
            self.commitlog.refresh(tail=tail)
            if whole_to is not None:
                self.commitlog.vouch_whole(whole_to)
            return self._dispatch_new(max_records, tail, None)

    def refresh_written(
        self,
        first: int,
        end: int,
        records: int,
        last: tuple[int, int],
        written: bytes,
        writer_file: tuple[int, int] | None = None,
    ) -> bool:
        """``refresh(tail=True)`` after this process's writer appended ``records`` whole records at
        ``[first, end)`` (``last``: the last one's offset and size; ``written``: their bytes as
        written): the CommitLog takes them without walking them (``CommitLog.refresh_written``) and
        the dispatchers get them as one run over ``written`` (``Reput.dispatch_written``), the same
        entries and keys the walk would give. False, with nothing done, when the CommitLog cannot
        take them so (the caller refreshes as usual); a dispatch the shortcut cannot make is the
        usual pass. ``writer_file``: the writer's open file (``CommitLog.refresh_written``)."""
        with self._lock:
            if self._reput is None or not self.commitlog.refresh_written(
                first, end, last, written, writer_file
            ):
                return False
            self._dispatch_new(None, True, (first, end, records, written))
            return True

    def _dispatch_new(
        self, max_records: int | None, tail: bool, written: tuple[int, int, int, bytes] | None
    ) -> bool:
        """``refresh``'s part after the CommitLog's: the index audited, the reput's pass (or the
        just-written run, ``written``: first, end, records, their bytes), the queues refreshed."""
        if self._reput is not None:
            if self._builder is not None:
                # A put's audit (``tail``) only warns (a file deleted, replaced, cut or zeroed under
                # the builder), and the builder's own ``intact`` check still guards every write
                # through the map: under a server's loop (``once_per_turn``), once a turn and at most
                # every ``AUDIT_EVERY`` says as much as once a put.
                if not tail or self.once_per_turn is None:
                    self.index.audit(tail=tail)
                else:
                    now = time.monotonic()
                    if now - self._audited_at >= AUDIT_EVERY and self._first_this_turn("audit"):
                        self._audited_at = now
                        self.index.audit(tail=True)
            else:
                self.index.refresh()
            try:
                read = None if written is None else self._reput.dispatch_written(*written)
                # The walk reads the CommitLog through its maps (a fault maps a whole folio): its
                # records are looked at as often as served ones, the written run's more rarely.
                every = RSS_CHECK_EVERY_DISPATCHED
                if read is None:
                    read = self._reput.run_once(max_records)
                    every = RSS_CHECK_EVERY_RECORDS
            except DispatchWriteError as exc:
                # The entries written before the failure are served; the failed one is retried
                # by the next pass (the builders' resume points stay at its record).
                self.dispatch_error = str(exc)
                if self._cq_builder is not None:
                    self._cq_builder.take_changed()
                self.queues.refresh()
                raise
            self.dispatch_error = None
            if self._cq_builder is not None and read == 0:
                # caught up: sync and record logicsMsgTimestamp (now, or by the caller's thread)
                if self.defer_flush:
                    self.flush_due = True
                else:
                    self._cq_builder.flush()
            if tail and self._cq_builder is not None:
                # A put's refresh: only the queues this builder wrote changed (the server's
                # periodic refresh, not ``tail``, still looks at every opened queue).
                self.queues.refresh_some(self._cq_builder.take_changed())
            else:
                if self._cq_builder is not None:
                    self._cq_builder.take_changed()
                self.queues.refresh()
            # The index pages the builder wrote stay mapped: bound them even when no query comes,
            # looked at every ``every`` records dispatched, not after every put's settle: a
            # ``pread`` of /proc a SEND (or a batch) otherwise.
            self._dispatched_since_check += read
            if self._dispatched_since_check >= every and (not tail or self._first_this_turn("resident")):
                self._dispatched_since_check = 0
                if self._resident_over_limit():
                    self._release_pages()
            more = self._repair(max_records, tail)
            return (max_records is not None and read >= max_records) or more
        self.queues.refresh()
        self.index.refresh()
        return self._repair(max_records, tail)

    def _first_this_turn(self, work: str) -> bool:
        """Whether a put's settle does ``work`` now: always without ``once_per_turn``, else the
        first time this turn (the first such work of a turn asks the hook for ``next_turn``)."""
        hook = self.once_per_turn
        if hook is None:
            return True
        spent = self._turn_spent
        if work in spent:
            return False
        if not spent:
            hook()
        spent.add(work)
        return True

    def next_turn(self) -> None:
        """A new turn of the caller's loop: the once-a-turn work of a put's settle is due again."""
        self._turn_spent.clear()

    def _repair(self, max_records: int | None, tail: bool) -> bool:
        """Advance the rebuilds of files that failed their checks (``store.file_repairs``); not in
        the refresh after a put (``tail``), which must cost the same whatever is under way."""
        if tail:
            return False
        return self.repairs.run(max_records)

    def file_checks(self) -> dict[str, tuple[int, int]]:
        """kind ("index", "consume_queue") -> (files that failed their checks while served, files
        rebuilt from the CommitLog), for ``/metrics``."""
        return self.repairs.counts()

    def close(self) -> None:
        with self._lock:
            self.repairs.close()
            self.queues.close()
            if self._cq_builder is not None:
                self._cq_builder.close()
            if self._builder is not None:
                self._builder.close()
            else:
                self.index.close()
            if self._own_commitlog:
                self.commitlog.close()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _maintained_by_broker(config: StoreConfig, directory: Path) -> tuple[int, int] | None:
    """(pid, files mapped) of a running broker that maps files under ``directory``, or None."""
    holder = broker_lock_holder(config.store_path_root_dir)
    if holder is None:
        return None
    mapped = index_files_mapped_by(holder, directory)
    return (holder, len(mapped)) if mapped else None


class _CountView(Mapping[str, int]):
    """topic -> one of its queue counts, read through the kept ``TopicQueueNums`` table."""

    __slots__ = ("_counts", "_write")

    def __init__(self, counts: Mapping[str, TopicQueueNums], *, write: bool) -> None:
        self._counts = counts
        self._write = write

    def __getitem__(self, topic: str) -> int:
        nums = self._counts[topic]
        return nums.write if self._write else nums.read

    def get(self, topic: str, default: Any = None) -> Any:  # type: ignore[override]
        nums = self._counts.get(topic)
        if nums is None:
            return default
        return nums.write if self._write else nums.read

    def __contains__(self, topic: object) -> bool:
        return topic in self._counts

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)
