"""The bookkeeping every Spark pipeline over the CommitLog does around its own stages.

The index rebuild, the consume-queue rebuild and the key export each list the CommitLog's files
(a store without any is refused before Spark starts), take the active SparkSession or start one
(and stop only one they started), show and time each stage with a progress bar, start with the
"plan ranges" stage, free what they cached, and report any failure as one line naming the stage it
happened in (``StageFailedError``), while their own refusals (``PipelineError``, a CommitLog gap)
go through as they are. ``spark_job`` does all of that, once for the three of them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from store.commitlog.gaps import CommitLogGapError
from store.config.store_config import StoreConfig
from store.spark.errors import PipelineError, StageFailedError
from store.spark.failures import describe_failure
from store.spark.progress import SparkProgress
from store.spark.ranges import CommitLogFile, FilePlan, list_files, plan_file_sampled, plan_files_on
from store.spark.session import open_session, task_slots

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

#: The first stage of every pipeline, and what a failure before any other stage is reported as.
PLAN_RANGES = "plan ranges"


def commitlog_files(config: StoreConfig) -> list[CommitLogFile]:
    """The CommitLog's files in offset order; ``PipelineError`` when there are none."""
    files = list_files(config.store_path_commit_log)
    if not files:
        raise PipelineError(f"no CommitLog files in {config.store_path_commit_log}")
    return files


class SparkJob:
    """One pipeline run: its session, its files, its progress bars and the stage it is in."""

    def __init__(self, session: SparkSession, files: list[CommitLogFile], progress: SparkProgress) -> None:
        self.session = session
        self.sc: SparkContext = session.sparkContext
        self.files = files
        self.progress = progress
        self.started = time.monotonic()
        #: The stage a failure is reported as: the last one begun (set it by hand for the work that
        #: prepares a stage's Spark actions, e.g. the staging directory it writes into).
        self.label = PLAN_RANGES
        self._kept: list[Any] = []

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Run the Spark actions inside the block as the stage ``label``, with its progress bar."""
        self.label = label
        with self.progress.stage(label):
            yield

    def plan(self, range_bytes: int, *, sampled: bool = False) -> list[FilePlan]:
        """The "plan ranges" stage: every file's plan (``ranges.plan_file``, or with ``sampled``
        ``ranges.plan_file_sampled``), in file order."""
        with self.stage(PLAN_RANGES):
            return plan_files_on(self.sc, self.files, range_bytes, sampled=sampled)

    def plan_here(self, range_bytes: int) -> list[FilePlan]:
        """The "plan ranges" stage by sampling (``ranges.plan_file_sampled``), run in this process:
        it reads a few KiB per cut, less than the Spark job that would carry it costs to schedule."""
        with self.stage(PLAN_RANGES):
            return [plan_file_sampled(f, range_bytes) for f in self.files]

    def task_slots(self) -> int:
        """How many tasks the job's executors run at once (``session.task_slots``)."""
        return task_slots(self.sc)

    def keep(self, rdd: Any) -> Any:
        """``rdd`` (persisted by the caller), unpersisted when the job ends, however it ends."""
        self._kept.append(rdd)
        return rdd

    @property
    def seconds(self) -> float:
        """Time since the job started."""
        return time.monotonic() - self.started

    @property
    def stage_seconds(self) -> dict[str, float]:
        """How long each stage took."""
        return dict(self.progress.timings)

    def _release(self) -> None:
        for rdd in self._kept:
            try:
                rdd.unpersist()
            except Exception:  # the session may already be gone; nothing is left to free
                pass


@contextmanager
def spark_job(
    files: list[CommitLogFile],
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    spark_conf: Mapping[str, str] | None = None,
    progress_out: TextIO | None = None,
) -> Iterator[SparkJob]:
    """A pipeline run over ``files`` on ``spark`` (else the active session, else a new one on
    ``master`` with ``spark_conf``), progress on ``progress_out`` (default stderr).

    Inside the block, an error other than a ``PipelineError`` or ``CommitLogGapError`` becomes a
    ``StageFailedError`` naming ``job.label``. On the way out the kept RDDs are unpersisted and a
    session the job started is stopped.
    """
    session, own_session = (spark, False) if spark is not None else open_session(master, spark_conf)
    out = progress_out if progress_out is not None else sys.stderr
    job = SparkJob(session, files, SparkProgress(session.sparkContext, out))
    try:
        yield job
    except (PipelineError, CommitLogGapError):
        raise
    except Exception as exc:
        raise StageFailedError(job.label, describe_failure(exc)) from exc
    finally:
        job._release()
        if own_session:
            session.stop()
