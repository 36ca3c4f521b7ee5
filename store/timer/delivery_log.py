"""``timer/deliveries``: which timer messages were delivered, kept so that none is delivered twice.

A timer message is a record of ``rmq_sys_wheel_timer`` queue 0; its queue offset names it. Timers
fall due in the order of their delivery times, not of their queue offsets, so one "delivered up to"
offset (the delay levels' ``delayOffset.json``) cannot say which are done. This file can:

    offset 0   8 bytes  the watermark W, big-endian: every timer below queue offset W is settled
    offset 8   16 bytes per delivery, appended BEFORE its re-put: the timer's queue offset, then
               the CommitLog offset its delivery is about to be written at (both big-endian int64)

An entry is an intent: the delivery is known done only when the record at that CommitLog offset is
the timer's delivery (or, when the offset was the blank end of a CommitLog file, the first record
of the next file, where the writer put it). So a kill -9 anywhere leaves a decidable state: killed
before the re-put, the record is not there and the timer is delivered after the restart; killed
after it, the record is there and the timer is not delivered again. Entries below the watermark are
dead; when they outnumber the live ones the file is rewritten with the live ones only (through a
temporary file and a rename), so its size follows the timers delivered out of order, not all timers
ever delivered. An 8-byte header write or a 16-byte append is whole or absent after a kill (the page
cache keeps what the process wrote); a torn tail of a power loss (a length not 8 + 16n) is ignored.

The rules that read and write it (when a timer is due, what its delivery is) are
``server.broker.timer_schedule``'s; this module is the bytes.
"""

from __future__ import annotations

import heapq
import os
import struct
from pathlib import Path

from store.errors import StoreError
from store.whole_file import replace_whole

_HEADER = struct.Struct(">q")
_ENTRY = struct.Struct(">qq")

#: Dead entries (below the watermark) tolerated before a rewrite is considered.
COMPACT_AFTER = 1024


class TimerDeliveryLog:
    """The watermark and the delivery intents above it, with the file open for appending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.watermark = 0
        #: (timer queue offset, CommitLog offset of its delivery) of each intent at or above the
        #: watermark: a heap, so that those the watermark passes leave in O(log n) each.
        self.intents: list[tuple[int, int]] = []
        self._dead = 0
        self._fd: int | None = None
        #: Where the next entry is written (``pwrite``: the header is rewritten in place, so the
        #: file is not opened for appending).
        self._end = _HEADER.size

    def open(self) -> None:
        """Read the file (none: nothing delivered yet) and keep it open for writing (a missing one
        is made by the first write: a store that never had a timer has no such file)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        whole = 0
        if len(data) >= _HEADER.size:
            (self.watermark,) = _HEADER.unpack_from(data, 0)
            if self.watermark < 0:
                raise StoreError(f"{self.path}: negative watermark {self.watermark}")
            whole = (len(data) - _HEADER.size) // _ENTRY.size
            for i in range(whole):
                queue_offset, commit_offset = _ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)
                if queue_offset >= self.watermark:
                    heapq.heappush(self.intents, (queue_offset, commit_offset))
                else:
                    self._dead += 1
        if not data:
            return  # nothing delivered yet: the file is made by the first delivery
        if len(data) != _HEADER.size + whole * _ENTRY.size or self._dead:
            self._rewrite()  # a torn tail, or dead entries: written whole once, at start
        self._fd = os.open(self.path, os.O_RDWR)
        self._end = _HEADER.size + len(self.intents) * _ENTRY.size

    def intend(self, queue_offset: int, commit_offset: int) -> None:
        """Say, before writing it, where the delivery of timer ``queue_offset`` goes."""
        fd = self._require()
        os.pwrite(fd, _ENTRY.pack(queue_offset, commit_offset), self._end)
        self._end += _ENTRY.size
        heapq.heappush(self.intents, (queue_offset, commit_offset))

    def advance(self, watermark: int) -> None:
        """Every timer below ``watermark`` is settled: write it, and rewrite the file once the dead
        entries outnumber the live ones (amortized O(1) per delivery)."""
        if watermark <= self.watermark:
            return
        fd = self._require()
        self.watermark = watermark
        os.pwrite(fd, _HEADER.pack(watermark), 0)
        intents = self.intents
        while intents and intents[0][0] < watermark:
            heapq.heappop(intents)
            self._dead += 1
        if self._dead > COMPACT_AFTER and self._dead > len(intents):
            os.close(fd)
            self._fd = None
            self._rewrite()
            self._fd = os.open(self.path, os.O_RDWR)
            self._end = _HEADER.size + len(self.intents) * _ENTRY.size

    def _rewrite(self) -> None:
        """The file with the watermark and the live intents only, replacing it whole."""
        data = _HEADER.pack(self.watermark) + b"".join(_ENTRY.pack(*e) for e in self.intents)
        replace_whole(self.path, data)
        self._dead = 0

    def _require(self) -> int:
        """The open file, made (watermark, no entries) if there is none yet."""
        if self._fd is None:
            self._rewrite()
            self._fd = os.open(self.path, os.O_RDWR)
            self._end = _HEADER.size + len(self.intents) * _ENTRY.size
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
