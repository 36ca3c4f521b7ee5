"""``rmq-query query-id``: mqadmin ``queryMsgById`` (view by offset id, 5.x unique-key fallback)."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin, addr_of
from clients.cli.arg_types import int_arg
from clients.cli.common import (
    EXIT_FOUND,
    add_body_dir_argument,
    add_output_arguments,
    print_consumer_trailer,
    report_error,
    run_query,
    start_query_parser,
    write_body_file,
)
from clients.errors import ClientError, UsageError
from clients.output import body_as_text, json_line, message_detail, message_record
from protocol.errors import MessageIdError, ProtocolError
from protocol.message_id import decode_offset_msg_id

HELP = "query a message by offset message id (mqadmin queryMsgById)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(
        parser,
        intro="The message is read from the broker whose address is inside the offset id. With -t (and a\n"
        "name server) a failed lookup falls back to a unique-key query over the last three days\n"
        "(or since -b), as mqadmin 5.x does.",
        namesrv_required=False,
    )
    parser.add_argument("-i", "--msgId", dest="msg_id", required=True, help="message id(s), comma separated")
    parser.add_argument("-t", "--topic", help="topic of the message (enables the unique-key fallback)")
    parser.add_argument("-c", "--cluster", help="only ask the brokers of this cluster in the fallback")
    parser.add_argument(
        "-b", "--beginTimestamp", dest="begin", type=int_arg, default=None, metavar="MS",
        help="begin timestamp of the unique-key fallback in ms (default: now - 3 days)",
    )  # fmt: skip
    add_body_dir_argument(parser)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_query("query-id", args, lambda admin, out, err: _query(admin, out, err, args))


async def _query(admin: QueryAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    topic = args.topic.strip() if args.topic else None
    status = EXIT_FOUND
    found = 0
    for msg_id in ids:
        try:
            msg = await admin.query_by_id(msg_id, topic, cluster=args.cluster, begin=args.begin)
        except (ClientError, ProtocolError) as exc:
            if len(ids) == 1:
                raise
            code = report_error("query-id", exc, as_json=args.json, out=out, err=err)
            status = status or code
            continue
        found += 1
        if args.json:
            out.write(json_line(message_record(msg, include_body=args.body)))
            continue
        path = write_body_file(args.body_dir, msg.msg_id, msg.body)
        body_text = body_as_text(msg.body) if args.body else None
        out.write(message_detail(msg, body_path=path, with_offset_id=True, body_text=body_text))
        await print_consumer_trailer(admin, msg, out, broker_addr=_id_addr(msg_id))
    if args.json and found:
        out.write(json_line({"type": "result", "count": found}))
    if not ids:
        return report_error(
            "query-id", UsageError("no message id given"), as_json=args.json, out=out, err=err
        )
    return status


def _id_addr(msg_id: str) -> str | None:
    """The broker address written in an offset id (None if it is not one)."""
    try:
        host, port, _ = decode_offset_msg_id(msg_id)
    except MessageIdError:
        return None
    return addr_of(host, port)
