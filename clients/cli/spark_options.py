"""Command-line glue for the pipeline: options shared by ``rebuild-index --engine spark`` and
``export-keys``, and the spark rebuild's run-and-report, so the store's command module only delegates.

Every failure becomes one line on stderr that says what failed and where, followed by the promise the
staging guarantees: the previous output was not replaced.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.cli.arg_types import positive_int
from clients.cli.rebuild_outcome import report_after_swap
from store.config.store_config import StoreConfig
from store.errors import StoreError
from store.spark.ranges import DEFAULT_RANGE_BYTES

ENGINES = ("sequential", "spark")


def add_master_arguments(parser: argparse.ArgumentParser) -> None:
    """``--master`` and ``--range-mib``: where Spark runs and how big a decode task's range is."""
    parser.add_argument(
        "--master",
        help="Spark master URL for --engine spark (default: local[*], embedded in this process)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the job (repeatable), e.g. spark.driver.memory=4g",
    )
    parser.add_argument(
        "--range-mib",
        type=positive_int,
        default=None,
        help=(
            "CommitLog bytes per Spark task, in MiB (default: the index rebuild sizes them by the"
            " CommitLog and the cores, a few tasks per core; the others"
            f" {DEFAULT_RANGE_BYTES // (1024 * 1024)})"
        ),
    )


def range_bytes(args: argparse.Namespace) -> int | None:
    """``--range-mib`` in bytes; None (each pipeline's own default) when not given."""
    if args.range_mib is None:
        return None
    return int(args.range_mib) * 1024 * 1024


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """The ``--spark-conf KEY=VALUE`` settings as a mapping."""
    conf: dict[str, str] = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StoreError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def spark_only_options(args: argparse.Namespace) -> str:
    """The Spark-only flags given (``--master``, ``--spark-conf``), named for a refusal; "" if none.

    Without ``--engine spark`` they would be silently ignored: an operator who typed
    ``--master spark://...`` and forgot the engine would get a one-process run instead.
    """
    given = [flag for flag, value in (("--master", args.master), ("--spark-conf", args.spark_conf)) if value]
    return ", ".join(given)


def fail(command: str, exc: BaseException, target: Path) -> int:
    """Print why ``command`` failed and that ``target`` was left as it was; the exit code."""
    print(f"{command}: {exc}", file=sys.stderr)
    print(f"{command}: nothing was replaced; {target} is unchanged", file=sys.stderr)
    return 1


def run_spark_rebuild(args: argparse.Namespace, config: StoreConfig) -> int:
    """``rebuild-index --engine spark``: rebuild, then report keys, files, records and time.

    The ConsumeQueues are rebuilt too (after the index) when the store's own directories are the
    target (no ``--out``) and ``--only index`` was not given.
    """
    from store.spark.rebuild import rebuild_index_spark
    from store.spark.session import SparkUnavailableError

    only = getattr(args, "only", None)
    out = Path(args.out) if getattr(args, "out", None) else None
    outcome = 0
    if only != "consumequeue":
        target = out if out is not None else config.index_dir
        try:
            result = rebuild_index_spark(
                config,
                master=args.master,
                spark_conf=spark_conf(args),
                out_dir=out,
                range_bytes=range_bytes(args),
                around_gaps=args.index_around_gaps,
            )
        except (StoreError, SparkUnavailableError, OSError) as exc:
            outcome = fail("rebuild-index", exc, target)
            if out is None and only != "index":
                # The queues come after the index and follow the same gap rule: not started.
                print(
                    f"rebuild-index: {config.consume_queue_dir} was not rebuilt and is unchanged",
                    file=sys.stderr,
                )
            return outcome
        for warning in result.warnings:
            print(f"rebuild-index: warning: {warning}", file=sys.stderr)
        for gap in result.gaps:
            print(f"rebuild-index: warning: indexed around it: {gap.describe()}", file=sys.stderr)
        mib = result.bytes_scanned / (1024 * 1024)
        print(
            f"indexed {result.keys_indexed} keys of {result.records} records ({mib:.1f} MiB of CommitLog) "
            f"into {len(result.files)} index files in {result.out_dir} in {result.seconds:.2f} s"
        )
        print("stages: " + ", ".join(f"{name} {secs:.2f} s" for name, secs in result.stage_seconds.items()))
        outcome = report_after_swap("rebuild-index", target, result.after_swap)
    if out is None and only != "index" and outcome == 0:
        return _run_spark_cq(args, config)
    return outcome


def _run_spark_cq(args: argparse.Namespace, config: StoreConfig) -> int:
    from store.spark.consume_queue_rebuild import rebuild_consume_queues_spark
    from store.spark.session import SparkUnavailableError

    try:
        cq = rebuild_consume_queues_spark(
            config,
            master=args.master,
            spark_conf=spark_conf(args),
            range_bytes=range_bytes(args),
            around_gaps=args.index_around_gaps,
        )
    except (StoreError, SparkUnavailableError, OSError) as exc:
        return fail("rebuild-index", exc, config.consume_queue_dir)
    for warning in cq.warnings:
        print(f"rebuild-index: warning: {warning}", file=sys.stderr)
    for gap in cq.gaps:
        print(f"rebuild-index: warning: consume queues built around it: {gap.describe()}", file=sys.stderr)
    print(
        f"built {cq.entries} consume queue entries of {cq.records} records into {cq.queues} queues "
        f"in {cq.seconds:.2f} s"
    )
    return 0
