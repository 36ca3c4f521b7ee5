"""Rebuilding, while the store is served, the files that failed their checks (issue 31, item 7).

``IndexService.refresh`` and ``ConsumeQueue.refresh`` notice a file overwritten in place with
another file's bytes and stop answering from it; each asks for that one file to be rebuilt from the
CommitLog (``store.index.file_rebuild``, ``store.consumequeue.file_rebuild``). This runs those
rebuilds: each is a reput dispatcher with a walk of its own over the CommitLog range the file
covered, advanced by ``MessageStore.refresh`` at most ``max_records`` records a call, so the server's
refresh loop (``server.refresh``) keeps the event loop free in between, as it does for indexing.
A rebuild whose walk finds nothing more to read (the CommitLog's end, or a gap) is installed with
what it found; one of a file still being written (a queue's last file, the newest IndexFile) then
follows the CommitLog, a pass each refresh, until the file is full. Only rebuilds not installed
yet keep ``refresh`` asking to be called again at once. The counters are what ``/metrics`` shows
(``rmq_query_files_failed_checks``, ``rmq_query_files_rebuilt``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import delay_level_table
from store.consumequeue.file_rebuild import QueueFileRebuild
from store.consumequeue.queue_table import QueueTable
from store.errors import StoreError
from store.index.file_rebuild import IndexFileRebuild
from store.index.service import IndexService
from store.reput.dispatcher import Run
from store.reput.walk import Reput

log = logging.getLogger("store.repair")
_NO_LIMIT = 1 << 62


class Rebuild(Protocol):
    """What a file's rebuild is to the driver: a reput dispatcher that puts its file in place."""

    label: str
    #: Nothing more to take (the file is whole, or full).
    done: bool
    #: The file may still be written (a queue's last file, the newest IndexFile): once installed
    #: its rebuild goes on taking the records the CommitLog gains, until it is ``done``.
    follow: bool

    def begin(self) -> bool: ...
    def resume_offset(self) -> int: ...
    def dispatch(self, run: Run) -> None: ...
    def flush(self) -> None: ...
    def install(self) -> None: ...
    def extend(self) -> None: ...
    def alive(self) -> bool: ...
    def abandon(self) -> None: ...


@dataclass(slots=True)
class _Job:
    rebuild: Rebuild
    reput: Reput
    installed: bool = False


class FileRepairs:
    """The rebuilds under way for one store, and how many files failed their checks or were rebuilt."""

    def __init__(
        self, config: StoreConfig, commitlog: CommitLog, index: IndexService, queues: QueueTable
    ) -> None:
        self.commitlog = commitlog
        self.index = index
        self.queues = queues
        self._delays = delay_level_table(config.message_delay_level)
        self._jobs: list[_Job] = []

    @property
    def pending(self) -> int:
        """Rebuilds not installed yet."""
        return sum(not job.installed for job in self._jobs)

    @property
    def following(self) -> int:
        """Rebuilt files still taking the records of a file being written."""
        return sum(job.installed for job in self._jobs)

    def counts(self) -> dict[str, tuple[int, int]]:
        """kind -> (files that failed their checks, files rebuilt) since the store was opened."""
        failed = rebuilt = 0
        for queue in self.queues.opened().values():
            failed += queue.failed_checks
            rebuilt += queue.files_rebuilt
        return {
            "index": (self.index.failed_checks, self.index.files_rebuilt),
            "consume_queue": (failed, rebuilt),
        }

    def _collect(self) -> None:
        """Start a rebuild for each file that asked for one since the last call."""
        for request in self.index.take_damaged():
            try:
                index_rebuild = IndexFileRebuild(self.index, request, self.commitlog)
            except (OSError, StoreError) as exc:
                log.warning(
                    "index file %s cannot be rebuilt now (%s): it stays left out of queries",
                    self.index.index_dir / request[0],
                    exc,
                )
                continue
            self._jobs.append(_Job(index_rebuild, Reput(self.commitlog, [index_rebuild])))
        for queue, request in self.queues.take_rebuilds():
            queue_rebuild = QueueFileRebuild(queue, request, self._delays)
            self._jobs.append(_Job(queue_rebuild, Reput(self.commitlog, [queue_rebuild])))

    def run(self, max_records: int | None = None) -> bool:
        """Advance the rebuilds by at most ``max_records`` records in all; True while one that is
        not installed yet is left (followers of a file still written do not keep the caller busy)."""
        self._collect()
        budget = _NO_LIMIT if max_records is None else max_records
        progressed = True
        while progressed and budget > 0:
            progressed = False
            for job in list(self._jobs):
                if budget <= 0:
                    break
                read = self._advance(job, budget)
                budget -= read
                progressed = progressed or read > 0
        return any(not job.installed for job in self._jobs)

    def _advance(self, job: _Job, budget: int) -> int:
        """One pass of ``job``'s walk (at most ``budget`` records); installs or extends its file."""
        rebuild = job.rebuild
        if job.installed and not rebuild.alive():
            self._jobs.remove(job)  # the file was restored: its copy answers no more
            return 0
        read = job.reput.run_once(budget)
        try:
            if not job.installed and (rebuild.done or read == 0):
                # Done, or caught up with the CommitLog (its end, or a gap): what it holds is what
                # the CommitLog has of the file's records.
                rebuild.install()
                job.installed = True
            elif job.installed and read:
                rebuild.extend()
        except (OSError, StoreError) as exc:
            self._jobs.remove(job)
            rebuild.abandon()
            log.warning("%s could not be rebuilt (%s): it stays left out", rebuild.label, exc)
            return read
        if job.installed and (rebuild.done or not rebuild.follow):
            self._jobs.remove(job)
        return read

    def close(self) -> None:
        for job in self._jobs:
            job.rebuild.abandon()
        self._jobs.clear()
