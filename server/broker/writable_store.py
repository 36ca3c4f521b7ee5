"""The write path's store: one writer, the topic table, dispatch to the index, scheduled deliveries.

``serve --writable`` and the test kit put records through here. After every put the new records
are dispatched at once, as the broker's reput does: the IndexFiles get their keys (the same index
builder that ``rebuild-index`` uses, so the bytes are the broker's) and the query side's CommitLog
view is refreshed, so a message is queryable by key, unique key and offset id as soon as its SEND is
answered. A put is ``append`` then ``settle``; the compiled request path appends the SENDs of one
read one by one and settles them once.

Records sent with a delay level go to ``SCHEDULE_TOPIC_XXXX`` and are delivered into their real
topic when due by ``deliver_due`` (the caller's timer drives it); when each is due and how far each
level was delivered (``config/delayOffset.json``) is ``scheduled_delivery.DeliverySchedule``'s.
5.x timer messages go to ``rmq_sys_wheel_timer`` queue 0 and are delivered the same way when their
slot has passed (``timer_schedule.TimerSchedule``; what was delivered is ``timer/deliveries``, whose
intents are checked against the CommitLog at open: ``_rearm_timers``).

One process writes: the writer holds the store's ``lock`` file for as long as this store is open.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import NamedTuple

from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from protocol.message_properties import string_to_properties
from server.broker.creation_limits import CreationBudget
from server.broker.put_message import (
    PROPERTY_DELAY,
    SCHEDULE_TOPIC,
    PutRefused,
    StoreUnavailable,
    delivery_record,
    disk_full,
    message_illegal,
)
from server.broker.scheduled_delivery import DeliverySchedule
from server.broker.timer_messages import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    TIMER_TOPIC,
    TimerSettings,
    is_delivery_of,
    stored_wheel_time,
)
from server.broker.timer_messages import delivery_record as timer_delivery_record
from server.broker.timer_schedule import TimerSchedule
from store.checkpoint import Checkpoint
from store.config.persister import ConfigPersister
from store.config.store_config import StoreConfig
from store.config.topics import TopicConfig, TopicPersister, TopicTable, startup_topics
from store.consumequeue.consume_queue import ConsumeQueue
from store.errors import DispatchWriteError, StoreError
from store.message_store import MessageStore
from store.write.disk_space import DiskSpaceCheck
from store.write.writer import (
    Appended,
    CommitLogCutError,
    CommitLogFullError,
    RecordTooLargeError,
    StoreRecord,
    StoreWriter,
)

log = logging.getLogger(__name__)


class _Encoded(NamedTuple):
    """Records an ``append_encoded`` wrote: where the first went, how many, the last's (offset,
    size), and the (topic, queue id) of each."""

    first: int
    count: int
    last: tuple[int, int]
    queues: list[tuple[str, int]]


class _Unsettled(NamedTuple):
    """One ``append`` not yet settled: its records, where they went, the bytes written for them (or,
    for an ``append_encoded``, no records and what it wrote in ``encoded``)."""

    records: list[StoreRecord]
    appended: list[Appended]
    written: bytes
    encoded: _Encoded | None = None


#: A record's queue, (topic, queue id).
_PLACE = operator.attrgetter("topic", "queue_id")
#: The topics whose records a settle hands to the delivery schedules (and whose SENDs arm the
#: server's delivery timer: ``SendMessageProcessor._scheduled``).
DELAYED_TOPICS = frozenset((SCHEDULE_TOPIC, TIMER_TOPIC))

#: Deliveries (scheduled and timer messages) one ``deliver_due`` call makes at most.
DELIVERIES_PER_CALL = 64


class WritableStore:
    """A store opened for writing and querying at once."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], int] | None = None,
        store_host: str | None = None,
        store_port: int | None = None,
        auto_create_topics: bool | None = None,
        disk_check: DiskSpaceCheck | None = None,
    ) -> None:
        self.config = config
        #: The broker's periodic disk check of the CommitLog (``DiskSpaceCheck``): puts are refused
        #: while its disk is fuller than ``diskSpaceWarningLevelRatio``.
        self.disk = disk_check or DiskSpaceCheck(config.store_path_commit_log)
        #: Why the last dispatch could not write a consume queue or index entry (a full disk), None
        #: while every stored record has its entries: puts are refused until a dispatch succeeds.
        self.dispatch_failed: str | None = None
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._schedule = DeliverySchedule(
            config.store_path_root_dir / "config" / "delayOffset.json", config.message_delay_level
        )
        self.timer_settings = TimerSettings.of(config)
        self._timers = TimerSchedule(
            config.store_path_root_dir / "timer" / "deliveries", config.timer_precision_ms
        )
        self.closed = False
        self._persister: TopicPersister | None = None
        self._delay_persister: ConfigPersister | None = None
        #: What clients may create by themselves (``creation_limits.CreationBudget``, set by the
        #: ``BrokerController`` over this store); None: no limit.
        self.topic_budget: CreationBudget | None = None
        #: Called with (topic, queue id) of each queue a put added to, once it is readable (the
        #: broker's ``NotifyMessageArrivingListener``: held pulls on that queue answer at once).
        self.arrived: Callable[[str, int], None] | None = None
        #: Topics deleted since the store opened (DELETE_TOPIC_IN_BROKER): no longer routed even
        #: though their consume queues stay, until created again.
        self.deleted_topics: set[str] = set()
        #: Why this store stopped taking records (a CommitLog cut under it), None while it takes them.
        self.not_writable: str | None = None
        #: What ``append`` took since the last ``settle``: (records, where they went, the bytes the
        #: writer wrote for them) per append.
        self._unsettled: list[_Unsettled] = []
        self.auto_create_topics = (
            config.auto_create_topic_enable if auto_create_topics is None else auto_create_topics
        )
        config.store_path_root_dir.mkdir(parents=True, exist_ok=True)
        if not config.checkpoint_path.exists():
            Checkpoint().write(config.checkpoint_path)
        # The writer takes the store's lock first (a store a broker or another writer holds is
        # refused before anything is read or written); the store is marked in use only after the
        # query side has opened, whose index builder must see only a marker a crashed writer left.
        self.writer = StoreWriter(
            config,
            store_host=store_host,
            store_port=store_port,
            clock=self._clock,
            index=False,
            mark_in_use=False,
            scan_queues=False,
        )
        try:
            # The query side dispatches every append to the ConsumeQueues and, unless broker.conf
            # says messageIndexEnable=false, to the IndexFiles: the broker's CommitLogDispatcherBuildIndex
            # skips a store that does not index (its key queries then find nothing new).
            # It shares the writer's CommitLog view: the end of the log is found once, not twice.
            self.reader = MessageStore.open(
                config,
                build_index=True,
                index_keys=config.message_index_enable,
                commitlog=self.writer.commitlog,
            )
            # The next queue offsets come from the consume queues the reader just brought up to date,
            # as the broker's recoverTopicQueueTable takes them: the CommitLog is not read for them.
            if self.reader.dispatch_error is not None:
                self._dispatch_failed(self.reader.dispatch_error)
            ends = self.reader.queue_ends()
            if ends is None:
                self.writer.resume_queues({}, self.reader.commitlog.min_offset)
            else:
                self.writer.resume_queues(*ends)
        except BaseException:
            self.writer.close()
            raise
        self.writer.mark_in_use()
        try:
            self.topics = TopicTable.load(config.store_path_root_dir / "config" / "topics.json")
            listed = self.topics.path.exists()
            # The read side's topic counts follow this table from now on (each change in O(1)),
            # instead of re-reading the file this store rewrites.
            self.reader.listed_topics_only = True
            counts = self.reader.queues.counts
            counts.follow_table(self.topics.queue_counts())
            self.topics.listener = counts.table_changed
            # One table: the writer adds a topic as its first record is written, as the broker
            # creates it at send time, and the send path's creations go to the same object.
            self.writer.use_topic_table(self.topics)
            self._schedule.load()
            self._rearm_scheduled()
            self._rearm_timers()
        except BaseException:
            self.close()
            raise
        try:
            if not self.topics.topics:
                self.topics.seed(
                    startup_topics(
                        config.broker_cluster_name, config.broker_name, auto_create=self.auto_create_topics
                    ),
                    self._clock(),
                )
                self.topics.save()
            elif self.topics.replayed:
                # changes a stop left only in the journal (a kill -9 before the whole write): into
                # topics.json itself now, so a broker started on this directory next finds them
                log.info("config/topics.json: %d change(s) replayed from its journal", self.topics.replayed)
                self.topics.save()
            # Topics whose creation a kill -9 kept out of topics.json (it is saved off the event
            # loop) have records: put them back, as they were created at send time.
            missing = self.writer.register_missing_topics(self._clock())
        except BaseException:
            self.close()
            raise
        if missing:
            log.log(
                logging.WARNING if listed else logging.INFO,
                "config/topics.json lacked %d topic(s) with records (created after its last save, then "
                "the process was killed, or never listed): added from the consume queues and the "
                "CommitLog: %s",
                len(missing),
                ", ".join(missing[:20]) + (", ..." if len(missing) > 20 else ""),
            )
        # From here on topic creations are written off the caller's thread (the event loop), batched;
        # so are the delivered delay offsets.
        self._persister = TopicPersister(self.topics)
        self._delay_persister = ConfigPersister(self._schedule)

    # -- topics --------------------------------------------------------------------------------------

    def topic_config(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def create_topic(self, topic: str, queue_nums: int = 4, perm: int = 6) -> TopicConfig:
        """Create (or replace) a topic, as ``mqadmin updateTopic`` would; saved at once."""
        config = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.topics.put(config, self._clock())
        self.topics.save()
        return config

    def delete_topic(self, topic: str) -> TopicConfig | None:
        """``AdminBrokerProcessor.deleteTopic``: the topic leaves the table (saved soon, off the
        caller's thread; ``topic_changes``/``topics_saved`` say when) and its consume queues are
        destroyed (``cleanUnusedTopic``: directories removed, queue offsets start again from 0);
        the removed config, or None when the table had none (its queues, if any, still go).

        Its records stay in the CommitLog, as in the broker; where dispatch stood is kept
        (``ConsumeQueueBuilder.forget_topic``) so a restart does not dispatch them again and list the
        topic anew. The caller's thread owns the store (one event loop writes): no put is between its
        append and its settle here, so every record of the topic written before has its entries, and
        a record of the topic written after starts its queues afresh.
        """
        now = self._clock()
        old = self.topics.remove(topic, now)
        queues = self.writer.forget_topic(topic)
        if old is not None:
            queues = max(queues, old.read_queue_nums, old.write_queue_nums)
            self.deleted_topics.add(topic)
            self.topics.save_soon()
        self.reader.forget_topic(topic, queues)
        return old

    def topic_saves_held(self) -> contextlib.AbstractContextManager[None]:
        """While held, the topic table's changes wait and go out in one write (``ConfigPersister.held``)."""
        persister = self._persister
        return persister.held() if persister is not None else contextlib.nullcontext()

    def topic_changes(self) -> int:
        """How many changes of the topic table were handed to its persister so far."""
        persister = self._persister
        return persister.requested if persister is not None else 0

    def topics_saved(self, change: int) -> Future[None]:
        """Done once topic-table change ``change`` is in ``config/topics.json`` (``topic_changes``)."""
        persister = self._persister
        if persister is None:
            done: Future[None] = Future()
            done.set_result(None)
            return done
        return persister.saved(change)

    def create_topic_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int
    ) -> TopicConfig | None:
        """A SEND to an unknown topic: create it from ``default_topic`` if that is allowed, and within
        the broker-wide topic limit (``topic_budget``: None when there is none); None otherwise, which
        the SEND answers TOPIC_NOT_EXIST as for a topic TBW102 may not create."""
        budget = self.topic_budget
        if budget is not None and not budget.allow("topic", topic, None, len(self.topics.topics)):
            return None
        return self.topics.create_in_send(
            topic, default_topic, client_queue_nums, self._clock(), auto_create=self.auto_create_topics
        )

    @property
    def max_delay_level(self) -> int:
        """The highest delay level of the store's ``messageDelayLevel`` table."""
        return self._schedule.max_delay_level

    @property
    def delay_levels(self) -> dict[int, int]:
        """level -> delay in ms of the store's ``messageDelayLevel`` table (a gRPC delivery time is
        turned into the level whose delay first exceeds it, as the Proxy's ``computeDelayLevel``)."""
        return self._schedule.delays

    def now_ms(self) -> int:
        """The store's clock (ms): what a timer message's delay counts from."""
        return self._clock()

    def set_store_address(self, host: str, port: int) -> None:
        """The store host written into new records (the broker's ``brokerIP1:listenPort``)."""
        self.writer.store_host = host
        self.writer.store_port = port

    # -- writing -------------------------------------------------------------------------------------

    def put(self, records: list[StoreRecord], *, store_timestamp: int | None = None) -> list[Appended]:
        """Append records (one store timestamp, consecutive offsets) and dispatch them at once.

        Records no CommitLog file can hold (a store whose files are smaller than its message limit)
        are refused with ``PutRefused``: MESSAGE_ILLEGAL and ``handlePutMessageResult``'s remark, the
        broker's status for a message it cannot store as sent; nothing is written. A full disk is
        ``StoreUnavailable`` (SERVICE_NOT_AVAILABLE), nothing written either.

        A CommitLog cut under the store (``CommitLogCutError``, or records the reput cannot reach after
        the append) makes it stop taking records until it is reopened: ``StoreUnavailable`` for this
        put and every later one, as the broker's ``checkStoreStatus`` refuses every put once its
        dispatch failed (``ConsumeQueue.putMessagePositionInfoWrapper`` -> ``makeLogicsQueueError``).
        Records past a cut could never be served, and the next start's recovery truncates them.

        Two more refusals, both ``StoreUnavailable`` with nothing written: while the CommitLog's disk
        is fuller than ``diskSpaceWarningLevelRatio`` (``DiskSpaceCheck``, measured every 10 s), and
        after a consume queue or index entry could not be written (a full disk between the CommitLog
        append and the reput). That put's records are stored and acknowledged; their entries are
        written from the CommitLog by the first dispatch that succeeds (tried again by every put, by
        the server's refresh, and by the next start), and puts are taken again from then on.
        """
        appended = self.append(records, store_timestamp=store_timestamp)
        self.settle()
        return appended

    def append(self, records: list[StoreRecord], *, store_timestamp: int | None = None) -> list[Appended]:
        """``put``'s first half: the refusals before the append, and the append. The records are
        acknowledged only once ``settle`` returns.

        A caller with several puts at hand (the SENDs of one received read, on the compiled request
        path) appends each and settles them once: the reput, the CommitLog refresh and the index
        audit then run once for all of them, and each record keeps its own store timestamp and
        refusals, as separate puts give them. Nothing else should put in between: the caller settles
        before it yields (one event loop writes); a ``put`` of someone else would settle these too.
        """
        if self.not_writable is not None:
            raise self._unavailable()
        if self.dispatch_failed is not None:
            self._repair_dispatch()
        if self.disk.full():
            raise self._unavailable()
        try:
            appended = self.writer.put_batch(records, store_timestamp=store_timestamp)
        except CommitLogCutError as exc:
            self._stop_writing(str(exc))
            raise self._unavailable() from exc
        except RecordTooLargeError:
            raise message_illegal(self.config.max_message_size) from None
        except CommitLogFullError as exc:
            # Nothing was stored and the CommitLog ends at its last whole record (the writer undid
            # the part the kernel took): the broker's answer when its disk is full. The next append
            # goes where this one would have, once space returns.
            raise self._unavailable() from exc
        self._unsettled.append(_Unsettled(records, appended, self.writer.last_written))
        return appended

    def begin_encoded(
        self,
    ) -> tuple[dict[tuple[str, int], int], dict[str, int], int, int, int, bytes, int, set[str]] | None:
        """``append``'s refusals before an append, for a caller that encodes the records itself
        (the compiled request path's plain SENDs): the writer's ``encoded_state``, or None when
        this store would refuse a put now (cut, a failed dispatch, a full disk, a torn write not
        yet undone), which the caller leaves to ``append`` to answer."""
        if self.not_writable is not None or self.dispatch_failed is not None or self.disk.full():
            return None
        try:
            return self.writer.encoded_state()
        except (StoreError, OSError):
            return None

    def append_encoded(
        self,
        data: bytes,
        position: int,
        now: int,
        count: int,
        last: tuple[int, int],
        keys: list[tuple[str, int]],
    ) -> None:
        """``append`` for ``count`` records encoded from ``begin_encoded``'s state (each of ``keys``
        took its queue offset): written with one ``pwrite`` and acknowledged once ``settle``
        returns, as ``append``'s are. Refused as ``append`` refuses a failed write (nothing stored,
        the queue offsets given back): ``StoreUnavailable`` for a full disk or a cut file, an
        ``OSError`` as it is."""
        try:
            self.writer.write_encoded(data, position, now, keys)
        except CommitLogCutError as exc:
            self._stop_writing(str(exc))
            raise self._unavailable() from exc
        except CommitLogFullError as exc:
            raise self._unavailable() from exc
        self._unsettled.append(_Unsettled([], [], data, _Encoded(position, count, last, keys)))

    def settle(self) -> list[StoreRecord]:
        """``put``'s second half, for every record ``append`` took since the last call: dispatch
        them, check the CommitLog reads to their end, wake the pulls held on their queues and
        schedule the delayed ones. The records settled, or ``StoreUnavailable`` when none of them
        may be acknowledged (a file was cut under the writer); an error of the dispatch itself other
        than ``DispatchWriteError`` is raised as it is, and none of them is acknowledged either."""
        unsettled, self._unsettled = self._unsettled, []
        if not unsettled:
            if self.not_writable is not None:
                raise self._unavailable()  # whoever settled them found the log cut
            return []
        try:
            self.dispatch(unsettled)
        except DispatchWriteError as exc:
            # The records are in the CommitLog, so they are acknowledged (the broker answers after
            # its CommitLog put; its reput writes the queues later). Their entries are written from
            # the CommitLog by the next dispatch that succeeds; until then no more records are taken.
            self._dispatch_failed(str(exc))
        readable_end = self.reader.commitlog.max_offset
        if readable_end < self.writer.position:
            # Written, but not where a walk of the CommitLog reaches (the file was cut between the
            # writer's check and its write): never acknowledged, and never dispatched either.
            self._stop_writing(
                f"the CommitLog reads to offset {readable_end} only, below the {self.writer.position} "
                "just written (a file was cut under the writer): those records cannot be dispatched"
            )
            raise self._unavailable()
        # The queues they went to, found at C speed (a batch of 32 is one queue): the pulls held
        # there are woken, and only a record of the schedule or timer topic is looked at again.
        # Plain SENDs the compiled path encoded (``append_encoded``) carry no records, only their
        # queues, and are never to the schedule or timer topic (``_request_path_plain.h``).
        settled: list[StoreRecord]
        if len(unsettled) == 1 and unsettled[0].encoded is not None:
            # one read's plain SENDs (a lone SEND: one queue), without a set or a walk of records;
            # a batch lists its one queue's key once per record, the same tuple object each time
            # (``plain_take_offsets``): ``count`` finds that by identity, where ``set`` hashed the
            # tuple 32 times (~7k instructions a batch, h50)
            settled = []
            queues = unsettled[0].encoded.queues
            one_queue = not queues or queues.count(queues[0]) == len(queues)
            places: Iterable[tuple[str, int]] = queues[:1] if one_queue else set(queues)
        else:
            settled = (
                unsettled[0].records if len(unsettled) == 1 else [r for one in unsettled for r in one.records]
            )
            found = set(map(_PLACE, settled))
            for one in unsettled:
                if one.encoded is not None:
                    found.update(one.encoded.queues)
            places = found
        arrived = self.arrived
        if arrived is not None:
            for topic, queue_id in places:
                arrived(topic, queue_id)
        if settled and any(topic in DELAYED_TOPICS for topic, _ in places):
            for records, appended, _, _ in unsettled:
                for rec, done in zip(records, appended, strict=True):
                    if rec.topic == SCHEDULE_TOPIC:
                        self._schedule.schedule(
                            rec.queue_id + 1, done.store_timestamp, done.offset, done.queue_offset
                        )
                    elif rec.topic == TIMER_TOPIC and rec.queue_id == 0:
                        self._timer_stored(rec, done)
        return settled

    def _timer_stored(self, rec: StoreRecord, done: Appended) -> None:
        """A record settled in the timer queue: into the wheel, or settled at once when it has no
        wheel time (a client's own record in the timer topic, which the broker's wheel skips too)."""
        raw = rec.properties
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
        props = string_to_properties(text)
        out = stored_wheel_time(props)
        if out is None or PROPERTY_REAL_TOPIC not in props:
            self._timers.settle(done.queue_offset)
        else:
            self._timers.schedule(done.queue_offset, done.offset, out)

    def _dispatch_failed(self, why: str) -> None:
        """A consume queue or index entry could not be written: refuse puts until it is (said once)."""
        if self.dispatch_failed is None:
            log.error(
                "the store stops taking messages until the consume queues and index have every stored "
                "record again: %s; every SEND is answered SERVICE_NOT_AVAILABLE meanwhile",
                why,
            )
        self.dispatch_failed = why

    def _repair_dispatch(self) -> None:
        """Write the entries a failed dispatch left out, from the CommitLog; ``StoreUnavailable`` if
        the disk still refuses them.

        The broker keeps its logic-queue error bit until a restart and skips the record it could not
        dispatch; here the failed record stays the builders' next one, so once a pass writes it (and
        everything after it) nothing is missing and nothing shifted, and puts are taken again."""
        try:
            self.dispatch()
        except DispatchWriteError as exc:
            self.dispatch_failed = str(exc)
            raise self._unavailable() from exc
        log.warning(
            "the consume queues and index have every stored record again (written from the CommitLog): "
            "taking messages again"
        )
        self.dispatch_failed = None

    def _stop_writing(self, why: str) -> None:
        """Take no more records until reopened; said once, at ERROR (nothing is dispatched any more)."""
        if self.not_writable is None:
            self.not_writable = why
            log.error(
                "the store stops taking messages: %s; every SEND is answered SERVICE_NOT_AVAILABLE "
                "until the server is restarted on it (its recovery truncates the CommitLog at the "
                "last whole record and trims the queues and index past it)",
                why,
            )

    def _unavailable(self) -> StoreUnavailable:
        """The broker's answer to a put its store cannot take (``SERVICE_NOT_AVAILABLE`` with the disk
        ratios): a full disk, or a store that stopped taking records."""
        config = self.config
        ratio = self.disk.used_ratio
        return disk_full(
            ratio(config.store_path_commit_log),
            ratio(config.consume_queue_dir),
            ratio(config.index_dir),
        )

    def _rearm_scheduled(self) -> None:
        """Scheduled records not yet delivered (by ``delayOffset.json``) are due again after a restart.

        As the broker's ``ScheduleMessageService`` finds them: each level's queue of
        ``SCHEDULE_TOPIC_XXXX`` read from its delay offset on (entries, not the whole CommitLog).
        """
        queues = self.reader.queues
        for queue_id in queues.directory_queue_ids().get(SCHEDULE_TOPIC, []):
            level = queue_id + 1
            queue = queues.get(SCHEDULE_TOPIC, queue_id)
            start = self._schedule.first_pending(level, queue.min_offset)
            for queue_offset in range(start, queue.max_offset):
                entry = queue.entry(queue_offset)
                if entry is None:
                    continue
                buf = self.reader.commitlog.read_record(entry.commit_log_offset)
                if buf is None:
                    continue  # a blank entry, or its record is gone: nothing to deliver
                msg = decode_message(buf, read_body=False)
                if msg.topic == SCHEDULE_TOPIC and msg.queue_id == queue_id:
                    self._schedule.schedule(
                        level, msg.store_timestamp, entry.commit_log_offset, msg.queue_offset
                    )

    def _rearm_timers(self) -> None:
        """The timer wheel rebuilt: ``rmq_sys_wheel_timer`` queue 0 read from the delivery log's
        watermark, less the timers whose delivery intent the CommitLog shows carried out.

        Each entry's record header is read once (the body only for an intent's check): the cost is
        the pending timers', not the CommitLog's."""
        intents = self._timers.open()
        queues = self.reader.queues
        if 0 not in queues.directory_queue_ids().get(TIMER_TOPIC, []):
            return
        queue = queues.get(TIMER_TOPIC, 0)
        self._timers.skip_to(queue.min_offset)
        start = self._timers.watermark
        carried_out = {
            queue_offset
            for queue_offset, commit_offset in intents
            if queue_offset >= start and self._delivered_at(queue, queue_offset, commit_offset)
        }
        skipped = 0
        for queue_offset in range(start, queue.max_offset):
            if queue_offset in carried_out:
                self._timers.settle(queue_offset)
                continue
            entry = queue.entry(queue_offset)
            buf = None if entry is None else self.reader.commitlog.read_record(entry.commit_log_offset)
            msg = None if buf is None else decode_message(buf, read_body=False)
            out = None if msg is None else stored_wheel_time(msg.properties)
            if entry is None or msg is None or out is None or PROPERTY_REAL_TOPIC not in msg.properties:
                skipped += 1
                self._timers.settle(queue_offset)
                continue
            self._timers.schedule(queue_offset, entry.commit_log_offset, out)
        if skipped:
            log.warning("%d record(s) of %s have no timer to deliver: skipped", skipped, TIMER_TOPIC)
        if carried_out or self._timers.pending():
            log.info(
                "timer wheel: %d pending, %d delivered before the last stop",
                self._timers.pending(),
                len(carried_out),
            )

    def _delivered_at(self, queue: ConsumeQueue, queue_offset: int, commit_offset: int) -> bool:
        """Whether the delivery intent (timer ``queue_offset``, CommitLog ``commit_offset``) was
        carried out: the record there, or at the next file's start when the intent's offset was the
        blank end of a file, is the timer's delivery."""
        entry = queue.entry(queue_offset)
        timer = None if entry is None else self._decoded(entry.commit_log_offset)
        if timer is None:
            return False
        size = self.config.mapped_file_size_commit_log
        places = [commit_offset]
        if commit_offset % size:
            places.append((commit_offset // size + 1) * size)
        for place in places:
            candidate = self._decoded(place)
            if candidate is not None and is_delivery_of(candidate, timer):
                return True
        return False

    def _decoded(self, offset: int) -> MessageExt | None:
        """The record at ``offset`` (body as stored), or None when there is no whole record."""
        buf = self.reader.commitlog.read_record(offset)
        if buf is None:
            return None
        try:
            return decode_message(buf, decompress=False)
        except ProtocolError:
            return None

    def dispatch(self, unsettled: list[_Unsettled] | None = None) -> None:
        """The reput: bring the index and the query side up to the end of the CommitLog (the files
        before the one being written are checked for changes every ``FULL_CHECK_EVERY``, not on
        every put: ``CommitLog.refresh(tail=True)``).

        ``unsettled``: what ``append`` wrote since the last settle. When those records follow each
        other from where the read side's CommitLog ended to the writer's position (no roll-over,
        nothing else written), the read side takes them as they were appended
        (``MessageStore.refresh_written``: no second walk and BODYCRC check of bytes written from
        memory a moment ago; the dispatchers handed them as one run); anything else is the walk."""
        span = None if unsettled is None else _written_span(unsettled, self.writer.position)
        if span is None or not self.reader.refresh_written(*span, self.writer.open_file()):
            # The walk's "may still be arriving" rule (a last record ending in a zero byte waits
            # for its successor) is for another process's writer: ours wrote up to its position
            # and the write returned, so those records are whole and are dispatched before their
            # SENDs are answered.
            self.reader.refresh(tail=True, whole_to=self.writer.position)

    def next_delivery(self) -> int | None:
        """When the next scheduled or timer message is due (ms), or None."""
        due = [t for t in (self._schedule.next_due(), self._timers.next_due()) if t is not None]
        return min(due) if due else None

    def deliver_due(self, now_ms: int | None = None, limit: int = DELIVERIES_PER_CALL) -> list[Appended]:
        """Deliver the scheduled and timer messages due by ``now_ms`` into their real topics, at
        most ``limit`` of them (the caller comes back at once for the rest, after letting others
        run: many messages due together do not hold the event loop)."""
        if self.closed:
            return []
        now = self._clock() if now_ms is None else now_ms
        delivered: list[Appended] = []
        count = 0
        while count < limit and (due := self._schedule.pop_due(now)) is not None:
            count += 1
            offset, level, queue_offset = due
            buf = self.reader.view_message(offset)
            if buf is None:
                raise StoreError(f"scheduled record at {offset} is gone")
            scheduled = decode_message(buf, decompress=False)
            if PROPERTY_DELAY in scheduled.properties:
                delivered += self.put([delivery_record(scheduled)])
            self._schedule.delivered(level, queue_offset)
        while count < limit and (timer := self._timers.pop_due(now)) is not None:
            count += 1
            done = self._deliver_timer(*timer, now)
            if done is None:
                break  # the store takes nothing now: the timer waits for its retry
            delivered += done
        return delivered

    def _deliver_timer(self, queue_offset: int, offset: int, now: int) -> list[Appended] | None:
        """Put timer ``queue_offset`` (its record at ``offset``) into its real topic, its intent
        written first; what was appended, or None when the store refused it for now (retried a
        precision later)."""
        timer = self._decoded(offset)
        if timer is None or PROPERTY_TIMER_DEL_UNIQKEY in timer.properties:
            # gone with its file, or a delete marker (which the broker's wheel never puts either)
            self._timers.settle(queue_offset)
            return []
        try:
            record = timer_delivery_record(timer, timer.store_timestamp, self._clock())
        except StoreError as exc:
            log.warning("timer message at %d not delivered: %s", offset, exc)
            self._timers.settle(queue_offset)
            return []
        self._timers.intend(queue_offset, self.writer.position)
        try:
            appended = self.put([record])
        except (StoreUnavailable, OSError):
            self._timers.retry(queue_offset, offset, now + self.timer_settings.precision_ms)
            return None
        except PutRefused as refused:
            log.warning("timer message at %d not delivered: %s", offset, refused.remark)
            appended = []
        self._timers.settle(queue_offset)
        return appended

    def close(self) -> None:
        """Flush the index, then the writer (checkpoint, topic table, abort marker, lock)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._delay_persister is not None:
                self._delay_persister.close()  # its thread's last save done before the one below
            self._schedule.save()
            self._timers.close()
            self.reader.close()
        finally:
            try:
                self.writer.close()
            finally:
                if self._persister is not None:
                    self._persister.close()  # whatever the thread has not written yet, written now

    def __enter__(self) -> WritableStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _written_span(
    unsettled: list[_Unsettled], position: int
) -> tuple[int, int, int, tuple[int, int], bytes] | None:
    """(first offset, end, records, (offset, size) of the last, their bytes) of the records appended
    since the last settle when they lie back to back and end at the writer's ``position``; None
    otherwise (a roll-over's blank record between them, or none)."""
    if len(unsettled) == 1:  # one append or one read's plain SENDs (a lone SEND): no loop, no join
        _, appended, written, encoded = unsettled[0]
        if encoded is not None:
            first, count, last = encoded.first, encoded.count, encoded.last
        elif appended:
            first, count, last = appended[0].offset, len(appended), (appended[-1].offset, appended[-1].size)
        else:
            return None
        end = last[0] + last[1]
        if end != position or end - first != len(written):
            return None
        return first, end, count, last, written
    first = end = -1
    count = 0
    last = (0, 0)
    for _, appended, written, encoded in unsettled:
        if encoded is not None:
            begin, n, last_one = encoded.first, encoded.count, encoded.last
        elif appended:
            begin, n, last_one = appended[0].offset, len(appended), (appended[-1].offset, appended[-1].size)
        else:
            continue
        if end < 0:
            first = end = begin
        elif begin != end:
            return None
        last = last_one
        end = last[0] + last[1]
        if end - begin != len(written):
            return None
        count += n
    if count == 0 or end != position:
        return None
    if len(unsettled) == 1:
        data = unsettled[0].written
    else:
        data = b"".join(one.written for one in unsettled if one.appended or one.encoded is not None)
    return first, end, count, last, data
