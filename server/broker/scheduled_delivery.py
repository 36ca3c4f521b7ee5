"""Scheduled delivery's decisions: which delayed messages are due when, how far each level was delivered.

The broker's ``ScheduleMessageService`` over ``SCHEDULE_TOPIC_XXXX``: a record sent with delay
level L is stored in queue L - 1 and falls due at its store timestamp plus the level's delay
(``deliver_timestamp`` over the store's ``messageDelayLevel`` table; a level past the table is
capped). ``DeliverySchedule`` keeps the due times, earliest first (ties by CommitLog offset), and
each level's delivered queue offset, saved to ``config/delayOffset.json`` after every delivery as
the broker keeps it: neither a restart here nor a Java broker opening the store delivers a message
twice, and the ones still pending are delivered after.

It decides; the writable store acts. Reading a due record and appending its delivery
(``put_message.delivery_record``) and finding the pending records after a restart are
``WritableStore``'s, and the event-loop timer that asks ``next_due`` is the server's
(``server.remoting.write_path``). There is no clock here: the caller passes the time.
"""

from __future__ import annotations

import heapq
from pathlib import Path

from store.config.delay_offsets import read_delay_offsets, write_delay_offsets
from store.consumequeue.consume_queue import delay_level_table, deliver_timestamp


class DeliverySchedule:
    """The scheduled records not yet delivered, and each delay level's delivered offset."""

    def __init__(self, delay_offsets_path: Path, message_delay_level: str) -> None:
        self._path = delay_offsets_path
        #: (due time in ms, CommitLog offset, delay level, offset in the level's schedule queue)
        self._due: list[tuple[int, int, int, int]] = []
        self._delivered: dict[int, int] = {}
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
        self._delivered = read_delay_offsets(self._path)
        self._loaded = True

    def first_pending(self, level: int, queue_min_offset: int) -> int:
        """The first offset of ``level``'s schedule queue not delivered yet."""
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
        """The record at ``queue_offset`` of ``level`` was dealt with: save the level's offset past it."""
        self._delivered[level] = max(self._delivered.get(level, 0), queue_offset + 1)
        write_delay_offsets(self._path, self._delivered)

    def save(self) -> None:
        """Save the delivered offsets (at close) when there are any, or a file to keep in step.

        Nothing is saved unless they were loaded: a store whose open failed before ``load`` (a
        corrupt topic table) closes through here too, and must leave the file as it found it.
        """
        if not self._loaded:
            return
        if self._delivered or self._path.exists():
            write_delay_offsets(self._path, self._delivered)
