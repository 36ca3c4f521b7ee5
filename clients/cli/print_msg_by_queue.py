"""``rmq-query print-msg-by-queue``: mqadmin ``printMsgByQueue`` (one queue, same flags, same text).

Like mqadmin it prints nothing unless ``-p true``; ``-f true`` counts the messages per tag.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.arg_types import int_arg
from clients.cli.common import EXIT_FOUND, add_output_arguments, report_error, run_query, start_query_parser
from clients.cli.pull_tools import (
    add_boolean_argument,
    add_walk_arguments,
    queue_range,
    time_range,
    walk,
    write_messages,
)
from clients.errors import ClientError
from clients.message_queue import MessageQueue, PullStatus
from clients.output import json_line, tag_count_lines
from protocol.errors import ProtocolError

HELP = "print the messages of one queue (mqadmin printMsgByQueue)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int_arg, required=True, help="queue id")
    add_walk_arguments(parser)
    add_boolean_argument(parser, "-p", "--printMsg", "print_msg", "print messages", default=False)
    add_boolean_argument(parser, "-d", "--printBody", "print_body", "print bodies", default=False)
    add_boolean_argument(parser, "-f", "--calculate", "calculate", "count by tag", default=False)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("print-msg-by-queue", args, lambda admin, out, err: _print(admin, out, err, args))


async def _print(admin: QueryAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    mq = MessageQueue(args.topic.strip(), args.broker_name.strip(), args.queue_id)
    begin, end = time_range(args)
    span = await queue_range(admin, mq, begin, end)
    tags: dict[str, int] = {}
    count = 0
    try:
        async for result in walk(admin, span, args.sub_expression.strip()):
            if result.status is not PullStatus.FOUND:
                break
            count += len(result.messages)
            if args.calculate:
                for msg in result.messages:
                    tag = msg.tags
                    if tag is not None and tag.strip():  # StringUtils.isNotBlank
                        tags[tag] = tags.get(tag, 0) + 1
            if args.print_msg:
                write_messages(out, result, mq.broker_name, args)
    except (ClientError, ProtocolError) as exc:
        report_error("print-msg-by-queue", exc, as_json=args.json, out=out, err=err)
    if args.json:
        summary: dict[str, object] = {"type": "result", "count": count}
        if args.calculate:
            summary["tags"] = tags
        out.write(json_line(summary))
    elif args.calculate:
        out.write(tag_count_lines(tags))
    return EXIT_FOUND
