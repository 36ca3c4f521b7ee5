"""The store's ``checkpoint`` file and ``abort`` marker, as the broker keeps them.

``<storeRoot>/checkpoint`` is one 4 KiB page of big-endian i64: physicMsgTimestamp @0,
logicsMsgTimestamp @8, indexMsgTimestamp @16 (RocketMQ 4.x and 5.x), masterFlushedOffset @24 and
confirmPhyOffset @32 (5.x; zero in 4.x files). The broker writes ``indexMsgTimestamp`` only when an
IndexFile fills up, and after an abnormal exit (``<storeRoot>/abort`` present at start) it destroys
every IndexFile whose endTimestamp is newer. Bytes past the fields are preserved on rewrite.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import construct as cs

from store.errors import CheckpointError

CHECKPOINT_SIZE = 4096

#: Held around a read-modify-write of a checkpoint file that may run beside another thread's: the
#: consume queue builder's flush runs in a server's executor (``ConsumeQueueBuilder.flush``) while
#: the index builder, on the event loop, records a full index file (``IndexBuilder._roll``); each
#: rewrites the whole page, so without it one could put back a field the other had just moved on.
UPDATE_LOCK = threading.Lock()

#: Declared once; not a hot path, so ``construct`` keeps the layout readable.
CHECKPOINT_LAYOUT = cs.Struct(
    "physic_msg_timestamp" / cs.Int64sb,
    "logics_msg_timestamp" / cs.Int64sb,
    "index_msg_timestamp" / cs.Int64sb,
    "master_flushed_offset" / cs.Int64sb,
    "confirm_phy_offset" / cs.Int64sb,
)
_FIELDS_SIZE = CHECKPOINT_LAYOUT.sizeof()


@dataclasses.dataclass(slots=True)
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Read a checkpoint; a missing file is an error, a short one reads missing fields as 0."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from exc
        if len(data) < 24:
            raise CheckpointError(f"checkpoint {path} has {len(data)} bytes, fewer than its 3 timestamps")
        parsed = CHECKPOINT_LAYOUT.parse(data[:_FIELDS_SIZE].ljust(_FIELDS_SIZE, b"\0"))
        return cls(**{f.name: int(parsed[f.name]) for f in dataclasses.fields(cls)})

    @classmethod
    def read_or_default(cls, path: str | os.PathLike[str]) -> Checkpoint:
        try:
            return cls.read(path)
        except CheckpointError:
            return cls()

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write (or update in place) the 4 KiB page, keeping any bytes after the fields, then fsync."""
        target = Path(path)
        try:
            page = bytearray(target.read_bytes()) if target.exists() else bytearray()
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {target}: {exc}") from exc
        page = page.ljust(CHECKPOINT_SIZE, b"\0")
        page[:_FIELDS_SIZE] = CHECKPOINT_LAYOUT.build(dataclasses.asdict(self))
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, bytes(page), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise CheckpointError(f"cannot write checkpoint {target}: {exc}") from exc


def abnormal_exit(store_root: str | os.PathLike[str]) -> bool:
    """True when ``<storeRoot>/abort`` exists: the last process did not shut down cleanly."""
    return (Path(store_root) / "abort").exists()


def create_abort_marker(store_root: str | os.PathLike[str]) -> None:
    """Mark the store as in use (removed again by ``remove_abort_marker`` on a clean shutdown)."""
    Path(store_root).mkdir(parents=True, exist_ok=True)
    (Path(store_root) / "abort").touch()


def remove_abort_marker(store_root: str | os.PathLike[str]) -> None:
    try:
        (Path(store_root) / "abort").unlink()
    except FileNotFoundError:
        pass
