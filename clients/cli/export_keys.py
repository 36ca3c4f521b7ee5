"""``rmq-query export-keys --store DIR --out PATH [--engine spark]``: the key index as Parquet.

One row per index entry (topic, key, key kind, unique id, offset msgId, CommitLog offset, size,
store time, tags, queue id/offset), for analytics with any Parquet reader. The local engine (pyarrow)
streams the CommitLog in one process; ``--engine spark`` decodes ranges in parallel on Spark
(embedded ``local[*]`` or ``--master URL``). ``PATH`` becomes a directory of Parquet files, replaced
only when the export is complete.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.cli.spark_options import add_master_arguments, fail, range_bytes, spark_conf, spark_only_options
from clients.cli.store_options import add_store_arguments, config_from_args
from store.config.store_config import ConfigError
from store.errors import StoreError

HELP = "export a store's key index (every topic#key entry) as a Parquet dataset"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="Parquet dataset directory to write")
    parser.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="local: one process with pyarrow (default); spark: parallel on Spark",
    )
    add_master_arguments(parser)


def check_arguments(args: argparse.Namespace) -> str | None:
    """Spark-only flags without ``--engine spark`` would be ignored: a usage error."""
    if args.engine != "spark" and spark_only_options(args):
        return f"--engine spark is needed for {spark_only_options(args)}"
    return None


def run(args: argparse.Namespace) -> int:
    from store.spark.export import export_keys_local, export_keys_spark
    from store.spark.session import SparkUnavailableError

    try:
        config = config_from_args(args)
        if not config.store_path_commit_log.is_dir():
            print(f"export-keys: no CommitLog directory at {config.store_path_commit_log}", file=sys.stderr)
            return 1
        if args.engine == "spark":
            result = export_keys_spark(
                config,
                args.out,
                master=args.master,
                spark_conf=spark_conf(args),
                range_bytes=range_bytes(args),
            )
        else:
            result = export_keys_local(config, args.out, range_bytes=range_bytes(args))
    except (ConfigError, StoreError, SparkUnavailableError, OSError) as exc:
        return fail("export-keys", exc, args.out)
    for warning in result.warnings:
        print(f"export-keys: warning: {warning}", file=sys.stderr)
    print(
        f"exported {result.rows} keys ({result.bytes_scanned / (1024 * 1024):.1f} MiB of CommitLog) "
        f"to {result.out} in {result.seconds:.2f} s"
    )
    return 0
