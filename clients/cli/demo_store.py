"""``rmq-query demo-store DIR --messages N``: write a varied sample store to try the server on."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clients.testkit.demo import make_demo_store

HELP = "write a varied sample RocketMQ store (several topics, unicode and colliding keys, several files)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="store root to create (must not hold a CommitLog)")
    parser.add_argument("--messages", type=int, default=2000, help="number of messages (default 2000)")
    parser.add_argument("--seed", type=int, default=7, help="seed for the body sizes (default 7)")


def run(args: argparse.Namespace) -> int:
    if args.messages <= 0:
        print("demo-store: --messages must be positive", file=sys.stderr)
        return 2
    try:
        summary = make_demo_store(args.directory, args.messages, seed=args.seed)
    except (FileExistsError, OSError) as exc:
        print(f"demo-store: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {summary.messages} messages to {summary.root} (broker.conf beside the files)")
    for topic in sorted(summary.sample_keys):
        print(f"  topic {topic}: keys {' '.join(summary.sample_keys[topic])}")
    for topic, uniq in summary.sample_unique_keys:
        print(f"  unique key {uniq} (topic {topic})")
    for msg_id in summary.sample_offset_ids:
        print(f"  offset id {msg_id}")
    return 0
