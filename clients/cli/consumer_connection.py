"""``rmq-query consumer-connection``: mqadmin ``consumerConnection`` (a group's online consumers).

mqadmin's text: a row per client (id, address, language, version), the group's subscriptions, then
its consume type, message model and where it starts consuming. ``-b`` asks that broker instead of
the group's broker found through the name server. Nobody online exits 1 (mqadmin: a stack trace).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.arg_types import addr_arg
from clients.cli.common import EXIT_FOUND, start_query_parser
from clients.cli.group_common import name_arg, run_group
from clients.group_admin import GroupAdmin
from clients.group_output import consumer_connection_text

HELP = "the online consumers of a group and their subscriptions (mqadmin consumerConnection)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument(
        "-g", "--consumerGroup", dest="group", type=name_arg, required=True, help="consumer group"
    )
    parser.add_argument("-b", "--brokerAddr", dest="broker_addr", type=addr_arg, help="ask this broker")


def run(args: argparse.Namespace) -> int:
    return run_group("consumer-connection", args, lambda admin, out, err: _connection(admin, out, args))


async def _connection(admin: GroupAdmin, out: TextIO, args: argparse.Namespace) -> int:
    cc = await admin.consumer_connection(args.group, args.broker_addr)
    out.write(consumer_connection_text(cc))
    return EXIT_FOUND
