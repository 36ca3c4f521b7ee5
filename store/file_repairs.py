"""Rebuilding, while the store is served, the files that failed their checks (issue 31, item 7).

``IndexService.refresh`` and ``ConsumeQueue.refresh`` notice a file overwritten in place with
another file's bytes and stop answering from it; each asks for that one file to be rebuilt from the
CommitLog (``store.index.file_rebuild``, ``store.consumequeue.file_rebuild``). This runs those
rebuilds: each is a reput dispatcher with a walk of its own over the CommitLog range the file
covered, advanced by ``MessageStore.refresh`` at most ``max_records`` records a call, so the server's
refresh loop (``server.refresh``) keeps the event loop free in between, as it does for indexing.
A rebuild whose walk finds nothing more to read (the CommitLog's end, or a gap) is finished with
what it found. The counters are what ``/metrics`` shows (``rmq_query_files_failed_checks``,
``rmq_query_files_rebuilt``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import delay_level_table
from store.consumequeue.file_rebuild import QueueFileRebuild
from store.consumequeue.queue_table import QueueTable
from store.errors import StoreError
from store.index.file_rebuild import IndexFileRebuild
from store.index.service import IndexService
from store.reput.walk import Reput

log = logging.getLogger("store.repair")
_NO_LIMIT = 1 << 62


@dataclass(slots=True)
class _Job:
    rebuild: IndexFileRebuild | QueueFileRebuild
    reput: Reput
    #: Called once the walk is done: puts the rebuilt file in its place.
    install: Callable[[], None]
    #: Called when the store closes before it is done.
    abandon: Callable[[], None]


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
        """Rebuilds under way."""
        return len(self._jobs)

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
        for name, good, first_entry, previous in self.index.take_damaged():
            try:
                index_rebuild = IndexFileRebuild(
                    name,
                    self.index.index_dir / name,
                    self.index.hash_slot_num,
                    self.index.index_num,
                    good,
                    first_entry,
                    previous,
                    self.commitlog,
                )
            except (OSError, StoreError) as exc:
                log.warning(
                    "index file %s cannot be rebuilt now (%s): it stays left out of queries",
                    self.index.index_dir / name,
                    exc,
                )
                continue
            self._start(index_rebuild, self._index_installer(index_rebuild), index_rebuild.abandon)
        for queue, (copy, buffer, first, stop) in self.queues.take_rebuilds():
            queue_rebuild = QueueFileRebuild(
                queue.topic, queue.queue_id, copy.start, buffer, first, stop, self._delays
            )

            def install(q=queue, c=copy, b=buffer, r=queue_rebuild) -> None:  # type: ignore[no-untyped-def]
                q.rebuilt(c, b, r.finish(c.seen_written))

            self._start(queue_rebuild, install, lambda: None)

    def _index_installer(self, rebuild: IndexFileRebuild) -> Callable[[], None]:
        def install() -> None:
            self.index.install_rebuilt(rebuild.name, rebuild.finish())

        return install

    def _start(
        self,
        rebuild: IndexFileRebuild | QueueFileRebuild,
        install: Callable[[], None],
        abandon: Callable[[], None],
    ) -> None:
        self._jobs.append(_Job(rebuild, Reput(self.commitlog, [rebuild]), install, abandon))

    def run(self, max_records: int | None = None) -> bool:
        """Advance the rebuilds by at most ``max_records`` records in all; True while some are left."""
        self._collect()
        budget = _NO_LIMIT if max_records is None else max_records
        while self._jobs and budget > 0:
            job = self._jobs[0]
            read = job.reput.run_once(budget)
            budget -= read
            if job.rebuild.done or read == 0:
                # Done, or nothing more to read now (the CommitLog's end, a gap): what it holds is
                # what the CommitLog still has of the file's records.
                self._jobs.pop(0)
                try:
                    job.install()
                except (OSError, StoreError) as exc:
                    job.abandon()
                    log.warning("%s could not be rebuilt (%s): it stays left out", job.rebuild.label, exc)
        return bool(self._jobs)

    def close(self) -> None:
        for job in self._jobs:
            job.abandon()
        self._jobs.clear()
