"""What the topic admin subcommands share (``update-topic``, ``delete-topic``, ``topic-route``,
``topic-list``, ``cluster-list``): the connection flags and error handling of the query commands
(``clients.cli.common``), over a ``TopicAdmin`` on the same client.

mqadmin reports a failed request with a Java stack trace and still exits 0; these print the
``rmq-query COMMAND: reason`` line of the other subcommands and exit with their documented codes.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.common import run_query, start_query_parser
from clients.topic_admin import TopicAdmin


def java_boolean(text: str) -> bool:
    """``Boolean.parseBoolean``: true for ``true`` in any case, false for anything else."""
    return text.strip().lower() == "true"


def start_parser(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)


def run_topic_admin(
    command: str,
    args: argparse.Namespace,
    body: Callable[[TopicAdmin, TextIO, TextIO], Awaitable[int]],
) -> int:
    """Run ``body`` with a ``TopicAdmin`` sharing the query admin's client (flags, ACL signing)."""

    async def with_topic_admin(admin: QueryAdmin, out: TextIO, err: TextIO) -> int:
        topics = TopicAdmin(admin.namesrv_addrs, admin.client, timeout=admin.timeout)
        return await body(topics, out, err)

    return run_query(command, args, with_topic_admin)
