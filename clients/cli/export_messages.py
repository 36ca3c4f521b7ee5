"""``rmq-query export --store DIR --out PATH --format parquet|jsonl``: a store's messages as data.

One row per stored message with the columns of ``spark.read.format("rocketmq")``
(``docs/spark-tables.md``), optionally only some topics (``--topic``, read through the ConsumeQueues)
and a store-time window (``--begin`` / ``--end``, inclusive). The sequential engine (default) runs
the read tasks one by one in this process; ``--engine spark`` runs the same tasks on Spark. ``PATH``
becomes a directory of Parquet or JSON-lines files, replaced only when the export is complete.
``export-keys`` (the key index) is a separate command and unchanged.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from clients.cli.spark_options import add_master_arguments, fail, range_bytes, spark_conf, spark_only_options
from store.config.store_config import ConfigError
from store.errors import StoreError

HELP = "export a store's messages (one row per message, bodies inflated) as Parquet or JSON lines"


def time_arg(text: str) -> int:
    """A store time: milliseconds since the epoch, or an ISO 8601 date-time (UTC unless it says)."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected milliseconds since the epoch or an ISO date-time (2026-11-28T20:00:00Z), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        action="append",
        required=True,
        metavar="DIR_OR_CONF",
        help="a store directory or its broker.conf (repeatable: several brokers, one brokerName column)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write")
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--topic", action="append", help="only this topic (repeatable)")
    parser.add_argument("--begin", type=time_arg, help="store time from (ms or ISO date-time, inclusive)")
    parser.add_argument("--end", type=time_arg, help="store time up to (ms or ISO date-time, inclusive)")
    parser.add_argument(
        "--key",
        action="append",
        help="only messages whose KEYS hold this key (repeatable: any of them), found through the"
        " IndexFiles (rolled-back transaction records, which the broker does not index, left out)",
    )
    parser.add_argument(
        "--no-index", action="store_true", help="with --key, read and check every record instead of the index"
    )
    parser.add_argument(
        "--columns", help="comma-separated columns (default: all; without body, none is read)"
    )
    parser.add_argument(
        "--no-consume-queues",
        action="store_true",
        help="with --topic, walk the whole CommitLog instead of the topic's consume queues (also returns"
        " prepared and rolled-back transaction records, which no queue holds)",
    )
    parser.add_argument(
        "--engine",
        choices=("sequential", "spark"),
        default="sequential",
        help="sequential: one process (default); spark: the same read tasks in parallel on Spark",
    )
    add_master_arguments(parser)


def check_arguments(args: argparse.Namespace) -> str | None:
    if args.engine != "spark" and spark_only_options(args):
        return f"--engine spark is needed for {spark_only_options(args)}"
    if any(not k or " " in k for k in args.key or []):
        return "--key takes one key without spaces (the broker splits KEYS on spaces); repeat it for more"
    if args.begin is not None and args.end is not None and args.begin > args.end:
        return f"--begin {args.begin} is after --end {args.end}"
    return None


def run(args: argparse.Namespace) -> int:
    from store.spark.message_export import export_messages_local, export_messages_spark
    from store.spark.message_rows import RowFilter, parse_columns
    from store.spark.session import SparkUnavailableError

    try:
        columns = parse_columns(args.columns)
    except ValueError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    topics = [t for t in (args.topic or []) if t.strip()] or None
    use_queues = not args.no_consume_queues
    keys = frozenset(args.key) if args.key else None
    paths = [str(Path(p).expanduser()) for p in args.store]
    try:
        if args.engine == "spark":
            try:
                result = export_messages_spark(
                    paths,
                    args.out,
                    args.format,
                    columns=columns,
                    topics=topics,
                    begin=args.begin,
                    end=args.end,
                    use_queues=use_queues,
                    keys=keys,
                    use_index=not args.no_index,
                    master=args.master,
                    spark_conf=spark_conf(args),
                    range_bytes=range_bytes(args),
                )
            except ImportError as exc:
                print(
                    f"export: --engine spark needs PySpark >= 4.1 (its Python data sources): {exc}",
                    file=sys.stderr,
                )
                return 1
        else:
            row_filter = RowFilter(
                None if topics is None else frozenset(topics),
                args.begin,
                args.end,
                queued_only=topics is not None and use_queues,
                keys=keys,
                indexed_only=keys is not None and not args.no_index,
            )
            result = export_messages_local(
                paths,
                args.out,
                args.format,
                columns=columns,
                row_filter=row_filter,
                range_bytes=range_bytes(args),
            )
    except (ConfigError, StoreError, SparkUnavailableError, OSError) as exc:
        return fail("export", exc, args.out)
    except Exception as exc:  # a Spark job's failure arrives as a Py4J/Spark error: one line, not a trace
        if args.engine != "spark":
            raise
        return fail("export", RuntimeError(spark_failure(exc)), args.out)
    for warning in result.warnings:
        print(f"export: warning: {warning}", file=sys.stderr)
    print(
        f"exported {result.rows} messages from {result.tasks} read tasks to {result.out}"
        f" in {result.seconds:.2f} s"
    )
    return 0


def spark_failure(exc: BaseException) -> str:
    """The line of a Spark failure that says what went wrong: our own error raised in a task (a
    corrupt record, a queue naming no record) when there is one, else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if "CorruptRecordError:" in line or "PipelineError:" in line or "ValueError:" in line:
            return line.split("Error: ", 1)[1]
    return lines[0] if lines else type(exc).__name__
