"""``rmq-query make-store DIR --from messages.jsonl``: a store from messages kept as text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.testkit.jsonl_store import make_store
from protocol.errors import ProtocolError
from store.config.store_config import ConfigError, StoreConfig
from store.errors import StoreError

HELP = "write a new RocketMQ store (CommitLog, IndexFiles, checkpoint, topics.json) from a JSONL file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="store root to create (must not hold a CommitLog)")
    parser.add_argument(
        "--from", dest="source", type=Path, required=True, help="messages, one JSON object per line"
    )
    parser.add_argument(
        "--config", "--conf", dest="config", type=Path, help="broker.conf giving geometry and identity"
    )
    parser.add_argument(
        "--mapped-file-size", type=int, help="mappedFileSizeCommitLog in bytes (default 1 GiB)"
    )
    parser.add_argument("--max-hash-slot-num", type=int, help="maxHashSlotNum of the IndexFiles")
    parser.add_argument("--max-index-num", type=int, help="maxIndexNum of the IndexFiles")
    parser.add_argument("--broker-ip", help="brokerIP1: the store host of the records (default: this host)")
    parser.add_argument("--port", type=int, help="listenPort: the store host's port (default 10911)")


def run(args: argparse.Namespace) -> int:
    root = args.directory.expanduser().resolve()
    overrides: dict[str, object] = {
        "store_path_root_dir": root,
        "store_path_commit_log": root / "commitlog",
        "mapped_file_size_commit_log": args.mapped_file_size,
        "max_hash_slot_num": args.max_hash_slot_num,
        "max_index_num": args.max_index_num,
        "broker_ip1": args.broker_ip,
        "listen_port": args.port,
    }
    try:
        if args.config is not None:
            config = StoreConfig.load(args.config.expanduser(), overrides=overrides)
        else:
            config = StoreConfig.for_store(root, **overrides)
        made = make_store(config, args.source)
    except (ConfigError, StoreError, ProtocolError) as exc:
        print(f"make-store: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"make-store: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {made.messages} messages in {made.topics} topic(s) to {made.root}, broker.conf beside them")
    return 0
