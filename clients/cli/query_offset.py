"""``rmq-query query-offset``: mqadmin ``queryMsgByOffset`` (the message at a queue offset).

One pull of one message at the offset; found, it is printed as ``queryMsgById`` prints (body
written to the body directory, the consumer-group trailer); anything else prints nothing on standard
output (as mqadmin) and exits 1 with the pull's status on standard error.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.arg_types import int_arg
from clients.cli.common import (
    EXIT_FOUND,
    EXIT_NO_RESULT,
    add_body_dir_argument,
    add_output_arguments,
    print_consumer_trailer,
    run_query,
    start_query_parser,
    write_body_file,
)
from clients.message_queue import MessageQueue, PullStatus
from clients.output import body_as_text, json_line, message_detail, message_record

HELP = "print the message at a queue offset (mqadmin queryMsgByOffset)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int_arg, required=True, help="queue id")
    parser.add_argument("-o", "--offset", type=int_arg, required=True, help="queue offset")
    add_body_dir_argument(parser)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("query-offset", args, lambda admin, out, err: _query(admin, out, err, args))


async def _query(admin: QueryAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    mq = MessageQueue(args.topic.strip(), args.broker_name.strip(), args.queue_id)
    result = await admin.pull(mq, "*", args.offset, 1)
    if result.status is not PullStatus.FOUND or not result.messages:
        err.write(
            f"rmq-query query-offset: no message at offset {args.offset} of {mq} "
            f"(status {result.status.value}, next offset {result.next_begin_offset})\n"
        )
        if args.json:
            out.write(json_line({"type": "result", "count": 0, "status": result.status.value}))
        return EXIT_NO_RESULT
    msg = result.messages[0]
    if args.json:
        out.write(json_line(message_record(msg, include_body=args.body)))
        out.write(json_line({"type": "result", "count": 1, "status": result.status.value}))
        return EXIT_FOUND
    path = write_body_file(args.body_dir, msg.msg_id, msg.body)
    body = body_as_text(msg.body) if args.body else None
    out.write(message_detail(msg, body_path=path, with_offset_id=True, body_text=body))
    await print_consumer_trailer(admin, msg, out)
    return EXIT_FOUND
