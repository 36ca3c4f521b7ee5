"""``rmq-query dump-messages --store DIR``: every record as a JSON line ``make-store`` turns back into it.

The inverse of ``make-store``: a store (a broker's, or one made for tests) becomes text a repository
can keep; ``make-store`` from that text writes the same CommitLog, ConsumeQueues and IndexFiles.
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from clients.cli.store_options import add_store_arguments, config_from_args
from clients.testkit.message_jsonl import record_to_json
from protocol.errors import ProtocolError
from protocol.message import decode_message, raw_properties
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import ConfigError
from store.errors import StoreError

HELP = "write every message of a store as JSON lines (the input of make-store)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    except (ConfigError, StoreError, OSError) as exc:
        print(f"dump-messages: {exc}", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    count = 0
    try:
        for offset, buf in log.iter_records():
            try:
                msg = decode_message(buf, decompress=False)
                props = raw_properties(buf).decode("utf-8")
            except (ProtocolError, UnicodeDecodeError) as exc:
                print(f"dump-messages: record at {offset} skipped: {exc}", file=sys.stderr)
                continue
            out.write(msgspec.json.encode(record_to_json(msg, props)) + b"\n")
            count += 1
    except BrokenPipeError:
        return 141
    finally:
        log.close()
    print(f"dump-messages: {count} message(s)", file=sys.stderr)
    return 0
