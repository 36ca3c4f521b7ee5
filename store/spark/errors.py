"""Errors a pipeline job reports: each says where (file, offset, stage) and what went wrong."""

from __future__ import annotations

from store.errors import StoreError


class PipelineError(StoreError):
    """A pipeline job failed; nothing it was writing replaced existing output."""


class CorruptRecordError(PipelineError):
    """A CommitLog record before the end of the log does not decode."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"corrupt CommitLog record at offset {offset} in {path}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class StageFailedError(PipelineError):
    """A Spark stage failed (out of memory, a lost executor, an error in a task)."""

    def __init__(self, stage: str, cause: str) -> None:
        super().__init__(f"stage '{stage}' failed: {cause}")
        self.stage = stage
        self.cause = cause
