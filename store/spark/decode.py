"""Decode one CommitLog range into packed index entries: the work each decode task does.

Per record this is exactly the broker's ``buildIndex``: a transaction rollback is skipped, then
``topic#UNIQ_KEY`` (when the property is present) and each non-empty token of ``KEYS`` split on
single spaces become one entry each, in that order. Each record is fully checked first (lengths add
up to TOTALSIZE, PHYSICALOFFSET matches its position); the first record that fails ends the range
early and the task reports where and why instead of guessing past it.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

from protocol.index_key import index_key_hash
from store import record
from store.spark.entries import ENTRY
from store.spark.ranges import CommitLogRange


@dataclass(frozen=True, slots=True)
class RangeEntries:
    """What one range decoded into; ``stopped_at`` is set when a record failed its check."""

    index: int
    blob: bytes
    records: int
    bytes_read: int
    stopped_at: int | None = None
    reason: str = ""


def index_keys(topic: str, keys: str | None, uniq_key: str | None, sys_flag: int) -> list[str]:
    """The index keys the broker puts for one record, in its order (empty for a rollback)."""
    if sys_flag & record.SYSFLAG_TRANSACTION_MASK == record.SYSFLAG_TRANSACTION_ROLLBACK:
        return []
    out = []
    prefix = topic + "#"
    if uniq_key is not None:
        out.append(prefix + uniq_key)
    if keys:
        out.extend(prefix + token for token in keys.split(" ") if token)
    return out


def decode_range(rng: CommitLogRange) -> RangeEntries:
    """Walk ``rng`` record by record and pack every index entry it yields."""
    out = bytearray()
    pack = ENTRY.pack
    records = 0
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = rng.start - rng.file_start
        end = rng.end - rng.file_start
        check = record.check
        fields_of = record.index_fields
        while pos < end:
            size = check(mm, pos, end, rng.file_start + pos)
            if size <= 0:
                reason = (
                    "end-of-file marker inside a range" if size == record.BLANK else "record fails its check"
                )
                return RangeEntries(
                    rng.index,
                    bytes(out),
                    records,
                    pos - (rng.start - rng.file_start),
                    rng.file_start + pos,
                    reason,
                )
            f = fields_of(mm, pos)
            for key in index_keys(f.topic, f.keys, f.uniq_key, f.sys_flag):
                out += pack(index_key_hash(key), f.physical_offset, f.store_timestamp)
            records += 1
            pos += size
    return RangeEntries(rng.index, bytes(out), records, rng.end - rng.start)
