"""What the load generator asks for: real keys and offsets, sampled from a store or read from files.

A benchmark is only honest if it asks for things that exist, spread the way real lookups are: so the
samples come from the CommitLog itself (every record's offset, every ``topic``/key pair in its KEYS,
every unique key; rolled-back transactions give offsets only, as the broker never indexes them),
walked through ``store.commitlog.mapped_files`` and the index fast path of ``protocol.message`` (this package
never parses files itself). Operators without the store at hand give a key list (``TOPIC KEY`` per
line) and/or an id list (offset message ids, one per line).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import ProtocolError
from protocol.message import read_index_fields
from protocol.message_flags import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_id import decode_offset_msg_id
from protocol.record_layout import QUEUE_ID_AT, QUEUE_ID_WIDTH, QUEUE_OFFSET_AT, QUEUE_OFFSET_WIDTH
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig

#: Records walked at most when sampling a store (enough variety, bounded start-up time).
DEFAULT_SAMPLE_LIMIT = 200_000


class SampleError(ValueError):
    """The samples cannot be built (no store there, an unreadable list, nothing usable)."""


@dataclass(slots=True)
class Samples:
    """Offsets for VIEW_MESSAGE_BY_ID, ``(topic, key)`` pairs for QUERY_MESSAGE, and queue positions
    ``(topic, queueId, queueOffset, storeTimestamp)`` for PULL_MESSAGE and SEARCH_OFFSET_BY_TIMESTAMP
    (records with a consume-queue entry only: prepared and rolled-back transactions have none)."""

    offsets: list[int] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    unique_keys: list[tuple[str, str]] = field(default_factory=list)
    positions: list[tuple[str, int, int, int]] = field(default_factory=list)

    def pick_offset(self, rng: random.Random) -> int:
        return self.offsets[rng.randrange(len(self.offsets))]

    def pick_key(self, rng: random.Random) -> tuple[str, str]:
        return self.keys[rng.randrange(len(self.keys))]


def _mapped_file_size(commitlog_dir: Path) -> int:
    """The CommitLog file size: every file but the last is preallocated to it, so the first tells."""
    try:
        names = sorted(n for n in os.listdir(commitlog_dir) if n.isdigit())
    except OSError as exc:
        raise SampleError(f"no CommitLog directory at {commitlog_dir}: {exc.strerror}") from exc
    if not names:
        raise SampleError(f"no CommitLog files in {commitlog_dir}")
    return (commitlog_dir / names[0]).stat().st_size


def sample_store(
    store_dir: str | os.PathLike[str] | None,
    *,
    config_path: str | os.PathLike[str] | None = None,
    limit: int = DEFAULT_SAMPLE_LIMIT,
) -> Samples:
    """Walk up to ``limit`` records of the store's CommitLog and collect offsets, keys, unique keys.

    With ``config_path`` the CommitLog's place and file size come from that broker.conf, with
    ``store_dir`` (when given) as the store root over the file's, as the store commands do; without
    it, ``store_dir/commitlog`` is read and the file size taken from its first file. A config that
    cannot be read or makes no sense is a ``SampleError`` like any other unusable source.
    """
    if config_path is not None:
        try:
            config = StoreConfig.load(config_path, overrides={"store_path_root_dir": store_dir or None})
        except ValueError as exc:  # ConfigError: unreadable file, a bad value, an impossible size
            raise SampleError(f"cannot use {config_path}: {exc}") from exc
        commitlog_dir, file_size = config.store_path_commit_log, config.mapped_file_size_commit_log
    elif store_dir is not None:
        commitlog_dir = Path(store_dir) / "commitlog"
        file_size = _mapped_file_size(commitlog_dir)
    else:
        raise SampleError("no store to sample: give a store directory or its broker.conf")
    commitlog = CommitLog(commitlog_dir, file_size)
    samples = Samples()
    try:
        for count, (offset, record) in enumerate(commitlog.iter_records()):
            if count >= limit:
                break
            try:
                fields = read_index_fields(record)
            except ProtocolError:
                continue
            samples.offsets.append(offset)
            transaction = fields.sys_flag & TRANSACTION_TYPE_MASK
            if transaction != TRANSACTION_PREPARED_TYPE and transaction != TRANSACTION_ROLLBACK_TYPE:
                queue_id = int.from_bytes(record[QUEUE_ID_AT : QUEUE_ID_AT + QUEUE_ID_WIDTH], "big")
                queue_offset = int.from_bytes(
                    record[QUEUE_OFFSET_AT : QUEUE_OFFSET_AT + QUEUE_OFFSET_WIDTH], "big"
                )
                samples.positions.append((fields.topic, queue_id, queue_offset, fields.store_timestamp))
            if transaction == TRANSACTION_ROLLBACK_TYPE:
                continue  # stored but never indexed: a key query could not find it
            if fields.keys:
                samples.keys.extend((fields.topic, k) for k in fields.keys.split(" ") if k)
            if fields.unique_key:
                samples.unique_keys.append((fields.topic, fields.unique_key))
    finally:
        commitlog.close()
    if not samples.offsets:
        raise SampleError(f"no readable records in {commitlog_dir}")
    return samples


def read_key_list(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``TOPIC KEY`` per line (keys never contain spaces: KEYS is space-separated); ``#`` comments."""
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(_lines(path), 1):
        parts = line.split()
        if len(parts) != 2:
            raise SampleError(f"{path}:{number}: expected 'TOPIC KEY', got {line!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def read_id_list(path: str | os.PathLike[str]) -> list[int]:
    """Offset message ids, one per line; the CommitLog offset of each is what a view asks for."""
    offsets: list[int] = []
    for number, line in enumerate(_lines(path), 1):
        try:
            offsets.append(decode_offset_msg_id(line.strip()).offset)
        except ProtocolError as exc:
            raise SampleError(f"{path}:{number}: {exc}") from exc
    return offsets


def _lines(path: str | os.PathLike[str]) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SampleError(f"cannot read {path}: {exc}") from exc
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
