"""``rmq-query topic-list``: mqadmin ``topicList`` (every topic the name servers know; with ``-c``
each with its cluster and the groups consuming it), same flags, same output."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.admin_topic_common import run_topic_admin, start_parser
from clients.cli.common import EXIT_FOUND
from clients.errors import ClientError
from clients.route import decode_route
from clients.topic_admin import TopicAdmin
from clients.topic_admin_text import topic_list_cluster_header, topic_list_cluster_row, topic_list_text
from protocol.java_hashmap import java_hashmap_order

HELP = "every topic the name servers know (mqadmin topicList)"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_parser(parser)
    parser.add_argument(
        "-c",
        "--clusterModel",
        dest="cluster_model",
        action="store_true",
        help="with cluster and consumer groups",
    )


def run(args: argparse.Namespace) -> int:
    return run_topic_admin("topic-list", args, lambda admin, out, err: _list(admin, out, args))


async def _list(admin: TopicAdmin, out: TextIO, args: argparse.Namespace) -> int:
    if not args.cluster_model:
        out.write(topic_list_text(await admin.topic_list()))
        return EXIT_FOUND
    info = await admin.cluster_info()
    out.write(topic_list_cluster_header())
    groups_of = QueryAdmin(admin.namesrv_addrs, admin.client, timeout=admin.timeout)
    for topic in java_hashmap_order(dict.fromkeys(await admin.topic_list())):
        if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            continue
        cluster, groups = "", [""]
        # As mqadmin: a topic whose route or consumers cannot be had is listed with what was found.
        try:
            body = await admin.route_body(topic)
            route = decode_route(body) if body is not None else None
            if route is not None and route.broker_datas:
                first = route.broker_datas[0]
                cluster = info.cluster_of_broker(first.broker_name) or "null"
                addr = first.select_broker_addr()
                found = await groups_of.consumer_groups(addr, topic) if addr else []
                groups = java_hashmap_order(dict.fromkeys(found)) or [""]
        except ClientError:
            pass
        for group in groups:
            out.write(topic_list_cluster_row(cluster, topic, group))
    return EXIT_FOUND
