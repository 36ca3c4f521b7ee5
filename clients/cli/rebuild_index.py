"""``rmq-query rebuild-index --store DIR``: rebuild the IndexFiles and ConsumeQueues from the CommitLog.

Once (the default): the new files are written beside ``index/`` and ``consumequeue/`` and each
directory is swapped in only when complete. ``--follow``: keep indexing and building consume queues
behind a CommitLog that is still being written (never on a store a running broker maintains: two
writers would corrupt it), until interrupted. ``--only`` limits the work to one of the two.

A one-shot rebuild must never replace a better index with a worse one: a gap in the CommitLog (a
missing or cut-short file, a corrupt record, with whole records after it) stops it with exit 1 and
the old index untouched, unless ``--index-around-gaps`` (``store.commitlog.gaps``; both engines follow the
same rule). The ConsumeQueues follow the same rule with the same gap walk: a queue built across a gap
would lack every entry after it. Both are built from one CommitLog pass, as the broker's reput builds
them (``store.reput.rebuild``), and swapped in when it completed, the index first, so a gap refuses
before either directory is replaced (exit 1, ``index/`` and ``consumequeue/`` both untouched);
``--only consumequeue`` refuses the same way. When the consume queues' rebuild would refuse up front
(a wrong geometry, an unreadable checkpoint) the index is rebuilt alone first and the refusal
reported after it. The exit code says whether the new index is in place (``rebuild_outcome``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from clients.cli.arg_types import positive_seconds
from clients.cli.rebuild_outcome import (
    EXIT_CODES,
    EXIT_IN_PLACE_UNFINISHED,
    EXIT_NOT_REPLACED,
    report_after_swap,
)
from clients.cli.spark_options import ENGINES, add_master_arguments, run_spark_rebuild, spark_only_options
from clients.cli.store_options import add_store_arguments, config_from_args
from store.checkpoint import abnormal_exit
from store.commitlog.gaps import AROUND_FLAG
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import ConfigError, StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder, rebuild_consume_queues
from store.errors import StoreError
from store.index.builder import IndexBuilder, rebuild_index
from store.platform.broker_lock import broker_lock_holder, index_files_mapped_by
from store.progress_line import WalkProgress
from store.reput.rebuild import QueuesNotReplaced, queues_preflight, rebuild_index_and_queues
from store.reput.walk import Reput

HELP = "rebuild a store's IndexFiles and ConsumeQueues from its CommitLog (byte-identical to the broker's)"

DEFAULT_INTERVAL = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.epilog = EXIT_CODES
    parser.add_argument(
        "--follow", action="store_true", help="index continuously behind a live CommitLog (until Ctrl-C)"
    )
    parser.add_argument(
        "--interval",
        type=positive_seconds,
        default=None,
        help=f"seconds between polls, with --follow only (default {DEFAULT_INTERVAL})",
    )
    parser.add_argument(
        AROUND_FLAG,
        dest="index_around_gaps",
        action="store_true",
        help="when the CommitLog has a gap (a missing or cut-short file, a corrupt record) with whole "
        "records after it, index the records before and after it and give them their consume queue "
        "entries (each gap is reported) instead of refusing and keeping the old index and queues",
    )
    parser.add_argument(
        "--only",
        choices=("index", "consumequeue"),
        help="rebuild only the IndexFiles or only the ConsumeQueues (default: both)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="sequential",
        help="sequential: this process (default); spark: parallel on Spark (store.spark.rebuild)",
    )
    parser.add_argument(
        "--out", type=Path, help="with --engine spark: write the index files here instead of STORE/index"
    )
    add_master_arguments(parser)


def check_arguments(args: argparse.Namespace) -> str | None:
    """Flag combinations that would be ignored or cannot work: a usage error before anything runs."""
    if args.interval is not None and not args.follow:
        return "argument --interval: only used with --follow"
    if args.index_around_gaps and args.follow:
        return f"argument {AROUND_FLAG}: applies to a one-shot rebuild, not to --follow"
    if args.engine == "spark":
        if args.follow:
            return "argument --follow: needs the sequential engine, not --engine spark"
        return None
    if args.out is not None:
        return "argument --out: needs --engine spark"
    spark_only = spark_only_options(args)
    if args.range_mib is not None:
        spark_only = ", ".join(filter(None, [spark_only, "--range-mib"]))
    if spark_only:
        return f"--engine spark is needed for {spark_only}"
    return None


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        if not config.store_path_commit_log.is_dir():
            print(f"rebuild-index: no CommitLog directory at {config.store_path_commit_log}", file=sys.stderr)
            return 1
        writes_in_place = not (args.engine == "spark" and getattr(args, "out", None))
        targets = [config.index_dir] if args.only in (None, "index") else []
        if args.only in (None, "consumequeue"):
            targets.append(config.consume_queue_dir)
        refusal = _broker_writes_index(config.store_path_root_dir, targets) if writes_in_place else None
        if refusal is not None:
            print(f"rebuild-index: {refusal}", file=sys.stderr)
            print("rebuild-index: nothing was replaced", file=sys.stderr)
            return EXIT_NOT_REPLACED
        if abnormal_exit(config.store_path_root_dir):
            print(
                f"rebuild-index: warning: {config.abort_path} exists: a broker is running on this store or"
                " did not shut down cleanly; stop a running broker before rebuilding its index",
                file=sys.stderr,
            )
        do_index = args.only in (None, "index")
        do_cq = args.only in (None, "consumequeue")
        if args.engine == "spark":
            return run_spark_rebuild(args, config)
        started = time.perf_counter()
        if not args.follow and do_index and do_cq and _one_pass_possible(config):
            return _rebuild_in_one_pass(args, config, started)
        if not args.follow:
            outcome = 0
            if do_index:
                try:
                    builder = rebuild_index(config, around_gaps=args.index_around_gaps)
                except (ConfigError, StoreError, OSError) as exc:
                    print(f"rebuild-index: {exc}", file=sys.stderr)
                    print(
                        f"rebuild-index: nothing was replaced; {config.index_dir} is unchanged",
                        file=sys.stderr,
                    )
                    if do_cq:
                        # The queues come after the index and follow the same gap rule: not started.
                        print(
                            f"rebuild-index: {config.consume_queue_dir} was not rebuilt and is unchanged",
                            file=sys.stderr,
                        )
                    return EXIT_NOT_REPLACED
                elapsed = time.perf_counter() - started
                for gap in builder.gaps:
                    print(f"rebuild-index: warning: indexed around it: {gap.describe()}", file=sys.stderr)
                print(
                    f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records into "
                    f"{_count_files(config.index_dir)} index files in {elapsed:.2f} s"
                )
                outcome = report_after_swap("rebuild-index", config.index_dir, builder.after_swap)
            if do_cq and outcome != 0:
                print(
                    f"rebuild-index: {config.consume_queue_dir} was not rebuilt: finish the index first",
                    file=sys.stderr,
                )
            elif do_cq:
                started = time.perf_counter()
                try:
                    cq = rebuild_consume_queues(config, around_gaps=args.index_around_gaps)
                except (ConfigError, StoreError, OSError) as exc:
                    print(f"rebuild-index: {exc}", file=sys.stderr)
                    print(
                        f"rebuild-index: nothing was replaced; {config.consume_queue_dir} is unchanged",
                        file=sys.stderr,
                    )
                    # The index (when asked for) is already in place: only the queues are unfinished.
                    return EXIT_IN_PLACE_UNFINISHED if do_index else EXIT_NOT_REPLACED
                elapsed = time.perf_counter() - started
                for gap in cq.gaps:
                    print(
                        f"rebuild-index: warning: consume queues built around it: {gap.describe()}",
                        file=sys.stderr,
                    )
                print(
                    f"built {cq.entries_written} consume queue entries of {cq.records_read} records into "
                    f"{len(cq.queues_built)} queues in {elapsed:.2f} s"
                )
                outcome = report_after_swap("rebuild-index", config.consume_queue_dir, cq.after_swap)
            return outcome
        interval = args.interval if args.interval is not None else DEFAULT_INTERVAL
        return _follow(config, interval, do_index=do_index, do_cq=do_cq)
    except (ConfigError, StoreError, OSError) as exc:
        print(f"rebuild-index: {exc}", file=sys.stderr)
        return 1


def _one_pass_possible(config: StoreConfig) -> bool:
    """Whether both can be rebuilt in one pass: not when the consume queues' rebuild would refuse
    up front (a wrong geometry, an unreadable checkpoint); then the index is rebuilt alone first
    and the queues' refusal is reported after it, as ever."""
    try:
        queues_preflight(config)
    except (StoreError, OSError):
        return False
    return True


