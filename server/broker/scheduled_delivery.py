"""Scheduled delivery's decisions: which delayed messages are due when, how far each level was delivered.

The broker's ``ScheduleMessageService`` over ``SCHEDULE_TOPIC_XXXX``: a record sent with delay
level L is stored in queue L - 1 and falls due at its store timestamp plus the level's delay
(``deliver_timestamp`` over the store's ``messageDelayLevel`` table; a level past the table is
capped). ``DeliverySchedule`` keeps the due times, earliest first (ties by CommitLog offset), and
each level's delivered queue offset, saved to ``config/delayOffset.json`` as the broker keeps it:
after a stop neither a restart here nor a Java broker opening the store delivers a message twice,
and the ones still pending are delivered after.

Deliveries run on the event loop; the file is written off it (a ``ConfigPersister`` the writable
store attaches: one rewrite and fsync per delivery, 0.4-8 ms each on this host, held the loop
26-500 ms for a call's 64 deliveries), and once more at the stop, maybe on another thread. Each
save copies the table under the table's lock and holds a save lock from that copy to the rename,
so a save never sees the table change under it and a later save always writes a later copy: the
file's offsets only go forward. The broker persists the table every ``flushDelayOffsetInterval``
(10 s); a kill -9 here re-delivers at most what was delivered since the last write finished
(milliseconds), at least once as the broker does.

It decides; the writable store acts. Reading a due record and appending its delivery
(``put_message.delivery_record``) and finding the pending records after a restart are
``WritableStore``'s, and the event-loop timer that asks ``next_due`` is the server's
(``server.remoting.write_path``). There is no clock here: the caller passes the time.
"""

from __future__ import annotations

import heapq
import threading
from pathlib import Path

from store.config.delay_offsets import read_delay_offsets, write_delay_offsets
from store.config.persister import ConfigPersister
from store.consumequeue.consume_queue import delay_level_table, deliver_timestamp


class DeliverySchedule:
    """The scheduled records not yet delivered, and each delay level's delivered offset."""

    def __init__(self, delay_offsets_path: Path, message_delay_level: str) -> None:
        self.path = delay_offsets_path
        #: Writes the file off the caller's thread once attached (``ConfigPersister(schedule)``);
        #: None: each delivery saves it itself.
        self.persister: ConfigPersister | None = None
        #: (due time in ms, CommitLog offset, delay level, offset in the level's schedule queue)
        self._due: list[tuple[int, int, int, int]] = []
        self._delivered: dict[int, int] = {}
        #: Held for each change and each copy of ``_delivered`` (short: no I/O under it).
        self._table_lock = threading.Lock()
        #: Held from a save's copy of the table to its rename: saves write their copies in order.
        self._save_lock = threading.Lock()
        #: Whether ``_delivered`` holds what the file said: until ``load`` it holds nothing, and saving
        #: that would tell the next open that no scheduled message was ever delivered.
        self._loaded = False
        self._delays, self._max_level = delay_level_table(message_delay_level)

    @property
    def max_delay_level(self) -> int:
        """The highest delay level of the ``messageDelayLevel`` table."""
        return self._max_level

    @property
    def delays(self) -> dict[int, int]:
        """level -> its delay in ms (the ``messageDelayLevel`` table; a copy)."""
        return dict(self._delays)

    def load(self) -> None:
        """Read the delivered offsets this store (or a broker on it) saved."""
        delivered = read_delay_offsets(self.path)
        with self._table_lock:
            self._delivered = delivered
        self._loaded = True

    def first_pending(self, level: int, queue_min_offset: int) -> int:
        """The first offset of ``level``'s schedule queue not delivered yet."""
        with self._table_lock:
            return max(self._delivered.get(level, 0), queue_min_offset)

    def schedule(self, level: int, store_timestamp: int, offset: int, queue_offset: int) -> None:
        """A record stored in ``level``'s schedule queue: due at its level's delay after storing."""
        due = deliver_timestamp(level, store_timestamp, self._delays, self._max_level)
        heapq.heappush(self._due, (due, offset, level, queue_offset))

    def next_due(self) -> int | None:
        """When the next scheduled record is due (ms), or None."""
        return self._due[0][0] if self._due else None

    def pop_due(self, now_ms: int) -> tuple[int, int, int] | None:
        """The earliest record due by ``now_ms`` as (CommitLog offset, level, queue offset), or None."""
        if not self._due or self._due[0][0] > now_ms:
            return None
        _, offset, level, queue_offset = heapq.heappop(self._due)
        return offset, level, queue_offset

    def delivered(self, level: int, queue_offset: int) -> None:
        """The record at ``queue_offset`` of ``level`` was dealt with: the level's offset moves past it,
        saved by the persister soon (or here, without one)."""
        with self._table_lock:
            self._delivered[level] = max(self._delivered.get(level, 0), queue_offset + 1)
        if self.persister is not None:
            self.persister.request()
        else:
            self.save()

    def delivered_offsets(self) -> dict[int, int]:
        """level -> the first offset of its schedule queue not delivered (a copy)."""
        with self._table_lock:
            return dict(self._delivered)

    def save(self) -> None:
        """Save the delivered offsets when there are any, or a file to keep in step; from any thread.

        Nothing is saved unless they were loaded: a store whose open failed before ``load`` (a
        corrupt topic table) closes through here too, and must leave the file as it found it.
        """
        if not self._loaded:
            return
        with self._save_lock:
            offsets = self.delivered_offsets()
            if offsets or self.path.exists():
                write_delay_offsets(self.path, offsets)
