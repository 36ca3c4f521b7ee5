"""``rmq-query topic-route``: mqadmin ``topicRoute`` (the route as fastjson's pretty JSON, or with
``-l`` a table), same flags, same output."""

from __future__ import annotations

import argparse
from typing import TextIO

from clients.cli.admin_topic_common import run_topic_admin, start_parser
from clients.cli.common import EXIT_FOUND
from clients.response_errors import client_error
from clients.topic_admin import TopicAdmin, decode_fastjson
from clients.topic_admin_text import route_json_text, route_table_text
from protocol.codes import ResponseCode

HELP = "a topic's route as the name server answers it (mqadmin topicRoute)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_parser(parser)
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-l", "--list", dest="as_list", action="store_true", help="use list format to print data"
    )


def run(args: argparse.Namespace) -> int:
    return run_topic_admin("topic-route", args, lambda admin, out, err: _route(admin, out, args))


async def _route(admin: TopicAdmin, out: TextIO, args: argparse.Namespace) -> int:
    topic = args.topic.strip()
    body = await admin.route_body(topic)
    if body is None:
        # mqadmin's words (``getTopicRouteInfoFromNameServer``'s exception)
        raise client_error(
            ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
        )
    route = decode_fastjson(body)
    out.write(route_table_text(route) if args.as_list else route_json_text(route) + "\n")
    return EXIT_FOUND
