"""``rmq-query rebuild-index --store DIR``: rebuild the IndexFiles from the CommitLog.

Once (the default): the new files are written beside ``index/`` and swapped in only when complete.
``--follow``: keep indexing behind a CommitLog that is still being written (never on a store whose
index a running broker maintains: two writers would corrupt it), until interrupted.
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
from store.config import ConfigError
from store.errors import StoreError
from store.index_builder import IndexBuilder, rebuild_index
from store.spark.command import ENGINES, add_master_arguments, run_spark_rebuild, spark_only_options

HELP = "rebuild a store's IndexFiles from its CommitLog (byte-identical to the broker's)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument(
        "--follow", action="store_true", help="index continuously behind a live CommitLog (until Ctrl-C)"
    )
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between polls with --follow")
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
            builder = rebuild_index(config)
            elapsed = time.perf_counter() - started
            print(
                f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records into "
                f"{len(list(config.index_dir.iterdir()))} index files in {elapsed:.2f} s"
            )
            return 0
        builder = IndexBuilder(config)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            builder.run_forever(stop, args.interval)
        except KeyboardInterrupt:
            pass
        finally:
            builder.close()
        print(f"indexed {builder.keys_indexed} keys of {builder.records_indexed} records")
        return 0
    except (ConfigError, StoreError, OSError) as exc:
        print(f"rebuild-index: {exc}", file=sys.stderr)
        return 1
