"""Decode one CommitLog range into packed index entries: the work each decode task does.

Per record this is exactly the broker's ``buildIndex``, through the sequential builder's own
``index_keys`` and ``KeyHasher``: a transaction rollback is skipped, then ``topic#UNIQ_KEY`` (when
the property is present) and each non-empty token of ``KEYS`` split on single spaces become one
entry each, in that order. Each record is fully checked first, as the sequential walk checks it
(lengths add up to TOTALSIZE, PHYSICALOFFSET matches its position, BODYCRC matches the body); the
first record that fails ends the range early and the task reports where and why.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

from protocol.errors import ProtocolError
from protocol.message import read_index_fields
from protocol.message_flags import BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2
from store import record
from store.index_builder import KeyHasher, index_keys
from store.spark.entries import ENTRY
from store.spark.ranges import SIZE_MAGIC, CommitLogRange

PHYSICAL_OFFSET = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class RangeEntries:
    """What one range decoded into; ``stopped_at`` is set when a record failed its check.

    ``followed`` says whether more records follow the failed one inside the range (the planner hopped
    over it to them): then it is corruption in the middle of the log, never a torn tail.
    """

    index: int
    blob: bytes
    records: int
    bytes_read: int
    stopped_at: int | None = None
    reason: str = ""
    followed: bool = False


def describe_invalid(buf: mmap.mmap, pos: int, end: int, offset: int) -> str:
    """Why ``record.check`` rejected the record at ``pos``: which of its checks fails."""
    if pos + 8 > end:
        return "fewer than 8 bytes left for a record header"
    size, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return "an end-of-file blank record before the end of the range"
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return f"MAGICCODE {magic & 0xFFFFFFFF:#010x} is not a message magic code"
    if size < record.MIN_RECORD_SIZE or pos + size > end:
        return f"TOTALSIZE {size} does not fit"
    if record.check(buf, pos, end) <= 0:
        return f"field lengths do not add up to TOTALSIZE {size}"
    if record.check(buf, pos, end, offset) <= 0:
        return f"PHYSICALOFFSET {PHYSICAL_OFFSET.unpack_from(buf, pos + 28)[0]} is not the record's position"
    return "BODYCRC does not match the body"


def _stopped(
    rng: CommitLogRange, out: bytearray, records: int, buf: mmap.mmap, pos: int, end: int, reason: str
) -> RangeEntries:
    """The result of a range whose record at ``pos`` failed its check."""
    followed = False
    if pos + 8 <= end:
        size, _ = SIZE_MAGIC.unpack_from(buf, pos)
        followed = size >= record.MIN_RECORD_SIZE and pos + size < end
    return RangeEntries(
        rng.index,
        bytes(out),
        records,
        pos - (rng.start - rng.file_start),
        rng.file_start + pos,
        reason,
        followed,
    )


def decode_range(rng: CommitLogRange) -> RangeEntries:
    """Walk ``rng`` record by record and pack every index entry it yields."""
    out = bytearray()
    pack = ENTRY.pack
    records = 0
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = rng.start - rng.file_start
        end = rng.end - rng.file_start
        check = record.check
        fields_of = read_index_fields
        hasher = KeyHasher()
        while pos < end:
            size = check(mm, pos, end, rng.file_start + pos, check_crc=True)
            if size <= 0:
                reason = describe_invalid(mm, pos, end, rng.file_start + pos)
                return _stopped(rng, out, records, mm, pos, end, reason)
            try:
                f = fields_of(mm, pos)
            except ProtocolError as exc:
                return _stopped(rng, out, records, mm, pos, end, str(exc))
            topic = f.topic
            for key in index_keys(f):
                out += pack(hasher(topic, key), f.commit_log_offset, f.store_timestamp)
            records += 1
            pos += size
    return RangeEntries(rng.index, bytes(out), records, rng.end - rng.start)
