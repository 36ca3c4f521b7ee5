"""A watchdog for the event loop: how long it was held, and by what (issue 30).

Every client of every port waits while one callback holds the loop, so a cost that grows with the
topics or groups shows up as a stall for all. This makes such stalls visible in production: a beat
scheduled on the loop every ``interval`` records when it ran; a thread of its own looks at the beat
when the loop, had it not beaten since, would have been held ``threshold`` seconds, and if so logs
once per stall the stack the loop's thread is in at that moment (the callback holding it). The
longest stall since start and since the last scrape, and how many stalls passed the threshold, are
read by ``/metrics``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)

#: How often the loop beats, and after how long without a beat a stall is logged (seconds).
DEFAULT_INTERVAL = 0.025
DEFAULT_THRESHOLD = 0.5


class LoopWatchdog:
    """Measures the event loop's stalls from a beat on it and a thread watching the beat."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.interval = interval
        self.threshold = threshold
        #: The longest time the loop was held (seconds): since start, and since ``take_recent_max``.
        self.max_stall = 0.0
        self._recent_max = 0.0
        #: Stalls longer than ``threshold``.
        self.stalls_over_threshold = 0
        self._last_beat = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._last_beat = time.monotonic()
        self._handle = loop.call_later(self.interval, self._beat)
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        now = time.monotonic()
        # a beat is due ``interval`` after the last one: what is past that, the loop was held
        self._note(max(now - self._last_beat - self.interval, 0.0))
        self._last_beat = now
        if not self._stop.is_set() and self._loop is not None:
            self._handle = self._loop.call_later(self.interval, self._beat)

    def _note(self, stall: float) -> None:
        if stall > self.max_stall:
            self.max_stall = stall
        if stall > self._recent_max:
            self._recent_max = stall
        if stall >= self.threshold:
            self.stalls_over_threshold += 1

    def take_recent_max(self) -> float:
        """The longest stall since the last call (a scrape's window), then start a new window."""
        recent, self._recent_max = self._recent_max, 0.0
        return recent

    def _watch(self) -> None:
        """Sleep until the loop, if it has not beaten since, would have been held ``threshold``; then
        look. While the loop beats this thread wakes about once per ``threshold`` (not once per beat):
        each wake takes the GIL from the loop's thread, and a request in flight then waits for it."""
        logged_for: float | None = None
        while True:
            beat = self._last_beat
            wait = beat + self.interval + self.threshold - time.monotonic()
            if wait > 0 or logged_for == beat:
                # not yet due, or this stall is logged: look again when due, or a beat later
                if self._stop.wait(wait if wait > 0 else self.interval):
                    return
                continue
            held = time.monotonic() - beat - self.interval
            logged_for = beat
            frame = sys._current_frames().get(self._loop_thread or 0)
            try:
                where = "".join(traceback.format_stack(frame, limit=12)) if frame is not None else "?"
            finally:
                # A frame object kept here keeps its function's locals after it returns: a view
                # of a connection's read buffer then stops that buffer from being resized, and
                # the connection's next read fails (BufferError). The text is all that is kept.
                del frame
            log.warning(
                "the event loop has been held for %.0f ms (every client waits); its thread is in:\n%s",
                held * 1000,
                where,
            )

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
