"""Gaps in a CommitLog: stretches with whole records after them that hold no whole record themselves.

A missing file, a file cut short, or bytes that do not check (a corrupt record, zeros where records
should be) followed by whole records. The broker's recovery stops at the first one, so does a walk
that ends there: an index rebuilt from such a walk lacks every key after the gap, and swapping it in
would replace an index that still answers them with a worse one. Both rebuild engines therefore find
gaps the same way (the chain of whole records breaks: a record does not start where the previous one
ended, or at the next file after an end-of-file marker), refuse by default, and index around them
only when asked (``--index-around-gaps``). Every gap is named the same way by both: where whole
records stop and resume, the files involved and what is wrong with them.

The end of the log is not a gap: zeros after the last record, a torn last record, or files the
broker created ahead and has not written yet have no whole record after them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from protocol.record_layout import BLANK_SIZE, SIZE_MAGIC_WIDTH
from store.commitlog import record
from store.commitlog.mapped_files import CommitLog
from store.errors import StoreError

log = logging.getLogger("store.index")

#: The flag that lets a rebuild index around gaps, named in every refusal.
AROUND_FLAG = "--index-around-gaps"


@dataclass(frozen=True, slots=True)
class LogFile:
    """One CommitLog file as the gap description needs it: first offset, name, bytes on disk, and
    why it cannot be read (None when it can)."""

    start: int
    name: str
    length: int
    unreadable: str | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """Whole records stop at ``start`` and resume at ``resume``; ``causes`` say why, file by file."""

    start: int
    resume: int
    causes: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"CommitLog gap: whole records stop at offset {self.start} and resume at offset {self.resume} "
            f"({self.resume - self.start} bytes unreadable): {'; '.join(self.causes)}"
        )


class CommitLogGapError(StoreError):
    """A rebuild (of the index or of the consume queues) met a gap and was not asked to build around
    it: nothing was replaced."""

    def __init__(self, gap: Gap) -> None:
        super().__init__(
            f"{gap.describe()}. An index or consume queue built from this CommitLog would lack every "
            f"record after the gap that the current one may still answer, so neither is built; restore "
            f"the missing data, or pass {AROUND_FLAG} to build them from the records before and after "
            f"the gap"
        )
        self.gap = gap


def gap_causes(
    files: Sequence[LogFile], mapped_file_size: int, start: int, resume: int, reason: str | None
) -> tuple[str, ...]:
    """What lies between ``start`` and ``resume``, one phrase per file slot the stretch touches.

    ``reason`` says why the bytes at ``start`` are not a record, when a file holds bytes there.
    """
    by_start = {f.start: f for f in files}
    causes: list[str] = []
    slot = start - start % mapped_file_size
    while slot < resume:
        name = f"{slot:020d}"
        f = by_start.get(slot)
        if f is None:
            causes.append(f"file {name} (offsets {slot}..{slot + mapped_file_size}) is missing")
        elif f.unreadable is not None:
            causes.append(f"file {name} cannot be read: {f.unreadable}")
        elif slot <= start:
            if f.length < mapped_file_size:
                causes.append(
                    f"file {name} has {f.length} bytes, not {mapped_file_size}: cut short at offset "
                    f"{slot + f.length}"
                )
            if reason:
                at = f"offset {start} (file {name}, byte {start - slot})"
                causes.append(f"the bytes at {at} are not a whole record: {reason}")
        elif slot + mapped_file_size <= resume:
            causes.append(f"file {name} holds no whole record")
        else:
            causes.append(f"file {name} holds no whole record before offset {resume}")
        slot += mapped_file_size
    if not causes:
        causes.append(f"the record before offset {resume} does not end where the next one begins")
    return tuple(causes)


def log_files(commitlog: CommitLog) -> list[LogFile]:
    return [LogFile(f.start, f.path.name, f.length, f.error) for f in commitlog.files]


class GapWalk:
    """The records of a CommitLog from an offset, across gaps, each gap handed to ``on_gap`` first.

    ``on_gap`` raises to refuse (the walk stops there) or returns to go on with the records after it.
    """

    def __init__(self, commitlog: CommitLog, on_gap: Callable[[Gap], None]) -> None:
        self.commitlog = commitlog
        self.on_gap = on_gap
        self.gaps: list[Gap] = []

    def records(self, start: int) -> Iterator[tuple[int, memoryview]]:
        commitlog = self.commitlog
        end = start  # where the next record should begin (just past the last whole one)
        pos: int | None = start
        while pos is not None:
            for offset, buf in commitlog.iter_records(pos):
                if offset != end and not self._follows_file_end(end, offset):
                    self._gap(end, offset)
                yield offset, buf
                end = offset + len(buf)
            # The walk ended: at the end of the log, or before a file it cannot reach (missing, or
            # its predecessor cut short). Whole records in a later file make it a gap.
            pos = self._next_record(end)

    def _next_record(self, end: int) -> int | None:
        return next_record_after(self.commitlog, end)

    def _follows_file_end(self, end: int, offset: int) -> bool:
        """``offset`` starts the next file and the file holding ``end`` is complete there."""
        size = self.commitlog.mapped_file_size
        slot = end - end % size
        if offset != slot + size:
            return False
        for f in self.commitlog.files:
            if f.start == slot:
                safe = f.safe_length()  # never read past what the file holds now (a cut maps to SIGBUS)
                if f.length != size or safe != size:
                    return False
                pos = end - slot
                return pos + BLANK_SIZE > size or record.check(f.view(), pos, safe) == record.BLANK
        return False

    def _gap(self, start: int, resume: int) -> None:
        gap = describe_gap(self.commitlog, start, resume)
        self.on_gap(gap)
        self.gaps.append(gap)


def next_record_after(commitlog: CommitLog, end: int) -> int | None:
    """The first whole record in a file after the one holding ``end``: where records resume when a
    walk ended at ``end`` before a file it cannot reach (missing, or its predecessor cut short)."""
    size = commitlog.mapped_file_size
    here = end - end % size
    for f in commitlog.files:
        if f.start <= here:
            continue
        for offset, _buf in commitlog.iter_records(f.start):
            return offset
    return None


def describe_gap(commitlog: CommitLog, start: int, resume: int) -> Gap:
    """The gap between ``start`` (where whole records stop) and ``resume``, with its causes."""
    reason = None
    for f in commitlog.files:
        pos = start - f.start
        safe = f.safe_length()
        # An end-of-file marker (or no room for one) is where a complete file ends: not the cause.
        if 0 <= pos and pos + SIZE_MAGIC_WIDTH <= safe and record.check(f.view(), pos, safe) != record.BLANK:
            reason = record.describe_invalid(f.view(), pos, safe, start)
    size = commitlog.mapped_file_size
    return Gap(start, resume, gap_causes(log_files(commitlog), size, start, resume, reason))


def report_stall(commitlog: CommitLog, end: int, limit: int) -> Gap | None:
    """A follower (``--follow``, ``serve --build-index``) whose walk ended at ``end``, before ``limit``
    (the CommitLog's settled end): the gap it waits at, said once per gap and process (the index and
    consume queue builders stall at the same gap: one line), or None when it simply caught up.

    It waits there, as the broker's ``ReputMessageService`` does (``getData`` finds no file for the
    offset, and the reput tries the same offset again for ever): skipping would build past records
    that may still come back (a file being restored or copied). A one-shot ``rebuild-index
    --index-around-gaps`` builds around it; a follower started afterwards resumes after the gap (from
    the index's last entry and the queues' ends).
    """
    if end >= limit:
        return None
    resume = next_record_after(commitlog, end)
    if resume is None or resume >= limit:
        return None
    gap = describe_gap(commitlog, end, resume)
    commitlog.warn(
        f"stall:{resume}",
        f"following the CommitLog stops at a {gap.describe()}. The records from offset {resume} on are "
        "neither indexed nor put in consume queues until the missing data is back (the broker's reput "
        f"waits there too); to build around the gap instead, stop this process and run rmq-query "
        f"rebuild-index {AROUND_FLAG} (following resumes after the gap once it is rebuilt)",
    )
    return gap


def refuse(gap: Gap) -> None:
    """The default rule: a gap stops the rebuild."""
    raise CommitLogGapError(gap)


def index_around(gap: Gap) -> None:
    """``--index-around-gaps``: go on after the gap (the caller reports ``GapWalk.gaps``)."""
    log.info("%s; indexing the records before and after it (%s)", gap.describe(), AROUND_FLAG)
