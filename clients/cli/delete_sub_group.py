"""``rmq-query delete-sub-group``: mqadmin ``deleteSubGroup`` (remove a subscription group).

``-b`` one broker, else ``-c`` every master of a cluster, then (with ``-c``, as mqadmin) the group's
retry and dead-letter topics are deleted from the cluster's masters and the name servers, each step
printing mqadmin's line. ``-r true`` removes the group's offsets too. A broker refusing the group's
deletion stops the command (exit 4, as mqadmin's exception does); a failure deleting the retry or
DLQ topic is reported on stderr and the command goes on, as mqadmin's does.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.arg_types import addr_arg, boolean_arg
from clients.cli.common import EXIT_FOUND, EXIT_NO_RESULT, EXIT_SERVER_ERROR, start_query_parser
from clients.cli.group_common import name_arg, run_group
from clients.errors import ClientError
from clients.group_admin import DLQ_PREFIX, RETRY_PREFIX, UNKNOWN_CLUSTER_MESSAGE, GroupAdmin
from protocol.errors import ProtocolError

HELP = "delete a subscription group from a broker or cluster (mqadmin deleteSubGroup)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument(
        "-b", "--brokerAddr", dest="broker_addr", type=addr_arg, help="the broker to delete from"
    )
    parser.add_argument("-c", "--clusterName", dest="cluster", type=name_arg, help="delete from every master")
    parser.add_argument(
        "-g", "--groupName", dest="group", type=name_arg, required=True, help="consumer group"
    )
    parser.add_argument(
        "-r",
        "--removeOffset",
        dest="remove_offset",
        type=boolean_arg,
        default=False,
        help="remove offsets too",
    )


def check_arguments(args: argparse.Namespace) -> str | None:
    if args.broker_addr is None and args.cluster is None:
        return "one of -b/--brokerAddr or -c/--clusterName is required"
    return None


def run(args: argparse.Namespace) -> int:
    return run_group("delete-sub-group", args, lambda admin, out, err: _delete(admin, out, err, args))


async def _delete(admin: GroupAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    group = args.group
    if args.broker_addr is not None:
        await admin.delete_subscription_group(args.broker_addr, group, args.remove_offset)
        out.write(f"delete subscription group [{group}] from broker [{args.broker_addr}] success.\n")
        return EXIT_FOUND
    cluster = args.cluster
    masters = await admin.cluster_masters(cluster)
    code = EXIT_FOUND
    if masters is None:
        out.write(f"[error] {UNKNOWN_CLUSTER_MESSAGE}")
        err.write(f"rmq-query delete-sub-group: no cluster {cluster!r} on the name server\n")
        code = EXIT_NO_RESULT
    for addr in masters or []:
        await admin.delete_subscription_group(addr, group, args.remove_offset)
        out.write(
            f"delete subscription group [{group}] from broker [{addr}] in cluster [{cluster}] success.\n"
        )
    for topic in (RETRY_PREFIX + group, DLQ_PREFIX + group):
        try:
            await _delete_topic(admin, out, cluster, topic)
        except (ClientError, ProtocolError) as exc:
            err.write(f"rmq-query delete-sub-group: deleting {topic}: {exc}\n")
            code = EXIT_SERVER_ERROR
            break  # mqadmin's one try block holds both topics: the first failure ends it
    return code


async def _delete_topic(admin: GroupAdmin, out: TextIO, cluster: str, topic: str) -> None:
    """``DeleteTopicSubCommand.deleteTopic``: from the cluster's masters, then from each name server."""
    masters = await admin.cluster_masters(cluster)
    if masters is None:
        out.write(f"[error] {UNKNOWN_CLUSTER_MESSAGE}")
    for addr in masters or []:
        await admin.delete_topic_in_broker(addr, topic)
    out.write(f"delete topic [{topic}] from cluster [{cluster}] success.\n")
    for addr in admin.namesrv_addrs:
        await admin.delete_topic_in_namesrv(addr, topic, cluster)
    out.write(f"delete topic [{topic}] from NameServer success.\n")
