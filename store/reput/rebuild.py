"""``rebuild-index``'s one-shot rebuild of both the IndexFiles and the ConsumeQueues in one CommitLog pass.

The broker's reput reads each record once and hands it to both dispatchers; rebuilding them one
after the other read (and checked) the CommitLog twice and opened it twice (issue 22: the command as
a whole was slower than the broker's reput). Here one ``Reput`` feeds the consume queue builder and
the index builder (the broker's order), the index checking each record as it indexes it (its compiled
``index_range`` is the reput's ``Scanner``) and the consume queues taking the runs it found.

Both outputs are staged (``store.staging``) and swapped in only when the pass completed: the index
first, then the consume queues. A gap (``refuse``), a failed write or any other error during the
pass replaces neither. When the consume queues' swap fails after the index's, ``QueuesNotReplaced``
says the new index is in place. The rules of ``store.index.builder.rebuild_index`` and
``store.consumequeue.builder.rebuild_consume_queues`` hold unchanged (they remain the one-output
rebuilds: ``--only``); the refusals those make before writing anything (a consume queue geometry
that is not the configuration's, an unreadable checkpoint) are the caller's to check first
(``queues_preflight``), so that it can fall back to rebuilding the index alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from store.checkpoint import Checkpoint
from store.commitlog.gaps import index_around, refuse
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder, check_geometry
from store.errors import StoreError
from store.index.builder import IndexBuilder, left_behind, update_index_timestamp
from store.reput.walk import Reput
from store.staging import staged_output

__all__ = ["QueuesNotReplaced", "queues_preflight", "rebuild_index_and_queues"]


class QueuesNotReplaced(StoreError):
    """The new index is in place but the new consume queues could not be swapped in (``index``:
    the closed index builder, for its report)."""

    def __init__(self, message: str, index: IndexBuilder) -> None:
        super().__init__(message)
        self.index = index


def queues_preflight(config: StoreConfig) -> None:
    """What ``rebuild_consume_queues`` refuses before writing anything: raises ``StoreError``."""
    check_geometry(config.consume_queue_dir, config.consume_queue_file_size)
    if os.path.lexists(config.checkpoint_path):
        Checkpoint.read(config.checkpoint_path)


def rebuild_index_and_queues(
    config: StoreConfig,
    *,
    around_gaps: bool = False,
    now_millis: Callable[[], int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[IndexBuilder, ConsumeQueueBuilder]:
    """Rebuild ``index/`` and ``consumequeue/`` from one CommitLog pass; see the module docstring.
    ``progress(done, total)``: the CommitLog bytes the pass has walked, told after each run.

    Returns the closed builders: their counters, ``gaps`` (the same list: the gaps the pass went
    around, with ``around_gaps``) and ``after_swap`` (what failed once each output was in place)."""
    queues_preflight(config)
    leftovers: list[Path] = []
    index_placed = False
    index: IndexBuilder | None = None
    queues: ConsumeQueueBuilder | None = None
    try:
        with staged_output(config.consume_queue_dir) as queue_staging:
            with staged_output(config.index_dir, leftovers=leftovers) as index_staging:
                index_checkpoint = index_staging / "checkpoint.rebuild"
                # A file beside the topics: no broker takes it for a topic.
                queue_checkpoint = queue_staging / "checkpoint.rebuild"
                commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
                try:
                    index = IndexBuilder(
                        config,
                        commitlog,
                        index_dir=index_staging,
                        checkpoint_path=index_checkpoint,
                        now_millis=now_millis,
                    )
                    queues = ConsumeQueueBuilder(
                        config,
                        commitlog,
                        root=queue_staging,
                        checkpoint_path=queue_checkpoint,
                        fill_holes=around_gaps,
                    )
                    first, total = commitlog.min_offset, commitlog.max_offset - commitlog.min_offset
                    reput = Reput(
                        commitlog,
                        [queues, index],
                        on_gap=index_around if around_gaps else refuse,
                        progress=(lambda pos: progress(pos - first, total)) if progress is not None else None,
                    )
                    reput.run_once()
                    index.gaps = queues.gaps = reput.gaps
                finally:
                    try:
                        if queues is not None:
                            queues.close()
                    finally:
                        try:
                            if index is not None:
                                index.close()
                        finally:
                            commitlog.close()
                index_ts = Checkpoint.read_or_default(index_checkpoint).index_msg_timestamp
                index_checkpoint.unlink(missing_ok=True)
                logics_ts = Checkpoint.read_or_default(queue_checkpoint).logics_msg_timestamp
                queue_checkpoint.unlink(missing_ok=True)
            index_placed = True
    except (StoreError, OSError) as exc:
        if index_placed and index is not None:
            raise QueuesNotReplaced(str(exc), index) from exc
        raise
    assert index is not None and queues is not None
    # Both are in place: what fails from here on is reported, not raised.
    index.after_swap = [left_behind(path) for path in leftovers]
    problem = update_index_timestamp(config.checkpoint_path, index_ts)
    if problem:
        index.after_swap.append(problem)
    try:
        checkpoint = Checkpoint.read_or_default(config.checkpoint_path)
        checkpoint.logics_msg_timestamp = logics_ts
        checkpoint.write(config.checkpoint_path)
    except (StoreError, OSError) as exc:
        queues.after_swap.append(f"the checkpoint's logicsMsgTimestamp was not set to {logics_ts}: {exc}")
    return index, queues
