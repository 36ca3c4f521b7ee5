"""``rmq-query cluster-list``: mqadmin ``clusterList`` (each broker of each cluster with its runtime
figures), same flags, same output."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from clients.cli.admin_topic_common import run_topic_admin, start_parser
from clients.cli.common import EXIT_FOUND
from clients.errors import ClientError
from clients.topic_admin import TopicAdmin
from clients.topic_admin_text import cluster_list_header, cluster_list_row, cluster_list_rows

HELP = "the brokers of each cluster with their runtime figures (mqadmin clusterList)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_parser(parser)


def run(args: argparse.Namespace) -> int:
    return run_topic_admin("cluster-list", args, lambda admin, out, err: _clusters(admin, out, err))


async def _clusters(admin: TopicAdmin, out: TextIO, err: TextIO) -> int:
    info = await admin.cluster_info()
    out.write(cluster_list_header())
    for cluster, name, broker_id, addr in cluster_list_rows(info):
        stats: dict[str, str] | None
        try:
            stats = await admin.broker_runtime_info(addr)
        except ClientError as exc:
            err.write(f"rmq-query cluster-list: {addr}: {exc}\n")  # mqadmin prints the stack trace
            stats = None
        out.write(cluster_list_row(cluster, name, broker_id, addr, stats, int(time.time() * 1000)))
    return EXIT_FOUND
