"""``rmq-query fsck --store DIR``: check a store's CommitLog and IndexFiles for consistency."""

from __future__ import annotations

import argparse
import sys

from clients.cli.store_options import add_store_arguments, config_from_args
from store.check.store_check import check_store
from store.config.store_config import ConfigError
from store.errors import StoreError
from store.progress_line import WalkProgress

HELP = "check a store's CommitLog (CRCs, gaps) and IndexFiles (geometry, entries, coverage)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument("--deep", action="store_true", help="also check every index entry against its record")


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        if not config.store_path_root_dir.is_dir():
            # Checking nothing would report only a missing checkpoint: say what is really wrong.
            raise StoreError(f"no store directory at {config.store_path_root_dir}")
        progress = WalkProgress("fsck")  # on stderr: a bar on a terminal, a line every 10 s in a log
        try:
            report = check_store(config, deep=args.deep, progress=progress)
        finally:
            progress.finish()
    except (ConfigError, StoreError, OSError) as exc:
        print(f"fsck: {exc}", file=sys.stderr)
        return 1
    for note in report.notes:
        print(note)
    for gap in report.known_gaps:
        print(f"KNOWN GAP: {gap}")
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    known = (
        f" ({len(report.known_gaps)} known CommitLog gap(s): data lost, built around)"
        if report.known_gaps
        else ""
    )
    print(f"OK{known}" if report.ok else f"{len(report.problems)} problem(s){known}")
    return 0 if report.ok else 1
