"""The command-line options every store-opening subcommand shares, and the config they give.

``--store DIR`` names the store; ``--config FILE`` (alias ``--conf``) a broker.conf (default:
``DIR/broker.conf`` when it exists); the geometry flags override both, as the broker's own command
line overrides its file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from store.config import StoreConfig


def add_store_arguments(parser: argparse.ArgumentParser, *, store_required: bool = True) -> None:
    parser.add_argument("--store", type=Path, required=store_required, help="store root directory")
    parser.add_argument(
        "--config",
        "--conf",
        dest="conf",
        type=Path,
        help="broker.conf to read (default: STORE/broker.conf if present); same flag as `serve`",
    )
    parser.add_argument("--commitlog", type=Path, help="CommitLog directory (storePathCommitLog)")
    parser.add_argument("--mapped-file-size", type=int, help="mappedFileSizeCommitLog in bytes")
    parser.add_argument("--max-hash-slot-num", type=int, help="maxHashSlotNum of the IndexFiles")
    parser.add_argument("--max-index-num", type=int, help="maxIndexNum of the IndexFiles")


def config_from_args(args: argparse.Namespace) -> StoreConfig:
    """The StoreConfig the flags describe (file values, then flags on top)."""
    overrides: dict[str, object] = {
        "store_path_root_dir": args.store,
        "store_path_commit_log": args.commitlog,
        "mapped_file_size_commit_log": args.mapped_file_size,
        "max_hash_slot_num": args.max_hash_slot_num,
        "max_index_num": args.max_index_num,
    }
    conf = args.conf
    if conf is None and args.store is not None and (args.store / "broker.conf").exists():
        conf = args.store / "broker.conf"
    if conf is not None:
        return StoreConfig.load(conf, overrides=overrides)
    return StoreConfig.from_properties({}, overrides=overrides)
