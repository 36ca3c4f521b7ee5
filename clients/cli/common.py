"""What the query subcommands share: connection flags, exit codes, and turning errors into both.

Exit codes (also printed in every query subcommand's ``--help``):

====  ==========================================================================================
0     found: at least one message printed
1     no result: no message matched, the topic has no route, the offset holds no message
2     usage error or a malformed message id (argparse also exits 2 on bad flags)
3     unreachable: connection refused or lost, or no answer before the timeout
4     server error: the server answered with another error code or with undecodable data
141   standard output closed before everything was written (piped into ``head``): 128 + SIGPIPE,
      what a shell reports for any tool stopped that way; no traceback
====  ==========================================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from clients.acl import AclSigner
from clients.admin import QueryAdmin
from clients.cli.arg_types import namesrv_arg, timeout_arg
from clients.client import DEFAULT_TIMEOUT, RemotingClient
from clients.errors import (
    ClientError,
    MQBrokerError,
    MQClientError,
    TransportError,
    UsageError,
)
from clients.output import consumer_trailer, json_line
from protocol.codes import ResponseCode, SerializeType
from protocol.errors import ProtocolError
from protocol.message import MessageExt

log = logging.getLogger("clients.cli")

EXIT_FOUND = 0
EXIT_NO_RESULT = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_SERVER_ERROR = 4
EXIT_OUTPUT_CLOSED = 141

EXIT_CODES_EPILOG = """exit codes:
  0  found
  1  no result (no matching message, topic without route, nothing at that offset)
  2  usage error or malformed message id
  3  server unreachable, connection lost or timed out
  4  server error (other error code, undecodable answer)
  141  standard output closed early (e.g. piped into head)"""

#: Where mqadmin writes message bodies (``Message Body Path:``).
DEFAULT_BODY_DIR = "/tmp/rocketmq/msgbodys"


def start_query_parser(
    parser: argparse.ArgumentParser, *, intro: str | None = None, namesrv_required: bool = True
) -> None:
    """What every query subcommand's parser starts with: the exit codes after its ``--help`` (after
    ``intro``, when given) and the connection flags."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES_EPILOG if intro is None else intro + "\n\n" + EXIT_CODES_EPILOG
    add_connection_arguments(parser, namesrv_required=namesrv_required)


def add_connection_arguments(parser: argparse.ArgumentParser, *, namesrv_required: bool = True) -> None:
    """``-n`` (defaulting to $NAMESRV_ADDR like mqadmin), timeout and header serialization flags."""
    default = os.environ.get("NAMESRV_ADDR")
    parser.add_argument(
        "-n",
        "--namesrv",
        "--namesrvAddr",
        dest="namesrv",
        type=namesrv_arg,
        default=default,
        required=namesrv_required and not default,
        metavar="ADDR",
        help="name server address list, e.g. 127.0.0.1:9876;192.168.0.1:9876 (default: $NAMESRV_ADDR)",
    )
    parser.add_argument(
        "--timeout",
        type=timeout_arg,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"request timeout; key queries get three times this, like Java (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--serialize",
        choices=("json", "rocketmq"),
        default="json",
        help="request header serialization (default json, as the Java client)",
    )
    parser.add_argument("--access-key", metavar="AK", help="ACL access key: sign requests like mqadmin")
    parser.add_argument("--secret-key", metavar="SK", help="ACL secret key (with --access-key)")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--body``."""
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of mqadmin's text")
    parser.add_argument("--body", action="store_true", help="print message bodies too (text: UTF-8)")


def make_admin(args: argparse.Namespace) -> QueryAdmin:
    """A QueryAdmin configured from the connection flags."""
    serialize = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
    if bool(args.access_key) != bool(args.secret_key):
        raise UsageError("ACL signing needs both --access-key and --secret-key")
    signer = AclSigner(args.access_key, args.secret_key) if args.access_key else None
    client = RemotingClient(serialize_type=serialize, timeout=args.timeout, rpc_hook=signer)
    return QueryAdmin(args.namesrv, client, timeout=args.timeout)


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an error raised by a query."""
    if isinstance(exc, UsageError):  # includes a malformed message id
        return EXIT_USAGE
    if isinstance(exc, TransportError):
        return EXIT_UNREACHABLE
    if isinstance(exc, MQClientError):
        if exc.code in (ResponseCode.NO_MESSAGE, ResponseCode.TOPIC_NOT_EXIST):
            return EXIT_NO_RESULT
        return EXIT_SERVER_ERROR
    if isinstance(exc, MQBrokerError):
        if exc.code == ResponseCode.QUERY_NOT_FOUND:
            return EXIT_NO_RESULT
        # The broker answers a view of an empty offset with SYSTEM_ERROR "can not find message ...".
        if exc.code == ResponseCode.SYSTEM_ERROR and (exc.remark or "").startswith("can not find message"):
            return EXIT_NO_RESULT
        return EXIT_SERVER_ERROR
    return EXIT_SERVER_ERROR  # e.g. an undecodable route or message


