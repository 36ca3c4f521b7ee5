"""What mqadmin's pull-based tools (printMsg, printMsgByQueue) share: their flag values and the walk.

mqadmin reads ``-b``/``-e`` as milliseconds or as ``yyyy-MM-dd#HH:mm:ss:SSS`` in the local time zone
(``UtilAll.parseDate``), its boolean flags with ``Boolean.parseBoolean``, and prints bodies with
``new String(body, charset)``. The walk of one queue is ``DefaultMQPullConsumer.pull`` 32 at a time
from the start offset while below the end offset; whole batches are printed, so messages past the
end may be too, as mqadmin does.
"""

from __future__ import annotations

import argparse
import codecs
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TextIO

from clients.admin import QueryAdmin
from clients.cli.arg_types import boolean_arg, charset_arg
from clients.errors import UsageError
from clients.java_text import java_utf8_decode
from clients.message_queue import MessageQueue, PullResult
from clients.output import json_line, message_record, print_msg_line

#: ``UtilAll.YYYY_MM_DD_HH_MM_SS_SSS``.
_MQADMIN_TIME = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})#(\d{1,2}):(\d{1,2}):(\d{1,2}):(\d{1,3})")

#: Messages asked per pull (mqadmin's constant).
PULL_BATCH = 32


def mqadmin_timestamp(text: str) -> int:
    """``timestampFormat``: a Java long, else ``yyyy-MM-dd#HH:mm:ss:SSS`` in the local time zone."""
    value = text.strip()
    if re.fullmatch(r"[+-]?\d+", value):
        number = int(value)
        if -(1 << 63) <= number < (1 << 63):
            return number
    match = _MQADMIN_TIME.fullmatch(value)
    if match is None:
        raise UsageError(f"not a timestamp (milliseconds or yyyy-MM-dd#HH:mm:ss:SSS): {text!r}")
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups())
    try:
        seconds = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError) as exc:
        raise UsageError(f"not a valid time: {text!r} ({exc})") from None
    return int(seconds) * 1000 + millis


def add_boolean_argument(
    parser: argparse.ArgumentParser, short: str, long: str, dest: str, what: str, *, default: bool
) -> None:
    """A boolean flag of printMsg/printMsgByQueue (``args.<dest>`` is the bool, ``default`` if absent)."""
    choices = "true (default) | false" if default else "true | false (default)"
    parser.add_argument(
        short, long, dest=dest, type=boolean_arg, default=default, metavar="BOOL", help=f"{what}: {choices}"
    )


def body_text(body: bytes, charset: str) -> str:
    """``new String(body, charset)``: undecodable bytes become U+FFFD (for UTF-8 exactly as many as
    the JDK makes, ``clients.java_text``)."""
    if codecs.lookup(charset).name == "utf-8":
        return java_utf8_decode(body)
    return body.decode(charset, errors="replace")


def add_walk_arguments(parser: argparse.ArgumentParser) -> None:
    """``-c -s -b -e`` of printMsg and printMsgByQueue (``time_range`` reads ``-b -e``)."""
    parser.add_argument(
        "-c", "--charsetName", dest="charset", type=charset_arg, default="UTF-8", metavar="CHARSET",
        help="charset of the printed bodies (default UTF-8)",
    )  # fmt: skip
    parser.add_argument(
        "-s", "--subExpression", dest="sub_expression", default="*", metavar="EXPR",
        help="subscribe expression, e.g. 'TagA || TagB' (default *)",
    )  # fmt: skip
    parser.add_argument(
        "-b", "--beginTimestamp", dest="begin", metavar="TIME",
        help="begin: milliseconds or yyyy-MM-dd#HH:mm:ss:SSS (local time); default the queue's min offset",
    )  # fmt: skip
    parser.add_argument(
        "-e", "--endTimestamp", dest="end", metavar="TIME",
        help="end: milliseconds or yyyy-MM-dd#HH:mm:ss:SSS (local time); default the queue's max offset",
    )  # fmt: skip


def time_range(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """``-b``/``-e`` as milliseconds (``mqadmin_timestamp``), ``None`` for one not given."""
    begin = mqadmin_timestamp(args.begin) if args.begin is not None else None
    end = mqadmin_timestamp(args.end) if args.end is not None else None
    return begin, end


@dataclass(slots=True)
class QueueRange:
    """Where one queue's walk starts and stops."""

    mq: MessageQueue
    min_offset: int
    max_offset: int


async def queue_range(admin: QueryAdmin, mq: MessageQueue, begin: int | None, end: int | None) -> QueueRange:
    """min/max offset of ``mq``, replaced by the broker's offset for ``begin``/``end`` when given."""
    low = await admin.min_offset(mq)
    high = await admin.max_offset(mq)
    if begin is not None:
        low = await admin.search_offset(mq, begin)
    if end is not None:
        high = await admin.search_offset(mq, end)
    return QueueRange(mq, low, high)


async def walk(admin: QueryAdmin, span: QueueRange, sub_expression: str) -> AsyncIterator[PullResult]:
    """Pull 32 at a time from ``span.min_offset`` while below ``span.max_offset``; the caller stops
    early when a status ends the walk (errors propagate to it)."""
    offset = span.min_offset
    while offset < span.max_offset:
        result = await admin.pull(span.mq, sub_expression, offset, PULL_BATCH)
        offset = result.next_begin_offset
        yield result


def write_messages(out: TextIO, result: PullResult, broker_name: str, args: argparse.Namespace) -> None:
    """The messages of one pull as printMsg prints them (``-d``, ``-c``), or with ``--json`` one JSON
    line each (``--body``)."""
    for msg in result.messages:
        if args.json:
            record = message_record(msg, include_body=args.body)
            record["brokerName"] = broker_name
            out.write(json_line(record))
        else:
            text = body_text(msg.body, args.charset) if args.print_body else "NOT PRINT BODY"
            out.write(print_msg_line(msg, broker_name, text))
