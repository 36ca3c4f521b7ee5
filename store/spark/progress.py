"""Visible progress for pipeline jobs: each named stage with a bar of its finished Spark tasks.

A rebuild over many GiB runs for minutes; an operator needs to see which stage it is in and how far
along it is. Each stage runs under its own Spark job group, and a daemon thread polls Spark's status
tracker for that group's task counts. On a terminal the bar redraws in place; elsewhere (logs, CI)
a line is printed only when the percentage moves by ten points, so logs stay short.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark import SparkContext

BAR_WIDTH = 30
#: How long a finished stage waits for Spark's status tracker to count its last tasks.
SETTLE_SECONDS = 2.0


def render_bar(label: str, done: int, total: int, *, unit: str = "tasks") -> str:
    """One progress line: ``label [#####.....]  50% (5/10 tasks)``."""
    fraction = done / total if total else 0.0
    filled = round(fraction * BAR_WIDTH)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return f"{label:<22} [{bar}] {fraction * 100:5.1f}% ({done}/{total} {unit})"


class SparkProgress:
    """Reports stages and task progress of the jobs a pipeline submits, on ``out``."""

    def __init__(self, sc: SparkContext, out: TextIO | None = None, *, interval: float = 0.5) -> None:
        self._sc = sc
        self._out = out if out is not None else sys.stderr
        self._interval = interval
        self._tty = bool(getattr(self._out, "isatty", lambda: False)())
        self.timings: dict[str, float] = {}

    def _counts(self, group: str) -> tuple[int, int]:
        tracker = self._sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        return done, total

    def _emit(self, line: str, *, final: bool = False) -> None:
        if self._tty:
            self._out.write("\r" + line + ("\n" if final else ""))
        else:
            self._out.write(line + "\n")
        self._out.flush()

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Run the Spark actions inside the block as one reported stage called ``label``."""
        group = f"rmq-query-{label}-{time.monotonic_ns()}"
        self._sc.setJobGroup(group, label)
        stop = threading.Event()
        started = time.monotonic()

        def poll() -> None:
            last_decile = -1
            while not stop.wait(self._interval):
                done, total = self._counts(group)
                if not total:
                    continue
                decile = done * 10 // total
                if self._tty or decile != last_decile:
                    last_decile = decile
                    self._emit(render_bar(label, done, total))

        thread = threading.Thread(target=poll, name=f"progress-{label}", daemon=True)
        thread.start()
        ok = False
        try:
            yield
            ok = True
        finally:
            stop.set()
            thread.join()
            elapsed = time.monotonic() - started
            self.timings[label] = elapsed
            if ok:
                done, total = self._settled_counts(group)
                if total:
                    self._emit(render_bar(label, done, total) + f" done in {elapsed:.2f} s", final=True)
                else:  # no Spark job: the stage ran in the driver (a sampled plan, the index writer)
                    self._emit(f"{label:<22} done in {elapsed:.2f} s by the driver", final=True)
            else:
                done, total = self._counts(group)
                self._emit(render_bar(label, done, total) + f" failed after {elapsed:.2f} s", final=True)
            self._sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _settled_counts(self, group: str) -> tuple[int, int]:
        """Task counts once a stage's actions have returned.

        Spark's status tracker is fed by an asynchronous listener bus, so right after an action
        returns it can still miss the last task completions (a busy machine showed ``94.1% (16/17
        tasks) done``). Wait a little for it to catch up; if it still lags, the action's return is
        the proof that every task finished, so report them all done.
        """
        deadline = time.monotonic() + SETTLE_SECONDS
        done, total = self._counts(group)
        while done < total and time.monotonic() < deadline:
            time.sleep(0.05)
            done, total = self._counts(group)
        return total, total
