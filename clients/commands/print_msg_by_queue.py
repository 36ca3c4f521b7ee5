"""``rmq-query print-msg-by-queue``: mqadmin ``printMsgByQueue`` (one queue, same flags, same text).

Like mqadmin it prints nothing unless ``-p true``; ``-f true`` counts the messages per tag.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.commands.common import (
    EXIT_CODES_EPILOG,
    EXIT_FOUND,
    add_connection_arguments,
    add_output_arguments,
    int_arg,
    report_error,
    run_query,
)
from clients.commands.pull_tools import (
    add_walk_arguments,
    body_text,
    java_parse_boolean,
    json_lines_for,
    mqadmin_timestamp,
    queue_range,
    walk,
)
from clients.errors import ClientError
from clients.message_queue import MessageQueue, PullStatus
from clients.output import json_line, print_msg_line, tag_count_lines
from protocol.errors import ProtocolError

HELP = "print the messages of one queue (mqadmin printMsgByQueue)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES_EPILOG
    add_connection_arguments(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int_arg, required=True, help="queue id")
    add_walk_arguments(parser)
    parser.add_argument(
        "-p", "--printMsg", dest="print_msg", metavar="BOOL", help="print messages: true | false (default)"
    )
    parser.add_argument(
        "-d", "--printBody", dest="print_body", metavar="BOOL", help="print bodies: true | false (default)"
    )
    parser.add_argument(
        "-f", "--calculate", dest="calculate", metavar="BOOL", help="count by tag: true | false (default)"
    )
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("print-msg-by-queue", args, lambda admin, out, err: _print(admin, out, err, args))


async def _print(admin: QueryAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    print_msg = java_parse_boolean(args.print_msg)
    print_body = java_parse_boolean(args.print_body)
    calculate = java_parse_boolean(args.calculate)
    mq = MessageQueue(args.topic.strip(), args.broker_name.strip(), args.queue_id)
    begin = mqadmin_timestamp(args.begin) if args.begin is not None else None
    end = mqadmin_timestamp(args.end) if args.end is not None else None
    span = await queue_range(admin, mq, begin, end)
    tags: dict[str, int] = {}
    count = 0
    try:
        async for result in walk(admin, span, args.sub_expression.strip()):
            if result.status is not PullStatus.FOUND:
                break
            count += len(result.messages)
            if calculate:
                for msg in result.messages:
                    tag = msg.tags
                    if tag is not None and tag.strip():  # StringUtils.isNotBlank
                        tags[tag] = tags.get(tag, 0) + 1
            if args.json:
                if print_msg:
                    out.write(json_lines_for(result, mq.broker_name, args.body))
            elif print_msg:
                for msg in result.messages:
                    text = body_text(msg.body, args.charset) if print_body else "NOT PRINT BODY"
                    out.write(print_msg_line(msg, mq.broker_name, text))
    except (ClientError, ProtocolError) as exc:
        report_error("print-msg-by-queue", exc, as_json=args.json, out=out, err=err)
    if args.json:
        summary: dict[str, object] = {"type": "result", "count": count}
        if calculate:
            summary["tags"] = tags
        out.write(json_line(summary))
    elif calculate:
        out.write(tag_count_lines(tags))
    return EXIT_FOUND