def error_family(exc: BaseException) -> str:
    """The ``error`` name of a JSON error line: for a response code's class (``SystemBusyError``),
    the family it was reported under before those classes existed, so scripts keep matching."""
    if isinstance(exc, MQClientError):
        return "MQClientError"
    if isinstance(exc, MQBrokerError):
        return "MQBrokerError"
    return type(exc).__name__


def report_error(command: str, exc: BaseException, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print ``exc`` (stderr always; also a JSON error line on stdout with --json); return its exit code."""
    code = exit_code_for(exc)
    err.write(f"rmq-query {command}: {exc}\n")
    if as_json:
        record: dict[str, Any] = {"type": "error", "error": error_family(exc), "message": str(exc)}
        if isinstance(exc, MQClientError):
            record["responseCode"] = exc.code
            record["errorMessage"] = exc.error_message
        elif isinstance(exc, MQBrokerError):
            record["responseCode"] = exc.code
            record["errorMessage"] = exc.remark
            record["brokerAddr"] = exc.addr
        record["exitCode"] = code
        out.write(json_line(record))
    return code


def output_closed(out: TextIO) -> int:
    """The reader of ``out`` went away (``| head``): stop quietly with ``EXIT_OUTPUT_CLOSED``.

    What is still buffered for a closed standard output could only fail again when the interpreter
    flushes it at exit (printing "Exception ignored ... BrokenPipeError"), so the descriptor is
    pointed at /dev/null first, as the Python documentation recommends for SIGPIPE.
    """
    if out is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass  # no real descriptor behind it (already closed or replaced): nothing to redirect
    return EXIT_OUTPUT_CLOSED


def run_query(
    command: str,
    args: argparse.Namespace,
    body: Callable[[QueryAdmin, TextIO, TextIO], Awaitable[int]],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run one query coroutine with a fresh admin; map any error to its message and exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr

    async def main() -> int:
        async with make_admin(args) as admin:
            return await body(admin, out, err)

    logger = logging.getLogger("clients")
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("WARN: %(message)s"))
    logger.addHandler(handler)
    previous_level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        try:
            code = asyncio.run(main())
        except (ClientError, ProtocolError) as exc:
            code = report_error(command, exc, as_json=getattr(args, "json", False), out=out, err=err)
        out.flush()  # a closed pipe shows here, not in the interpreter's exit-time flush
        return code
    except BrokenPipeError:
        return output_closed(out)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


async def print_consumer_trailer(
    admin: QueryAdmin, msg: MessageExt, out: TextIO, *, broker_addr: str | None = None
) -> None:
    """mqadmin's step after a message block: which consumer groups consume its topic.

    Asks QUERY_TOPIC_CONSUME_BY_WHO of the topic's broker, found through the name server as Java
    does (or ``broker_addr`` when there is no name server: the broker a view was answered by). If
    that cannot be done, a warning goes to stderr and no trailer is printed, as mqadmin prints only
    its stack trace then.
    """
    try:
        if admin.namesrv_addrs or broker_addr is None:
            addrs = (await admin.get_route(msg.topic)).broker_addrs()
        else:
            addrs = [broker_addr]
        if not addrs:
            raise ClientError(f"no broker in the route of {msg.topic}")
        groups = await admin.consumer_groups(addrs[0], msg.topic)
    except (ClientError, ProtocolError) as exc:
        log.warning("consumers of %s not checked: %s", msg.topic, exc)
        return
    out.write(consumer_trailer(groups))


def write_body_file(body_dir: str, msg_id: str, body: bytes, index: int = 0) -> str:
    """Write a body where mqadmin does (``<dir>/<msgId>``, ``_<index>`` for later duplicates)."""
    path = os.path.join(body_dir, msg_id + (f"_{index}" if index > 0 else ""))
    try:
        os.makedirs(body_dir, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(body)
    except OSError as exc:
        raise UsageError(
            f"cannot write the message body to {path}: {exc.strerror or exc} (see --body-dir)"
        ) from exc
    return path


def add_body_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--body-dir``: where bodies are written for ``Message Body Path:``."""
    parser.add_argument(
        "--body-dir",
        default=DEFAULT_BODY_DIR,
        metavar="DIR",
        help=f"where to write each message body, as mqadmin does (default {DEFAULT_BODY_DIR})",
    )