def _rebuild_in_one_pass(args: argparse.Namespace, config: StoreConfig, started: float) -> int:
    """Index and consume queues from one CommitLog pass (``store.reput.rebuild``), each swapped in
    when the pass completed: the index first, then the queues."""
    progress = WalkProgress("rebuild-index")  # on stderr: a bar on a terminal, a line every 10 s else
    try:
        try:
            builder, cq = rebuild_index_and_queues(
                config, around_gaps=args.index_around_gaps, progress=progress
            )
        finally:
            progress.finish()
    except QueuesNotReplaced as exc:
        print(f"rebuild-index: {exc}", file=sys.stderr)
        report_after_swap("rebuild-index", config.index_dir, exc.index.after_swap)
        print(
            f"rebuild-index: {config.consume_queue_dir} was not replaced and is unchanged",
            file=sys.stderr,
        )
        return EXIT_IN_PLACE_UNFINISHED
    except (ConfigError, StoreError, OSError) as exc:
        print(f"rebuild-index: {exc}", file=sys.stderr)
        print(f"rebuild-index: nothing was replaced; {config.index_dir} is unchanged", file=sys.stderr)
        print(f"rebuild-index: {config.consume_queue_dir} was not rebuilt and is unchanged", file=sys.stderr)
        return EXIT_NOT_REPLACED
    elapsed = time.perf_counter() - started
    for gap in builder.gaps:
        print(f"rebuild-index: warning: indexed around it: {gap.describe()}", file=sys.stderr)
        print(f"rebuild-index: warning: consume queues built around it: {gap.describe()}", file=sys.stderr)
    print(
        f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records into "
        f"{_count_files(config.index_dir)} index files in {elapsed:.2f} s"
    )
    print(
        f"built {cq.entries_written} consume queue entries of {cq.records_read} records into "
        f"{len(cq.queues_built)} queues in the same CommitLog pass"
    )
    outcome = report_after_swap("rebuild-index", config.index_dir, builder.after_swap)
    return report_after_swap("rebuild-index", config.consume_queue_dir, cq.after_swap) or outcome


