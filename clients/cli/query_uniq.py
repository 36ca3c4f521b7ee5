"""``rmq-query query-uniq``: mqadmin ``queryMsgByUniqueKey`` (first match, or all with ``-a``)."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.common import (
    EXIT_FOUND,
    add_body_dir_argument,
    add_output_arguments,
    print_consumer_trailer,
    run_query,
    start_query_parser,
    write_body_file,
)
from clients.output import body_as_text, json_line, message_detail, message_record

HELP = "query messages by unique key (mqadmin queryMsgByUniqueKey)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic of the message")
    parser.add_argument("-i", "--msgId", dest="msg_id", required=True, help="unique key (client message id)")
    parser.add_argument(
        "-a", "--showAll", dest="show_all", action="store_true", help="print every match (at most 32)"
    )
    parser.add_argument("-c", "--cluster", help="only ask the brokers of this cluster")
    add_body_dir_argument(parser)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("query-uniq", args, lambda admin, out, err: _query(admin, out, args))


async def _query(admin: QueryAdmin, out: TextIO, args: argparse.Namespace) -> int:
    messages = await admin.query_by_unique_key(args.topic.strip(), args.msg_id.strip(), cluster=args.cluster)
    shown = messages if args.show_all else messages[:1]
    for index, msg in enumerate(shown):
        if args.json:
            out.write(json_line(message_record(msg, include_body=args.body)))
            continue
        path = write_body_file(args.body_dir, msg.msg_id, msg.body, index)
        body_text = body_as_text(msg.body) if args.body else None
        out.write(message_detail(msg, body_path=path, with_offset_id=False, body_text=body_text))
        await print_consumer_trailer(admin, msg, out)
    if args.json:
        out.write(json_line({"type": "result", "count": len(shown), "matched": len(messages)}))
    return EXIT_FOUND
