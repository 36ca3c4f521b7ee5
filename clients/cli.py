"""``rmq-query``: one command line that groups every entry point under one help.

Each subcommand lives beside the behaviour it drives (``server.command`` serves, ``store.commands.*``
builds and checks stores, ``clients.commands.*`` queries). A subcommand module exposes ``HELP``
(one line), ``add_arguments(parser)`` and ``run(args) -> int`` (the process exit code); this module
only builds the parser tree and dispatches, importing a subcommand's module lazily so that
``rmq-query query-key`` never pays for importing the server or PySpark.
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
    "bench": "clients.commands.bench",
    "demo-store": "store.commands.demo_store",
    "rebuild-index": "store.commands.rebuild_index",
    "fsck": "store.commands.fsck",
    "export-keys": "store.commands.export_keys",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmq-query",
        description="RocketMQ-protocol query server and tools (queryMsgByKey / queryMsgById compatible).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_path in SUBCOMMANDS.items():
        module = importlib.import_module(module_path)
        sp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
