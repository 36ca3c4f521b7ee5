"""``rmq-query``: one command line that groups every entry point under one help.

Every subcommand is one module of this package, named after it (``serve``, ``query_key``,
``rebuild_index``, ...); flag types shared by all of them are in ``arg_types`` and the store flags in
``store_options``. A subcommand module exposes ``HELP``
(one line), ``add_arguments(parser)`` and ``run(args) -> int`` (the process exit code), and may
expose ``check_arguments(args) -> str | None``: a combination of flags that cannot work or would be
ignored, reported as a usage error (exit 2) before anything runs; this module only builds the parser
tree and dispatches. When the command line names a subcommand, only that
module is imported (``rmq-query query-key`` never pays for importing the server); the top-level
``--help`` imports them all for their one-line help.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> module path; the order is the order shown in --help.
SUBCOMMANDS: dict[str, str] = {
    "serve": "clients.cli.serve",
    "query-key": "clients.cli.query_key",
    "query-id": "clients.cli.query_id",
    "query-uniq": "clients.cli.query_uniq",
    "query-offset": "clients.cli.query_offset",
    "print-msg": "clients.cli.print_msg",
    "print-msg-by-queue": "clients.cli.print_msg_by_queue",
    "topic-status": "clients.cli.topic_status",
    # group admin commands (mqadmin's names in kebab case)
    "update-sub-group": "clients.cli.update_sub_group",
    "delete-sub-group": "clients.cli.delete_sub_group",
    "consumer-progress": "clients.cli.consumer_progress",
    "consumer-connection": "clients.cli.consumer_connection",
    "producer-connection": "clients.cli.producer_connection",
    "reset-offset-by-time": "clients.cli.reset_offset_by_time",
    "bench": "clients.cli.bench",
    "demo-store": "clients.cli.demo_store",
    "make-store": "clients.cli.make_store",
    "dump-messages": "clients.cli.dump_messages",
    "rebuild-index": "clients.cli.rebuild_index",
    "fsck": "clients.cli.fsck",
    "export-keys": "clients.cli.export_keys",
    "export": "clients.cli.export_messages",
    # mqadmin's topic-side admin commands (issue 32)
    "update-topic": "clients.cli.admin_update_topic",
    "delete-topic": "clients.cli.admin_delete_topic",
    "topic-route": "clients.cli.admin_topic_route",
    "topic-list": "clients.cli.admin_topic_list",
    "cluster-list": "clients.cli.admin_cluster_list",
}


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rmq-query")
    except PackageNotFoundError:
        return "(not installed: run from a source tree)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser tree; with ``only`` (a subcommand name) the other subcommands are left unimported.

    Their parsers still exist (empty), so a later word of the command line can never be taken for
    another subcommand, but the top-level help they would feed is not printed when ``only`` is given.
    """
    parser = argparse.ArgumentParser(
        prog="rmq-query",
        description="RocketMQ-protocol query server and tools (queryMsgByKey / queryMsgById compatible).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_path in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_path)
        sp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run, _check=getattr(module, "check_arguments", None), _parser=sp)
    return parser


def _named_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand the command line names (its first word), if it is one."""
    return argv[0] if argv and argv[0] in SUBCOMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_named_subcommand(words))
    args = parser.parse_args(words)
    problem = args._check(args) if args._check is not None else None
    if problem:
        args._parser.error(problem)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
