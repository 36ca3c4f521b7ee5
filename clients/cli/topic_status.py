"""``rmq-query topic-status``: mqadmin ``topicStatus`` (min/max offset and last update per queue)."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.common import (
    EXIT_FOUND,
    run_query,
    start_query_parser,
)
from clients.output import json_line, topic_status_table

HELP = "min/max offset and last update of every queue of a topic (mqadmin topicStatus)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of mqadmin's table")


def run(args: argparse.Namespace) -> int:
    return run_query("topic-status", args, lambda admin, out, err: _status(admin, out, args))


async def _status(admin: QueryAdmin, out: TextIO, args: argparse.Namespace) -> int:
    rows = await admin.examine_topic_stats(args.topic.strip())
    if not args.json:
        out.write(topic_status_table(rows))
        return EXIT_FOUND
    for row in sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id)):
        out.write(
            json_line(
                {
                    "type": "queue",
                    "brokerName": row.broker_name,
                    "queueId": row.queue_id,
                    "minOffset": row.min_offset,
                    "maxOffset": row.max_offset,
                    "lastUpdateTimestamp": row.last_update_timestamp,
                }
            )
        )
    out.write(json_line({"type": "result", "count": len(rows)}))
    return EXIT_FOUND
