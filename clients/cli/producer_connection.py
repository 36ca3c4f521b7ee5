"""``rmq-query producer-connection``: mqadmin ``producerConnection`` (a group's online producers).

mqadmin's text: a numbered row per producer (client id, address, language, version), asked of the
broker of ``-t``'s route. No producer online exits 1 (mqadmin: a stack trace).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.common import EXIT_FOUND, EXIT_NO_RESULT, start_query_parser
from clients.cli.group_common import name_arg, run_group
from clients.errors import ClientError
from clients.group_admin import NO_PRODUCER_MESSAGE, GroupAdmin
from clients.group_output import producer_connection_text

HELP = "the online producers of a group (mqadmin producerConnection)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument(
        "-g", "--producerGroup", dest="group", type=name_arg, required=True, help="producer group"
    )
    parser.add_argument("-t", "--topic", type=name_arg, required=True, help="a topic the group sends to")


def run(args: argparse.Namespace) -> int:
    return run_group("producer-connection", args, lambda admin, out, err: _connection(admin, out, err, args))


async def _connection(admin: GroupAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    try:
        pc = await admin.producer_connection(args.group, args.topic)
    except ClientError as exc:
        if str(exc) != NO_PRODUCER_MESSAGE:
            raise
        err.write(f"rmq-query producer-connection: {exc}\n")
        return EXIT_NO_RESULT
    out.write(producer_connection_text(pc))
    return EXIT_FOUND
