"""``rmq-query print-msg``: mqadmin ``printMsg`` (every queue of a topic, same flags, same text)."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.common import (
    EXIT_FOUND,
    add_output_arguments,
    report_error,
    run_query,
    start_query_parser,
)
from clients.cli.pull_tools import (
    add_boolean_argument,
    add_walk_arguments,
    queue_range,
    time_range,
    walk,
    write_messages,
)
from clients.errors import ClientError
from clients.message_queue import PullStatus
from clients.output import QUEUE_SEPARATOR, json_line
from protocol.errors import ProtocolError

HELP = "print the messages of every queue of a topic (mqadmin printMsg)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    add_walk_arguments(parser)
    add_boolean_argument(parser, "-d", "--printBody", "print_body", "print bodies", default=True)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("print-msg", args, lambda admin, out, err: _print(admin, out, err, args))


async def _print(admin: QueryAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    topic = args.topic.strip()
    sub_expression = args.sub_expression.strip()
    begin, end = time_range(args)
    count = 0
    for mq in await admin.fetch_subscribe_message_queues(topic):
        span = await queue_range(admin, mq, begin, end)
        if not args.json:
            out.write(f"minOffset={span.min_offset}, maxOffset={span.max_offset}, {mq}\n")
        try:
            async for result in walk(admin, span, sub_expression):
                if result.status is PullStatus.FOUND:
                    count += len(result.messages)
                    write_messages(out, result, mq.broker_name, args)
                elif result.status is PullStatus.NO_MATCHED_MSG:
                    if not args.json:
                        out.write(
                            f"{mq} no matched msg. status={result.status.value}, "
                            f"offset={result.next_begin_offset}\n"
                        )
                else:
                    if not args.json:
                        out.write(
                            f"{mq} print msg finished. status={result.status.value}, "
                            f"offset={result.next_begin_offset}\n"
                        )
                    break
        except (ClientError, ProtocolError) as exc:
            # mqadmin prints the exception and goes on with the next queue.
            report_error("print-msg", exc, as_json=args.json, out=out, err=err)
        if not args.json:
            out.write(QUEUE_SEPARATOR + "\n")
    if args.json:
        out.write(json_line({"type": "result", "count": count}))
    return EXIT_FOUND
