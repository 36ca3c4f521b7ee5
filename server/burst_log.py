"""One log line per burst: the first event logs at once, later ones are counted into the next line.

Refused connections and denied requests can come by the thousand from one misbehaving client; a line
for each would drown the log (and cost more than answering them). The first occurrence is logged
immediately, then at most one line every ``interval`` seconds, each saying how many were folded in.

Every log line a client can cause once per request or per connection goes through one of these
(refusals, denials, malformed frames, bad header fields, processor failures), so that no request
pattern can make the log grow faster than one line per kind per ``interval``. A failure's traceback
is attached to the line that is logged (``exc_info``), not to the events folded into its count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class BurstLog:
    """Rate-limited warnings about one kind of event."""

    __slots__ = ("_clock", "_interval", "_last", "_level", "_logger", "_unlogged")

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        level: int = logging.WARNING,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._level = level
        self._last = float("-inf")
        self._unlogged = 0

    def event(self, message: str, *args: object, exc_info: BaseException | None = None) -> bool:
        """Count one event; log ``message % args`` plus the count if a line is due. True if logged.

        ``exc_info``: an exception whose traceback goes with the line, when one is logged.
        """
        self._unlogged += 1
        now = self._clock()
        if now - self._last < self._interval:
            return False
        count, self._unlogged, self._last = self._unlogged, 0, now
        self._logger.log(
            self._level,
            message + " (%d such event(s) since the last report)",
            *args,
            count,
            exc_info=exc_info,
        )
        return True
