"""``rmq-query query-key``: mqadmin ``queryMsgByKey`` (same flags, same table)."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import DEFAULT_KEY_MAX_NUM, LONG_MAX, QueryAdmin
from clients.cli.arg_types import int_arg, positive_int_arg
from clients.cli.common import EXIT_FOUND, add_output_arguments, run_query, start_query_parser
from clients.output import body_as_text, json_line, key_table, message_record

HELP = "query messages by key (mqadmin queryMsgByKey)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    parser.add_argument(
        "-b", "--beginTimestamp", dest="begin", type=int_arg, default=0, metavar="MS",
        help="begin timestamp in ms (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "-e", "--endTimestamp", dest="end", type=int_arg, default=LONG_MAX, metavar="MS",
        help="end timestamp in ms (default Long.MAX_VALUE)",
    )  # fmt: skip
    parser.add_argument(
        "-m", "--maxNum", dest="max_num", type=positive_int_arg, default=DEFAULT_KEY_MAX_NUM, metavar="N",
        help=f"maximum number of messages per broker (default {DEFAULT_KEY_MAX_NUM})",
    )  # fmt: skip
    parser.add_argument("-c", "--cluster", help="only ask the brokers of this cluster")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("query-key", args, lambda admin, out, err: _query(admin, out, args))


async def _query(admin: QueryAdmin, out: TextIO, args: argparse.Namespace) -> int:
    result = await admin.query_by_key(
        args.topic.strip(), args.key.strip(), args.max_num, args.begin, args.end, cluster=args.cluster
    )
    if args.json:
        for msg in result.messages:
            out.write(json_line(message_record(msg, include_body=args.body)))
        summary: dict[str, object] = {
            "type": "result",
            "count": len(result.messages),
            "indexLastUpdateTimestamp": result.index_last_update_timestamp,
        }
        if result.errors:  # brokers that failed while others answered (absent when all answered)
            summary["brokerErrors"] = [{"brokerAddr": addr, "error": str(exc)} for addr, exc in result.errors]
        out.write(json_line(summary))
        return EXIT_FOUND
    out.write(key_table(result.messages))
    if args.body:
        for msg in result.messages:
            out.write(f"\n{'Message ID:':<20} {msg.msg_id}\n{'Message Body:':<20} {body_as_text(msg.body)}\n")
    return EXIT_FOUND
