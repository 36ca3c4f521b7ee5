"""What the group admin subcommands share (``update-sub-group``, ``delete-sub-group``,
``consumer-progress``, ``consumer-connection``, ``producer-connection``, ``reset-offset-by-time``).

They run like the query subcommands (``common.run_query``: the connection flags, errors turned into
a message on stderr and an exit code) with a ``GroupAdmin`` over the same connection. Where mqadmin
prints a stack trace and still exits 0, these print one line on stderr and exit non-zero: 1 when the
group, cluster or connection asked for is not there (``CONSUMER_NOT_ONLINE``, an unknown cluster), the
query subcommands' codes otherwise (2 usage, 3 unreachable, 4 server error).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.arg_types import int_arg
from clients.cli.common import EXIT_NO_RESULT, run_query
from clients.errors import MQBrokerError, MQClientError
from clients.group_admin import GroupAdmin
from protocol.codes import ResponseCode


def int32_arg(text: str) -> int:
    """A Java ``int`` (``Integer.parseInt(value.trim())``)."""
    value = int_arg(text)
    if not -(1 << 31) <= value < (1 << 31):
        raise argparse.ArgumentTypeError(f"out of the 32-bit range: {text!r}")
    return value


def name_arg(text: str) -> str:
    """A group or topic name: mqadmin trims it; an empty one cannot name anything."""
    value = text.strip()
    if not value:
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def run_group(
    command: str,
    args: argparse.Namespace,
    body: Callable[[GroupAdmin, TextIO, TextIO], Awaitable[int]],
) -> int:
    """``run_query`` with a ``GroupAdmin`` sharing the query admin's connections."""

    async def with_group_admin(admin: QueryAdmin, out: TextIO, err: TextIO) -> int:
        group_admin = GroupAdmin(admin.namesrv_addrs, admin.client, timeout=admin.timeout)
        try:
            return await body(group_admin, out, err)
        except (MQClientError, MQBrokerError) as exc:  # the verdict, or the broker's own answer
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            err.write(f"rmq-query {command}: {exc}\n")
            return EXIT_NO_RESULT

    return run_query(command, args, with_group_admin)