def _broker_writes_index(store_root: Path, targets: list[Path]) -> str | None:
    """Why the store's own index (or consume queues) must not be rebuilt now, or None.

    A running broker keeps the files it maintains mapped and goes on writing the ones it has open:
    IndexFiles when it indexes (``messageIndexEnable=true``), consume queues always. A rebuild
    swapped in under it would receive none of its later entries (they go to the files moved aside
    and deleted), and ``--follow`` would be a second writer of the same files. A broker that does
    not index maps no IndexFile: rebuilding the index and following beside it is what this tool is
    for.
    """
    holder = broker_lock_holder(store_root)
    if holder is None:
        return None
    for target in targets:
        mapped = index_files_mapped_by(holder, target)
        if mapped:  # (None when its maps cannot be read: the abort warning then says what to do)
            return (
                f"a running broker (pid {holder}, holding {Path(store_root) / 'lock'}) maintains "
                f"{target}: it has {len(mapped)} file(s) of it mapped, e.g. {mapped[-1]}. Replacing or "
                "writing them under it loses every entry it writes afterwards; stop the broker first, "
                "or write a separate copy with --engine spark --out DIR"
            )
    return None


def _follow(config: StoreConfig, interval: float, *, do_index: bool, do_cq: bool) -> int:
    """Index and build consume queues behind a live CommitLog until SIGTERM or Ctrl-C."""
    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    builder = IndexBuilder(config, commitlog) if do_index else None
    cq = ConsumeQueueBuilder(config, commitlog) if do_cq else None
    # One walk feeds both, in the broker's order (consume queue, then index).
    reput = Reput(commitlog, [d for d in (cq, builder) if d is not None])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        reput.run_forever(stop, interval)
    except KeyboardInterrupt:
        pass
    finally:
        if builder is not None:
            builder.close()
        if cq is not None:
            cq.close()
        commitlog.close()
    if builder is not None:
        print(f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records")
    if cq is not None:
        print(f"built {cq.entries_written} consume queue entries of {cq.records_read} records")
    return 0


def _count_files(index_dir: Path) -> int | str:
    try:
        return len(os.listdir(index_dir))
    except OSError:
        return "?"
