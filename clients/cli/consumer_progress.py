"""``rmq-query consumer-progress``: mqadmin ``consumerProgress`` (a group's backlog per queue).

With ``-g``: mqadmin's table of every queue the group has offsets in (its broker offset, consumer
offset, the difference and the store time of the last consumed message), then ``Consume TPS`` and
``Diff Total``. ``-s true`` adds the column of the client each queue is assigned to (asked of each
online consumer through the broker, as mqadmin does; a queue nobody holds prints ``N/A``).

Without ``-g``: mqadmin's list of every group the name server has a retry topic for, with its online
client count, oldest client version, type, model, rate and backlog (an offline group prints
``OFFLINE`` and zeros), in the order mqadmin prints them.
"""

from __future__ import annotations

import argparse
import logging
from typing import TextIO

from clients.cli.arg_types import boolean_arg
from clients.cli.common import EXIT_FOUND, start_query_parser
from clients.cli.group_common import name_arg, run_group
from clients.errors import ClientError
from clients.group_admin import RETRY_PREFIX, ConsumerConnection, ConsumeStats, GroupAdmin
from clients.group_output import GROUP_LIST_HEADER, consumer_progress_text, group_list_row
from protocol.admin_bodies import QueueKey
from protocol.errors import ProtocolError

HELP = "a consumer group's offsets and backlog per queue, or every group's summary (mqadmin consumerProgress)"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument(
        "-g", "--groupName", dest="group", type=name_arg, help="consumer group (default: all)"
    )
    parser.add_argument(
        "-s", "--showClientIP", dest="show_client_ip", type=boolean_arg, default=False,
        help="show the client each queue is assigned to (true/false)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    return run_group("consumer-progress", args, lambda admin, out, err: _progress(admin, out, args))


async def _progress(admin: GroupAdmin, out: TextIO, args: argparse.Namespace) -> int:
    if args.group is None:
        return await _all_groups(admin, out)
    stats = await admin.consume_stats(args.group)
    client_ips = await _client_ips(admin, args.group) if args.show_client_ip else None
    out.write(consumer_progress_text(stats, client_ips))
    return EXIT_FOUND


async def _client_ips(admin: GroupAdmin, group: str) -> dict[QueueKey, str]:
    """Which client holds each queue (the address part of its client id); whatever cannot be asked
    is left out, as mqadmin ignores any failure here."""
    try:
        return await admin.queue_allocation(group)
    except (ClientError, ProtocolError) as exc:
        log.debug("allocation of %s not read: %s", group, exc)
        return {}


async def _all_groups(admin: GroupAdmin, out: TextIO) -> int:
    out.write(GROUP_LIST_HEADER + "\n")
    for topic in await admin.all_topics():
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX) :]
        stats: ConsumeStats | None = None
        cc: ConsumerConnection | None = None
        try:
            stats = await admin.consume_stats(group)
        except (ClientError, ProtocolError) as exc:
            log.debug("consume stats of %s: %s", group, exc)
        try:
            cc = await admin.consumer_connection(group)
        except (ClientError, ProtocolError) as exc:
            log.debug("connections of %s: %s", group, exc)
        out.write(group_list_row(group, stats, cc) + "\n")
    return EXIT_FOUND
