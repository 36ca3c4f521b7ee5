"""``rmq-query delete-topic``: mqadmin ``deleteTopic`` (from every master of the cluster, then from
the name servers), same flags, same output."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.admin_topic_common import run_topic_admin, start_parser
from clients.cli.common import EXIT_FOUND, EXIT_NO_RESULT
from clients.topic_admin import NO_CLUSTER_MESSAGE, TopicAdmin

HELP = "delete a topic from a cluster's brokers and the name servers (mqadmin deleteTopic)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-c", "--clusterName", dest="cluster", required=True, help="delete topic from which cluster"
    )


def run(args: argparse.Namespace) -> int:
    return run_topic_admin("delete-topic", args, lambda admin, out, err: _delete(admin, out, args))


async def _delete(admin: TopicAdmin, out: TextIO, args: argparse.Namespace) -> int:
    topic, cluster = args.topic.strip(), args.cluster.strip()
    masters = (await admin.cluster_info()).master_addrs(cluster)
    if masters is None:
        out.write(f"[error] {NO_CLUSTER_MESSAGE}")
    for addr in masters or []:
        await admin.delete_topic_in_broker(addr, topic)
    out.write(f"delete topic [{topic}] from cluster [{cluster}] success.\n")
    await admin.delete_topic_in_namesrv(topic)
    out.write(f"delete topic [{topic}] from NameServer success.\n")
    return EXIT_FOUND if masters else EXIT_NO_RESULT
