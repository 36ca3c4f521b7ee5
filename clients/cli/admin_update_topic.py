"""``rmq-query update-topic``: mqadmin ``updateTopic`` (create or update a topic on a broker or on
every master of a cluster), same flags, same output."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.admin_topic_common import java_boolean, run_topic_admin, start_parser
from clients.cli.common import EXIT_FOUND, EXIT_NO_RESULT
from clients.errors import UsageError
from clients.topic_admin import NO_CLUSTER_MESSAGE, TopicAdmin, TopicSpec, topic_sys_flag

HELP = "create or update a topic (mqadmin updateTopic)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_parser(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("-b", "--brokerAddr", dest="broker_addr", help="create topic to which broker")
    where.add_argument("-c", "--clusterName", dest="cluster", help="create topic to which cluster")
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8, help="read queue nums (8)"
    )
    parser.add_argument(
        "-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8, help="write queue nums (8)"
    )
    parser.add_argument("-p", "--perm", type=int, default=6, help="permission (2|4|6): 2 W, 4 R, 6 RW (6)")
    parser.add_argument("-o", "--order", default="false", help="ordered topic (true|false)")
    parser.add_argument("-u", "--unit", default="false", help="is unit topic (true|false)")
    parser.add_argument(
        "-s", "--hasUnitSub", dest="has_unit_sub", default="false", help="has unit sub (true|false)"
    )


def spec_of(args: argparse.Namespace) -> TopicSpec:
    return TopicSpec(
        args.topic.strip(),
        args.read_queue_nums,
        args.write_queue_nums,
        args.perm,
        topic_sys_flag=topic_sys_flag(java_boolean(args.unit), java_boolean(args.has_unit_sub)),
        order=java_boolean(args.order),
    )


def run(args: argparse.Namespace) -> int:
    return run_topic_admin("update-topic", args, lambda admin, out, err: _update(admin, out, args))


async def _update(admin: TopicAdmin, out: TextIO, args: argparse.Namespace) -> int:
    spec = spec_of(args)
    if spec.order:
        # The order flag is kept by the name server's KV config (PUT_KV_CONFIG), which this server
        # does not serve (mqadmin fails there too, after creating the topic).
        raise UsageError("-o true needs the name server's KV config (orderConf), which is not supported")
    if args.broker_addr is not None:
        addr = args.broker_addr.strip()
        await admin.create_topic(addr, spec)
        out.write(f"create topic to {addr} success.\n")
        out.write(spec.java_string())
        return EXIT_FOUND
    masters = (await admin.cluster_info()).master_addrs(args.cluster.strip())
    if masters is None:
        out.write(f"[error] {NO_CLUSTER_MESSAGE}")
    for addr in masters or []:
        await admin.create_topic(addr, spec)
        out.write(f"create topic to {addr} success.\n")
    out.write(spec.java_string())
    return EXIT_FOUND if masters else EXIT_NO_RESULT
