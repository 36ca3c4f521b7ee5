"""The timer wheel's decisions: which timer messages are due when, and which were delivered.

The 5.x broker's ``TimerMessageStore`` reads ``rmq_sys_wheel_timer`` queue 0 into its wheel and
hands each slot out when the clock has passed it. Here the wheel is a heap in memory, one entry per
pending timer message (its due time, queue offset and CommitLog offset: a timer days ahead costs
that entry and nothing else), rebuilt at start from the timer queue beyond the delivery log's
watermark (``store.timer.delivery_log``: the layout, and why a kill -9 at any point neither loses
nor repeats a delivery). What was delivered is the log's: an intent is written before each
delivery's re-put, and a timer counts as delivered in memory once its re-put returned (at start,
once its intent is found carried out in the CommitLog). The watermark follows the lowest queue
offset not yet settled, so the timers above it that were delivered out of order are the only ones
remembered one by one.

It decides; the writable store acts (``WritableStore``: reading the timer records, the re-put, the
restart's check of each intent). There is no clock here: the caller passes the time.
"""

from __future__ import annotations

import heapq
from pathlib import Path

from server.broker.timer_messages import due_ms
from store.timer.delivery_log import TimerDeliveryLog


class TimerSchedule:
    """The pending timer messages, earliest due first, over the delivery log."""

    def __init__(self, log_path: Path, precision_ms: int) -> None:
        self._log = TimerDeliveryLog(log_path)
        self.precision_ms = precision_ms
        #: (due time in ms, timer queue offset, CommitLog offset of the timer record)
        self._due: list[tuple[int, int, int]] = []
        #: Queue offsets at or above the watermark already settled (delivered or skipped).
        self._settled: set[int] = set()
        self._opened = False

    def open(self) -> list[tuple[int, int]]:
        """Read the delivery log; its intents (timer queue offset, CommitLog offset) at or above
        the watermark, for the caller to check which were carried out (``settle``)."""
        self._log.open()
        self._opened = True
        return list(self._log.intents)

    @property
    def watermark(self) -> int:
        """Every timer below this queue offset is settled."""
        return self._log.watermark

    def skip_to(self, queue_offset: int) -> None:
        """Timers below ``queue_offset`` are gone from the queue (trimmed with their CommitLog
        files): nothing below it is pending."""
        if queue_offset > self._log.watermark:
            self._settled = {q for q in self._settled if q >= queue_offset}
            self._advance(queue_offset)

    def schedule(self, queue_offset: int, commit_offset: int, out_ms: int) -> None:
        """Timer ``queue_offset`` (its record at ``commit_offset``), stored for slot ``out_ms``."""
        if queue_offset < self._log.watermark or queue_offset in self._settled:
            return
        heapq.heappush(self._due, (due_ms(out_ms, self.precision_ms), queue_offset, commit_offset))

    def retry(self, queue_offset: int, commit_offset: int, at_ms: int) -> None:
        """A delivery that could not be written now (a full disk): due again at ``at_ms``."""
        heapq.heappush(self._due, (at_ms, queue_offset, commit_offset))

    def next_due(self) -> int | None:
        """When the next timer is due (ms), or None."""
        return self._due[0][0] if self._due else None

    def pop_due(self, now_ms: int) -> tuple[int, int] | None:
        """The earliest timer due by ``now_ms`` as (queue offset, CommitLog offset), or None."""
        if not self._due or self._due[0][0] > now_ms:
            return None
        _, queue_offset, commit_offset = heapq.heappop(self._due)
        return queue_offset, commit_offset

    def pending(self) -> int:
        """How many timers wait in the wheel."""
        return len(self._due)

    def intend(self, queue_offset: int, commit_offset: int) -> None:
        """Timer ``queue_offset``'s delivery is about to be written at ``commit_offset``."""
        self._log.intend(queue_offset, commit_offset)

    def settle(self, queue_offset: int) -> None:
        """Timer ``queue_offset`` is done with (delivered, or a record the wheel skips)."""
        watermark = self._log.watermark
        if queue_offset < watermark:
            return
        self._settled.add(queue_offset)
        if queue_offset == watermark:
            while watermark in self._settled:
                self._settled.discard(watermark)
                watermark += 1
            self._advance(watermark)

    def _advance(self, watermark: int) -> None:
        self._log.advance(watermark)

    def close(self) -> None:
        if self._opened:
            self._log.close()
