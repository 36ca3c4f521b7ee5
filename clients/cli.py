"""``rmq-query``: one command line that groups every entry point under one help.

Each subcommand lives beside the behaviour it drives (``server.command`` serves, ``store.commands.*``
builds and checks stores, ``clients.commands.*`` queries). A subcommand module exposes ``HELP``
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
    "serve": "server.command",
    "query-key": "clients.commands.query_key",
    "query-id": "clients.commands.query_id",
    "query-uniq": "clients.commands.query_uniq",
    "query-offset": "clients.commands.query_offset",
    "print-msg": "clients.commands.print_msg",
    "print-msg-by-queue": "clients.commands.print_msg_by_queue",
    "topic-status": "clients.commands.topic_status",
    "bench": "clients.commands.bench",
    "demo-store": "store.commands.demo_store",
    "make-store": "store.commands.make_store",
    "dump-messages": "store.commands.dump_messages",
    "rebuild-index": "store.commands.rebuild_index",
    "fsck": "store.commands.fsck",
    "export-keys": "store.commands.export_keys",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser tree; with ``only`` (a subcommand name) the other subcommands are left unimported.

    Their parsers still exist (empty), so a later word of the command line can never be taken for
    another subcommand, but the top-level help they would feed is not printed when ``only`` is given.
    """
    parser = argparse.ArgumentParser(
        prog="rmq-query",
        description="RocketMQ-protocol query server and tools (queryMsgByKey / queryMsgById compatible).",
    )
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


if __name__ == "__main__":
    sys.exit(main())
