"""``rmq-query bench``: drive a server with real lookups and report throughput, latency and errors."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from collections.abc import Callable

from clients.cli.arg_types import duration_arg, first_addr_arg, positive_int_arg, timeout_arg
from clients.cli.common import EXIT_FOUND, EXIT_SERVER_ERROR, EXIT_UNREACHABLE, EXIT_USAGE, output_closed
from clients.errors import ClientError
from clients.load import (
    MAX_CONNECTIONS,
    MAX_DEPTH,
    MAX_IN_FLIGHT,
    MAX_REQUESTS,
    MAX_SECONDS,
    RequestFactory,
    key_factory,
    mixed_factory,
    pull_factory,
    run_load,
    search_factory,
    view_factory,
)
from clients.output import json_line
from clients.samples import (
    DEFAULT_SAMPLE_LIMIT,
    SampleError,
    Samples,
    read_id_list,
    read_key_list,
    sample_store,
)
from protocol.codes import SerializeType

HELP = "load generator: VIEW_MESSAGE_BY_ID / QUERY_MESSAGE traffic sampled from a store, bounded"

EPILOG = f"""Requests ask for things that exist: offsets and keys sampled from --store (its CommitLog),
or read from --keys (TOPIC KEY per line) and --ids (offset message ids per line). Views are sent to
-n ADDR itself, whatever host the ids name. The run stops at --requests or --seconds, and never
goes past {MAX_REQUESTS} requests or {MAX_SECONDS:g} s.

exit codes:
  0  every request answered (found or not found)
  2  usage error, or no usable samples
  3  server unreachable
  4  some requests failed (error codes, timeouts, lost connections)
  141  standard output closed before the report was written"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    default_addr = os.environ.get("NAMESRV_ADDR")
    parser.add_argument(
        "-n", "--namesrv", dest="addr", type=first_addr_arg, default=default_addr,
        required=not default_addr, metavar="ADDR",
        help="server host:port; of a list h:p;h:p the first (default: $NAMESRV_ADDR, like the queries)",
    )  # fmt: skip
    parser.add_argument(
        "--kind",
        choices=("view", "key", "mixed", "pull", "search"),
        default="view",
        help="request mix (pull: PULL_MESSAGE of 32, search: SEARCH_OFFSET_BY_TIMESTAMP)",
    )
    parser.add_argument("--connections", type=positive_int_arg, default=1, metavar="C", help="connections")
    parser.add_argument(
        "--depth", type=positive_int_arg, default=1, metavar="D", help="in flight per connection"
    )
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--requests", type=positive_int_arg, metavar="N", help="stop after N requests")
    budget.add_argument("--seconds", type=duration_arg, metavar="S", help="stop after S seconds")
    parser.add_argument("--store", metavar="DIR", help="store directory to sample offsets and keys from")
    parser.add_argument(
        "--config", metavar="FILE",
        help="the store's broker.conf: CommitLog path and file size (default: --store/commitlog, size"
        " of its first file); --store, if given, is the store root",
    )  # fmt: skip
    parser.add_argument(
        "--sample-limit", type=positive_int_arg, default=DEFAULT_SAMPLE_LIMIT, metavar="N",
        help=f"records of the store to sample at most (default {DEFAULT_SAMPLE_LIMIT})",
    )  # fmt: skip
    parser.add_argument("--keys", metavar="FILE", help="TOPIC KEY per line, for key queries")
    parser.add_argument("--ids", metavar="FILE", help="offset message ids per line, for views")
    parser.add_argument(
        "--max-num", type=positive_int_arg, default=64, metavar="N", help="maxNum of key queries"
    )
    parser.add_argument(
        "--timeout", type=timeout_arg, default=5.0, metavar="SECONDS", help="per-request timeout"
    )
    parser.add_argument(
        "--serialize", choices=("json", "rocketmq"), default="json", help="header serialization"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed for sampling")
    parser.add_argument(
        "--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
        help="event loop of the generator (auto: uvloop when installed)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")


def _samples(args: argparse.Namespace) -> Samples:
    samples = Samples()
    if args.store or args.config:
        samples = sample_store(args.store, config_path=args.config, limit=args.sample_limit)
    if args.keys:
        samples.keys = read_key_list(args.keys)
    if args.ids:
        samples.offsets = read_id_list(args.ids)
    if args.kind in ("view", "mixed") and not samples.offsets:
        raise SampleError("--kind view/mixed needs offsets: give --store (or --config) or --ids")
    if args.kind in ("pull", "search") and not samples.positions:
        raise SampleError("--kind pull/search needs queue positions: give --store (or --config)")
    if args.kind in ("key", "mixed") and not samples.keys:
        raise SampleError("--kind key/mixed needs keys: give --store (with keyed messages) or --keys")
    return samples


def _factory(args: argparse.Namespace, samples: Samples, rng: random.Random) -> RequestFactory:
    if args.kind == "view":
        return view_factory(samples.offsets, rng)
    if args.kind == "key":
        return key_factory(samples.keys, rng, args.max_num)
    if args.kind == "pull":
        return pull_factory(samples.positions, rng)
    if args.kind == "search":
        return search_factory(samples.positions, rng)
    return mixed_factory(view_factory(samples.offsets, rng), key_factory(samples.keys, rng, args.max_num))


def loop_factory_for(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory if asked for (or installed, for ``auto``), else None (asyncio's own)."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return None
    return uvloop.new_event_loop


def run(args: argparse.Namespace) -> int:
    err = sys.stderr
    if (
        args.connections > MAX_CONNECTIONS
        or args.depth > MAX_DEPTH
        or args.connections * args.depth > MAX_IN_FLIGHT
    ):
        err.write(
            f"rmq-query bench: at most {MAX_CONNECTIONS} connections, {MAX_DEPTH} in flight on each"
            f" and {MAX_IN_FLIGHT} in flight in all\n"
        )
        return EXIT_USAGE
    try:
        samples = _samples(args)
    except SampleError as exc:
        err.write(f"rmq-query bench: {exc}\n")
        return EXIT_USAGE
    try:
        loop_factory = loop_factory_for(args.loop)
    except ImportError:
        err.write("rmq-query bench: --loop uvloop needs the uvloop package (pip install uvloop)\n")
        return EXIT_USAGE
    rng = random.Random(args.seed)
    serialize = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            report = runner.run(
                run_load(
                    args.addr,
                    _factory(args, samples, rng),
                    kind=args.kind,
                    connections=args.connections,
                    depth=args.depth,
                    requests=args.requests,
                    seconds=args.seconds,
                    timeout=args.timeout,
                    serialize_type=serialize,
                )
            )
    except ClientError as exc:
        err.write(f"rmq-query bench: {exc}\n")
        return EXIT_UNREACHABLE
    try:
        sys.stdout.write(json_line(report.to_dict()) if args.json else report.format_text())
        sys.stdout.flush()
    except BrokenPipeError:
        return output_closed(sys.stdout)
    return EXIT_SERVER_ERROR if report.errors else EXIT_FOUND
