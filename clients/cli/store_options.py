"""The command-line options every store-opening command shares (``serve`` too), and the config they give.

``--store DIR`` names the store; ``--config FILE`` (alias ``--conf``) a broker.conf (default:
``DIR/broker.conf`` when it exists); the geometry flags override both, as the broker's own command
line overrides its file. ``--store`` wins over the file for the store's paths: a copy of a store
kept with its broker.conf must open the copy's files, not the ones the file names.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clients.cli.arg_types import positive_int
from store.config.store_config import StoreConfig


def add_store_arguments(
    parser: argparse.ArgumentParser,
    *,
    store_required: bool = True,
    store_help: str = "store root directory",
    repeatable: bool = False,
) -> None:
    """``repeatable``: ``--store`` may be given more than once: ``args.store`` is the first,
    ``args.stores`` all of them (``serve`` reads several stores as the brokers of one cluster)."""
    if repeatable:
        parser.set_defaults(stores=None)
        parser.add_argument(
            "--store", type=Path, required=store_required, help=store_help, action=_RepeatedStore
        )
    else:
        parser.add_argument("--store", type=Path, required=store_required, help=store_help)
    parser.add_argument(
        "--config",
        "--conf",
        dest="config",
        type=Path,
        help="broker.conf: store paths, index geometry, broker identity (default: STORE/broker.conf)",
    )
    parser.add_argument("--commitlog", type=Path, help="CommitLog directory (storePathCommitLog)")
    parser.add_argument("--mapped-file-size", type=positive_int, help="mappedFileSizeCommitLog in bytes")
    parser.add_argument("--max-hash-slot-num", type=positive_int, help="maxHashSlotNum of the IndexFiles")
    parser.add_argument("--max-index-num", type=positive_int, help="maxIndexNum of the IndexFiles")


class _RepeatedStore(argparse.Action):
    """``--store`` given again: every value kept in ``stores``, the first in ``store``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        stores = [*(getattr(namespace, "stores", None) or []), values]
        namespace.stores = stores
        if len(stores) == 1:
            setattr(namespace, self.dest, values)


def config_file(args: argparse.Namespace) -> Path | None:
    """The broker.conf to read: ``--config``, else ``broker.conf`` inside ``--store`` when present.

    A store written by ``rmq-query demo-store`` (or any store kept with its broker.conf) records its
    geometry there; ignoring it would open the IndexFiles with the broker's default geometry and
    refuse them.
    """
    if args.config is not None:
        return Path(args.config).expanduser()
    if args.store is not None:
        beside = args.store.expanduser() / "broker.conf"
        if beside.is_file():
            return beside
    return None


def config_from_args(args: argparse.Namespace) -> StoreConfig:
    """The StoreConfig the flags describe: the file's values, ``--store`` for the paths, flags on top.

    Without ``--store`` and without a file the store is the broker's default, ``~/store``.
    """
    overrides: dict[str, object] = {
        "mapped_file_size_commit_log": args.mapped_file_size,
        "max_hash_slot_num": args.max_hash_slot_num,
        "max_index_num": args.max_index_num,
    }
    root = args.store.expanduser().resolve() if args.store is not None else None
    if root is not None:
        overrides["store_path_root_dir"] = root
        overrides["store_path_commit_log"] = root / "commitlog"
    if args.commitlog is not None:
        overrides["store_path_commit_log"] = args.commitlog.expanduser().resolve()
    conf = config_file(args)
    if conf is not None:
        return StoreConfig.load(conf, overrides=overrides)
    return StoreConfig.for_store(root if root is not None else Path.home() / "store", **overrides)
