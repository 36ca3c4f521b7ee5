"""``rmq-query reset-offset-by-time``: mqadmin ``resetOffsetByTime`` (move a group's offsets in a topic).

``-s`` is mqadmin's: ``now`` (every queue's end), milliseconds since the epoch, or a local time
``yyyy-MM-dd#HH:mm:ss:SSS``. The broker resets the offsets and tells the online consumers
(INVOKE_BROKER_TO_RESET_OFFSET); ``-f false`` only moves a queue back, never forward; ``-c`` resets as
for a C++ client (the broker changes the offsets without asking consumers). When the broker answers
that no consumer of the group is online, the offsets are reset from here as mqadmin's fallback does
(each queue's offset for the time, then UPDATE_CONSUMER_OFFSET), with that fallback's table.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import TextIO

from clients.cli.arg_types import boolean_arg
from clients.cli.common import EXIT_FOUND, start_query_parser
from clients.cli.group_common import name_arg, run_group
from clients.errors import MQClientError
from clients.group_admin import GroupAdmin
from clients.group_output import reset_offset_old_text, reset_offset_text
from protocol.codes import ResponseCode

HELP = "reset a consumer group's offsets in a topic to a time (mqadmin resetOffsetByTime)"

_LONG = re.compile(r"[+-]?[0-9]+")
_DATE = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})#([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,3})"
)


def parse_timestamp(text: str) -> int:
    """mqadmin's ``-s``: ``now`` is -1, a Java ``long`` is itself, else a local
    ``yyyy-MM-dd#HH:mm:ss:SSS`` in milliseconds (a date that does not exist is an error here, where
    Java's lenient parser would roll it over into the next month)."""
    value = text.strip()
    if value == "now":
        return -1
    if _LONG.fullmatch(value):
        number = int(value)
        if not -(1 << 63) <= number < (1 << 63):
            raise argparse.ArgumentTypeError(f"out of the 64-bit range: {text!r}")
        return number
    match = _DATE.fullmatch(value)
    if match is None:
        raise argparse.ArgumentTypeError(f"not now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS: {text!r}")
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups())
    try:
        local = time.strptime(
            f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}", "%Y-%m-%d %H:%M:%S"
        )
        seconds = time.mktime(local)
    except (ValueError, OverflowError) as exc:
        raise argparse.ArgumentTypeError(f"not a valid time: {text!r} ({exc})") from None
    return int(seconds) * 1000 + millis


def add_arguments(parser: argparse.ArgumentParser) -> None:
    start_query_parser(parser)
    parser.add_argument("-g", "--group", type=name_arg, required=True, help="consumer group")
    parser.add_argument("-t", "--topic", type=name_arg, required=True, help="topic")
    parser.add_argument(
        "-s", "--timestamp", required=True, metavar="TIME",
        help="now, milliseconds since the epoch, or local yyyy-MM-dd#HH:mm:ss:SSS",
    )  # fmt: skip
    parser.add_argument(
        "-f", "--force", type=boolean_arg, default=True, help="also move offsets forward (default true)"
    )
    parser.add_argument("-c", "--cplus", action="store_true", help="reset as for a C++ client")


def check_arguments(args: argparse.Namespace) -> str | None:
    try:
        args.timestamp_ms = parse_timestamp(args.timestamp)
    except argparse.ArgumentTypeError as exc:
        return f"argument -s/--timestamp: {exc}"
    return None


def run(args: argparse.Namespace) -> int:
    return run_group("reset-offset-by-time", args, lambda admin, out, err: _reset(admin, out, args))


async def _reset(admin: GroupAdmin, out: TextIO, args: argparse.Namespace) -> int:
    text = args.timestamp.strip()
    timestamp = getattr(args, "timestamp_ms", None)
    if timestamp is None:
        timestamp = parse_timestamp(text)
    try:
        table = await admin.reset_offset_by_timestamp(
            args.topic, args.group, timestamp, args.force, args.cplus
        )
    except MQClientError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        rows = await admin.reset_offset_old(args.group, args.topic, timestamp, args.force)
        out.write(reset_offset_old_text(args.group, args.topic, args.force, text, timestamp, rows))
        return EXIT_FOUND
    out.write(reset_offset_text(args.group, args.topic, args.force, text, timestamp, table))
    return EXIT_FOUND
