"""The bookkeeping all three Spark pipelines share (``store.spark.job``): which stage a failure is
reported as, which errors go through untouched, what is freed, and that a caller's session is kept."""

from __future__ import annotations

import io
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from store.commitlog.gaps import CommitLogGapError, Gap
from store.config.store_config import StoreConfig
from store.spark.errors import PipelineError, StageFailedError
from store.spark.job import commitlog_files, spark_job
from store.spark.ranges import CommitLogFile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NO_FILES: list[CommitLogFile] = []


def test_a_failure_is_reported_as_the_stage_it_happened_in(spark: SparkSession) -> None:
    out = io.StringIO()
    with pytest.raises(StageFailedError) as info:
        with spark_job(NO_FILES, spark=spark, progress_out=out) as job:
            with job.stage("count things"):
                assert job.sc.parallelize([1, 2, 3], 3).count() == 3
            job.label = "write things"  # the work that prepares the next stage's actions
            raise OSError(28, "No space left on device")
    assert info.value.stage == "write things"
    assert str(info.value) == "stage 'write things' failed: [Errno 28] No space left on device"
    assert "count things" in out.getvalue() and "(3/3 tasks) done in" in out.getvalue()
    # The caller's session was reused, not stopped.
    assert spark.sparkContext.parallelize([1]).count() == 1


def test_before_any_other_stage_a_failure_is_the_planning_stage(spark: SparkSession) -> None:
    with pytest.raises(StageFailedError) as info:
        with spark_job(NO_FILES, spark=spark, progress_out=io.StringIO()):
            raise ValueError("boom")
    assert str(info.value) == "stage 'plan ranges' failed: boom"


def test_the_pipelines_own_refusals_go_through_unchanged(spark: SparkSession) -> None:
    refusal = PipelineError("the CommitLog holds no records")
    with pytest.raises(PipelineError) as info:
        with spark_job(NO_FILES, spark=spark, progress_out=io.StringIO()):
            raise refusal
    assert info.value is refusal
    gap = CommitLogGapError(Gap(0, 100, ("a file is missing",)))
    with pytest.raises(CommitLogGapError) as gap_info:
        with spark_job(NO_FILES, spark=spark, progress_out=io.StringIO()):
            raise gap
    assert gap_info.value is gap


@pytest.mark.parametrize("fail", [False, True])
def test_kept_rdds_are_unpersisted_however_the_job_ends(spark: SparkSession, fail: bool) -> None:
    with pytest.raises(StageFailedError) if fail else nullcontext():
        with spark_job(NO_FILES, spark=spark, progress_out=io.StringIO()) as job:
            rdd = job.keep(job.sc.parallelize(range(10), 2).cache())
            assert rdd.count() == 10 and rdd.is_cached
            if fail:
                raise RuntimeError("lost executor")
    assert not rdd.is_cached


def test_a_store_without_commitlog_files_is_refused_before_spark_starts(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / "notes.txt").write_text("not a CommitLog file")
    with pytest.raises(PipelineError) as info:
        commitlog_files(StoreConfig.for_store(tmp_path))
    assert str(info.value) == f"no CommitLog files in {tmp_path / 'commitlog'}"
