"""Stage progress lines: the closing line of a finished stage says 100%, of a failed one "failed".

Spark's status tracker is updated by an asynchronous listener bus, so it can lag behind an action
that has already returned; these tests drive ``SparkProgress`` with a tracker that lags on purpose.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import pytest

from store.spark import progress as progress_module
from store.spark.progress import SparkProgress


@dataclass
class _Stage:
    numTasks: int  # PySpark's attribute names
    numCompletedTasks: int


@dataclass
class _Job:
    stageIds: list[int]


@dataclass
class _LaggingTracker:
    """Reports ``lag`` fewer completed tasks than there are, for ``lag_polls`` polls (or forever)."""

    tasks: int
    lag: int
    lag_polls: int | None
    polls: int = 0

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [0]

    def getJobInfo(self, job_id: int) -> _Job:
        return _Job([0])

    def getStageInfo(self, stage_id: int) -> _Stage:
        self.polls += 1
        lagging = self.lag_polls is None or self.polls <= self.lag_polls
        return _Stage(self.tasks, self.tasks - (self.lag if lagging else 0))


@dataclass
class _Context:
    tracker: _LaggingTracker
    properties: dict[str, Any] = field(default_factory=dict)

    def statusTracker(self) -> _LaggingTracker:
        return self.tracker

    def setJobGroup(self, group: str, description: str) -> None:
        self.properties["spark.jobGroup.id"] = group

    def setLocalProperty(self, key: str, value: Any) -> None:
        self.properties[key] = value


def _closing_line(tracker: _LaggingTracker, *, fail: bool = False) -> str:
    out = io.StringIO()
    progress = SparkProgress(_Context(tracker), out, interval=60)  # type: ignore[arg-type]
    if fail:
        with pytest.raises(RuntimeError), progress.stage("decode records"):
            raise RuntimeError("task failed")
    else:
        with progress.stage("decode records"):
            pass
    lines = out.getvalue().splitlines()
    assert len(lines) == 1  # the poller (every 60 s) never ran: only the closing line
    return lines[0]


def test_a_finished_stage_waits_for_a_lagging_tracker() -> None:
    tracker = _LaggingTracker(tasks=17, lag=1, lag_polls=3)
    line = _closing_line(tracker)
    assert "100.0% (17/17 tasks) done in" in line
    assert tracker.polls > 3


def test_a_finished_stage_is_reported_complete_even_if_the_tracker_never_catches_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "SETTLE_SECONDS", 0.1)
    line = _closing_line(_LaggingTracker(tasks=17, lag=1, lag_polls=None))
    assert "100.0% (17/17 tasks) done in" in line


def test_a_failed_stage_says_so_with_the_tasks_that_finished() -> None:
    line = _closing_line(_LaggingTracker(tasks=17, lag=5, lag_polls=None), fail=True)
    assert "(12/17 tasks) failed after" in line
    assert "done" not in line
