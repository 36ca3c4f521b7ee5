"""The broker's periodic check of the CommitLog's disk: refuse puts before the disk is full.

The 4.9.7 broker measures the CommitLog's partition every 10 s (``DefaultMessageStore`` schedules
``CleanCommitLogService.isSpaceFull`` 1 s after start, then every 10 s): used above
``diskSpaceWarningLevelRatio`` (0.90 unless the ``rocketmq.broker.diskSpaceWarningLevelRatio``
system property says otherwise) sets ``RunningFlags``' disk-full bit, said once at ERROR; at or below
it clears the bit, said once at INFO. While the bit is set ``checkStoreStatus`` answers every put
``SERVICE_NOT_AVAILABLE``, so a broker stops taking messages while there is still room to write the
consume queues and index of those it took.

Here the measure is taken when a put asks and the last one is older than the interval: at most one
``statvfs`` per interval, never one per SEND, and no thread of its own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from store.platform.disk import disk_used_ratio

log = logging.getLogger("store.write")

#: ``diskSpaceWarningLevelRatio``: the used share above which puts are refused.
DISK_SPACE_WARNING_LEVEL_RATIO = 0.90
#: Seconds between two measures (the broker's disk-check period, 10,000 ms).
DISK_CHECK_INTERVAL = 10.0


class DiskSpaceCheck:
    """Whether the disk under ``path`` (the CommitLog directory) is too full to take more messages.

    ``used_ratio`` measures a path (``disk_used_ratio``: -1 for one that cannot be measured, which
    never counts as full, as in the broker); ``monotonic`` is the clock the interval runs on.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        used_ratio: Callable[[str | os.PathLike[str]], float] = disk_used_ratio,
        warning_ratio: float = DISK_SPACE_WARNING_LEVEL_RATIO,
        interval: float = DISK_CHECK_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.used_ratio = used_ratio
        self.warning_ratio = warning_ratio
        self.interval = interval
        self._monotonic = monotonic
        self._next: float | None = None
        #: The disk-full bit: set while the last measure was above ``warning_ratio``.
        self.disk_full = False
        #: The last measure (-1 until the first).
        self.ratio = -1.0

    def full(self) -> bool:
        """The disk-full bit, measured again first if the last measure is ``interval`` old."""
        now = self._monotonic()
        if self._next is None or now >= self._next:
            self._next = now + self.interval
            self._measure()
        return self.disk_full

    def _measure(self) -> None:
        ratio = self.ratio = self.used_ratio(self.path)
        if ratio > self.warning_ratio:
            if not self.disk_full:
                log.error(
                    "the disk of the CommitLog at %s is %.2f used, above %.2f: marked full, every SEND "
                    "is answered SERVICE_NOT_AVAILABLE until it is at or below that again",
                    self.path,
                    ratio,
                    self.warning_ratio,
                )
            self.disk_full = True
        else:
            if self.disk_full:
                log.info(
                    "the disk of the CommitLog at %s is %.2f used: marked not full, SENDs are taken again",
                    self.path,
                    ratio,
                )
            self.disk_full = False
