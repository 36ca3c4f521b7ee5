"""``rmq-query update-sub-group``: mqadmin ``updateSubGroup`` (create or update a subscription group).

The flags are mqadmin's: ``-b`` one broker, else ``-c`` every master of a cluster (``-b`` wins when
both are given); ``-g`` the group; ``-s -m -d -q -r -i -w -a`` its settings. Output is mqadmin's: a
``create subscription group to <addr> success.`` line per broker, then the config's ``toString()``
with no newline after it. A broker that fails is reported on stderr and the others are still
updated (as mqadmin goes on); the exit code is then 4. A cluster the name server does not know prints
mqadmin's ``[error]`` text and exits 1.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TextIO

from clients.cli.arg_types import addr_arg, boolean_arg, int_arg
from clients.cli.common import EXIT_FOUND, EXIT_NO_RESULT, EXIT_SERVER_ERROR, start_query_parser
from clients.cli.group_common import int32_arg, name_arg, run_group
from clients.errors import ClientError
from clients.group_admin import UNKNOWN_CLUSTER_MESSAGE, GroupAdmin, SubscriptionGroupConfig
from clients.group_output import subscription_group_text
from protocol.errors import ProtocolError

HELP = "create or update a subscription group on a broker or cluster (mqadmin updateSubGroup)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-b", "--brokerAddr", dest="broker_addr", type=addr_arg, help="the broker to update")
    parser.add_argument(
        "-c", "--clusterName", dest="cluster", type=name_arg, help="update every master of it"
    )
    parser.add_argument(
        "-g", "--groupName", dest="group", type=name_arg, required=True, help="consumer group"
    )
    parser.add_argument(
        "-s", "--consumeEnable", dest="consume_enable", type=boolean_arg, help="consume enable"
    )
    parser.add_argument(
        "-m", "--consumeFromMinEnable", dest="consume_from_min", type=boolean_arg, help="from min offset"
    )
    parser.add_argument(
        "-d", "--consumeBroadcastEnable", dest="broadcast", type=boolean_arg, help="broadcast"
    )
    parser.add_argument(
        "-q", "--retryQueueNums", dest="retry_queue_nums", type=int32_arg, help="retry queues"
    )
    parser.add_argument(
        "-r", "--retryMaxTimes", dest="retry_max_times", type=int32_arg, help="retry max times"
    )
    parser.add_argument(
        "-i", "--brokerId", dest="broker_id", type=int_arg, help="consume from which broker id"
    )
    parser.add_argument(
        "-w", "--whichBrokerWhenConsumeSlowly", dest="slow_broker", type=int_arg, help="broker id when slow"
    )
    parser.add_argument(
        "-a",
        "--notifyConsumerIdsChanged",
        dest="notify",
        type=boolean_arg,
        help="notify consumer ids changed",
    )


def check_arguments(args: argparse.Namespace) -> str | None:
    if args.broker_addr is None and args.cluster is None:
        return "one of -b/--brokerAddr or -c/--clusterName is required"
    return None


def config_of(args: argparse.Namespace) -> SubscriptionGroupConfig:
    """The config mqadmin builds: its defaults, then each flag given."""
    config = SubscriptionGroupConfig(args.group)
    changes = {
        "consume_enable": args.consume_enable,
        "consume_from_min_enable": args.consume_from_min,
        "consume_broadcast_enable": args.broadcast,
        "retry_queue_nums": args.retry_queue_nums,
        "retry_max_times": args.retry_max_times,
        "broker_id": args.broker_id,
        "which_broker_when_consume_slowly": args.slow_broker,
        "notify_consumer_ids_changed_enable": args.notify,
    }
    return replace(config, **{k: v for k, v in changes.items() if v is not None})


def run(args: argparse.Namespace) -> int:
    return run_group("update-sub-group", args, lambda admin, out, err: _update(admin, out, err, args))


async def _update(admin: GroupAdmin, out: TextIO, err: TextIO, args: argparse.Namespace) -> int:
    config = config_of(args)
    if args.broker_addr is not None:
        await admin.create_subscription_group(args.broker_addr, config)
        out.write(f"create subscription group to {args.broker_addr} success.\n")
        out.write(subscription_group_text(config))
        return EXIT_FOUND
    masters = await admin.cluster_masters(args.cluster)
    code = EXIT_FOUND
    if masters is None:
        out.write(f"[error] {UNKNOWN_CLUSTER_MESSAGE}")
        err.write(f"rmq-query update-sub-group: no cluster {args.cluster!r} on the name server\n")
        code = EXIT_NO_RESULT
    for addr in masters or []:
        try:
            await admin.create_subscription_group(addr, config)
        except (ClientError, ProtocolError) as exc:
            err.write(f"rmq-query update-sub-group: {addr}: {exc}\n")
            code = EXIT_SERVER_ERROR
            continue
        out.write(f"create subscription group to {addr} success.\n")
    out.write(subscription_group_text(config))
    return code
