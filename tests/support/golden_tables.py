"""The golden stores as the message table's reference: copies to read, and every record's row by the
sequential walk (``CommitLog.iter_records``, the walk ``dump-messages`` uses, decoded one by one)."""

from __future__ import annotations

import shutil
from pathlib import Path

from protocol.message import decode_message
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.spark.message_rows import message_row

#: The real broker's stores, each beside its broker.conf (``<name>.broker.conf``).
STORES = ("java-4.9.7-a", "java-4.9.7-send")


def copy_golden(stores_dir: Path, root: Path) -> dict[str, Path]:
    """Copy both golden stores and their broker.conf files under ``root`` (the golden data is never
    touched); the copies' broker.conf paths by store name."""
    confs = {}
    for name in STORES:
        shutil.copytree(stores_dir / name, root / name)
        shutil.copy(stores_dir / f"{name}.broker.conf", root / f"{name}.broker.conf")
        for path in [root / name, *(root / name).rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        confs[name] = root / f"{name}.broker.conf"
    return confs


def sequential_rows(conf: Path, broker: str) -> list[tuple]:
    """Every record of the store by the sequential walk, as table rows."""
    config = StoreConfig.load(conf)
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        return [message_row(decode_message(buf), broker) for _offset, buf in log.iter_records()]
    finally:
        log.close()
