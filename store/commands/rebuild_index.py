"""``rmq-query rebuild-index --store DIR``: rebuild the IndexFiles and ConsumeQueues from the CommitLog.

Once (the default): the new files are written beside ``index/`` and ``consumequeue/`` and each
directory is swapped in only when complete. ``--follow``: keep indexing and building consume queues
behind a CommitLog that is still being written (never on a store a running broker maintains: two
writers would corrupt it), until interrupted. ``--only`` limits the work to one of the two.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

from store.checkpoint import abnormal_exit
from store.commands.store_options import add_store_arguments, config_from_args
from store.commitlog import CommitLog
from store.config import ConfigError, StoreConfig
from store.consume_queue_builder import ConsumeQueueBuilder, rebuild_consume_queues
from store.errors import StoreError
from store.index_builder import IndexBuilder, rebuild_index
from store.spark.command import ENGINES, add_master_arguments, run_spark_rebuild, spark_only_options

HELP = "rebuild a store's IndexFiles and ConsumeQueues from its CommitLog (byte-identical to the broker's)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument(
        "--follow", action="store_true", help="index continuously behind a live CommitLog (until Ctrl-C)"
    )
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between polls with --follow")
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


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        if not config.store_path_commit_log.is_dir():
            print(f"rebuild-index: no CommitLog directory at {config.store_path_commit_log}", file=sys.stderr)
            return 1
        if abnormal_exit(config.store_path_root_dir):
            print(
                f"rebuild-index: warning: {config.abort_path} exists: a broker is running on this store or"
                " did not shut down cleanly; stop a running broker before rebuilding its index",
                file=sys.stderr,
            )
        do_index = args.only in (None, "index")
        do_cq = args.only in (None, "consumequeue")
        if args.engine == "spark":
            if args.follow:
                print("rebuild-index: --follow needs the sequential engine", file=sys.stderr)
                return 1
            return run_spark_rebuild(args, config)
        if args.out is not None:
            print("rebuild-index: --out needs --engine spark", file=sys.stderr)
            return 1
        if spark_only_options(args):
            print(f"rebuild-index: --engine spark is needed for {spark_only_options(args)}", file=sys.stderr)
            return 1
        started = time.perf_counter()
        if not args.follow:
            if do_index:
                builder = rebuild_index(config)
                elapsed = time.perf_counter() - started
                print(
                    f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records into "
                    f"{len(list(config.index_dir.iterdir()))} index files in {elapsed:.2f} s"
                )
            if do_cq:
                started = time.perf_counter()
                cq = rebuild_consume_queues(config)
                elapsed = time.perf_counter() - started
                print(
                    f"built {cq.entries_written} consume queue entries of {cq.records_read} records into "
                    f"{len(cq.queues_built)} queues in {elapsed:.2f} s"
                )
            return 0
        return _follow(config, args.interval, do_index=do_index, do_cq=do_cq)
    except (ConfigError, StoreError, OSError) as exc:
        print(f"rebuild-index: {exc}", file=sys.stderr)
        return 1


def _follow(config: StoreConfig, interval: float, *, do_index: bool, do_cq: bool) -> int:
    """Index and build consume queues behind a live CommitLog until SIGTERM or Ctrl-C."""
    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    builder = IndexBuilder(config, commitlog) if do_index else None
    cq = ConsumeQueueBuilder(config, commitlog) if do_cq else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set():
            commitlog.refresh()
            read = builder.run_once() if builder is not None else 0
            read += cq.run_once() if cq is not None else 0
            if read == 0:
                if builder is not None:
                    builder.flush()
                if cq is not None:
                    cq.flush()
                stop.wait(interval)
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
