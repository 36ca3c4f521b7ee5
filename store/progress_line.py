"""How far a long walk over a store has come, said on a stream: a bar on a terminal, a line now and
then in a log.

``fsck``, ``rebuild-index`` and ``export-keys`` walk a whole CommitLog, minutes for a large store;
an operator must see that they move and how far they are. The walk calls ``update(done)`` as often
as it likes (each run of records): the line is written at most every ``tty_interval`` seconds on a
terminal (redrawn in place) and every ``log_interval`` seconds elsewhere (one line each, so a CI log
or a journal stays short), and ``finish()`` writes the last state once. A walk shorter than one
interval writes nothing but that last line on a terminal, and nothing at all in a log.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from store.spark.progress import BAR_WIDTH

#: Seconds between two redraws of the bar on a terminal.
TTY_INTERVAL = 0.2
#: Seconds between two lines when the stream is not a terminal (a log).
LOG_INTERVAL = 10.0

_MIB = 1024 * 1024


class ProgressLine:
    """``label [####......]  40.0% (400/1000 MiB)`` for a walk of ``total`` bytes."""

    def __init__(
        self,
        label: str,
        total: int,
        out: TextIO | None = None,
        *,
        tty_interval: float | None = None,
        log_interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = max(total, 0)
        self.out = out if out is not None else sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        if self.tty:
            self.interval = TTY_INTERVAL if tty_interval is None else tty_interval
        else:
            self.interval = LOG_INTERVAL if log_interval is None else log_interval
        self.clock = clock
        self.done = 0
        self._next = clock() + self.interval
        self._drawn = False

    def line(self) -> str:
        done = min(max(self.done, 0), self.total)
        fraction = done / self.total if self.total else 1.0
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        size = f"{done / _MIB:.1f}/{self.total / _MIB:.1f} MiB"
        return f"{self.label:<22} [{bar}] {fraction * 100:5.1f}% ({size})"

    def update(self, done: int) -> None:
        """The walk reached ``done`` bytes of ``total``; written when an interval has passed."""
        self.done = done
        now = self.clock()
        if now < self._next:
            return
        self._next = now + self.interval
        self._write()

    def finish(self) -> None:
        """The walk ended: its last state, once on a terminal (ending the redrawn line), and in a log
        only when earlier lines were written (a short walk leaves a log as it was)."""
        if self.tty or self._drawn:
            self._write(final=True)

    def _write(self, *, final: bool = False) -> None:
        if self.tty:
            self.out.write("\r" + self.line() + ("\n" if final else ""))
        else:
            self.out.write(self.line() + "\n")
        self.out.flush()
        self._drawn = True


class WalkProgress:
    """A ``progress(done, total)`` callback for a walk whose total is known only once it starts
    (``check_store``, ``rebuild_index_and_queues``): the line is made at the first call."""

    def __init__(self, label: str, out: TextIO | None = None, **options: object) -> None:
        self.label = label
        self.out = out
        self.options = options
        self.line: ProgressLine | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.line is None:
            self.line = ProgressLine(self.label, total, self.out, **self.options)  # type: ignore[arg-type]
        self.line.update(done)

    def finish(self) -> None:
        if self.line is not None:
            self.line.finish()
