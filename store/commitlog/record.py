"""Walking a CommitLog: is there a whole record at this position, an end-of-file marker, or neither?

``protocol.message`` decodes records; walking a file needs a different question answered fast and
without exceptions: TOTALSIZE and MAGICCODE, the blank end-of-file marker, PHYSICALOFFSET equal to
where the record sits, the variable lengths adding up to TOTALSIZE and (as the broker's recovery
does) BODYCRC. That is how the written end of a preallocated file, or a torn record a live broker
is still writing, is told from a whole record. Offsets, widths and magic codes are
``protocol.record_layout``'s (the compiled twin's are ``protocol/_record_layout.h``).

``check`` runs once per record of every walk, so ``store/commitlog/_record_fast.c`` is its compiled twin
(loaded at the end, see ``protocol.accel``); this module stays the readable reference
(``check_reference``), and the tests compare the two.
"""

from __future__ import annotations

import mmap
import struct
import zlib

from protocol.accel import load
from protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BODY_CRC_AT,
    BODY_LENGTH_AT,
    BODY_LENGTH_WIDTH,
    HOST_KIND_SHIFT,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MAGIC_CODE_WIDTH,
    MIN_RECORD_SIZE,
    PHYSICAL_OFFSET_AT,
    PROPERTIES_LENGTH_WIDTH,
    SIZE_MAGIC,
    SIZE_MAGIC_WIDTH,
    STORE_TIMESTAMP_AT,
    SYS_FLAG_AT,
    TOPIC_LENGTH_WIDTH_V1,
    TOPIC_LENGTH_WIDTH_V2,
    TOTAL_SIZE_WIDTH,
)

_SIZE_MAGIC = SIZE_MAGIC
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

_MAGIC_BYTES = tuple(m.to_bytes(MAGIC_CODE_WIDTH, "big", signed=True) for m in (MAGIC_CODE_V1, MAGIC_CODE_V2))

#: ``check`` results other than a record size.
BLANK = 0
INVALID = -1


def store_timestamp(buf: bytes | memoryview, pos: int) -> int:
    sys_flag = _I32.unpack_from(buf, pos + SYS_FLAG_AT)[0]
    return _I64.unpack_from(buf, pos + STORE_TIMESTAMP_AT[(sys_flag >> HOST_KIND_SHIFT) & 3])[0]


def _layout(
    buf: bytes | memoryview, pos: int, total: int, magic: int, sys_flag: int, crc: int | None = None
) -> tuple[int, int, int, int]:
    """(topic_at, topic_len, props_at, props_len) of a record, or raise ValueError if they do not add
    up (or, given the stored BODYCRC as ``crc``, if the body does not match it)."""
    p = pos + BODY_LENGTH_AT[(sys_flag >> HOST_KIND_SHIFT) & 3]
    end = pos + total
    if p + BODY_LENGTH_WIDTH > end:
        raise ValueError("short")
    body_len = _I32.unpack_from(buf, p)[0]
    if body_len < 0:
        raise ValueError("body length")
    p += BODY_LENGTH_WIDTH
    if p + body_len > end:
        raise ValueError("short")
    if crc is not None and zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF != crc:
        raise ValueError("body CRC")
    p += body_len
    if magic == MAGIC_CODE_V2:
        if p + TOPIC_LENGTH_WIDTH_V2 > end:
            raise ValueError("short")
        topic_len = _I16.unpack_from(buf, p)[0]
        p += TOPIC_LENGTH_WIDTH_V2
    else:
        if p + TOPIC_LENGTH_WIDTH_V1 > end:
            raise ValueError("short")
        topic_len = buf[p]
        p += TOPIC_LENGTH_WIDTH_V1
    if topic_len < 0:
        raise ValueError("topic length")
    topic_at = p
    p += topic_len
    if p + PROPERTIES_LENGTH_WIDTH > end:
        raise ValueError("short")
    props_len = _I16.unpack_from(buf, p)[0]
    p += PROPERTIES_LENGTH_WIDTH
    props_at = p
    if props_len > 0:
        p += props_len
    if p != end:
        raise ValueError("lengths do not add up to TOTALSIZE")
    return topic_at, topic_len, props_at, max(props_len, 0)


def describe_invalid(buf: bytes | memoryview, pos: int, end: int, offset: int) -> str:
    """Why ``check`` rejects the bytes at ``pos`` (CommitLog offset ``offset``): the first check that fails.

    Error messages name it, so an operator can tell zeros (nothing written) from a torn or damaged record.
    """
    if pos + SIZE_MAGIC_WIDTH > end:
        return f"fewer than {SIZE_MAGIC_WIDTH} bytes left for a record header"
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if size == 0 and magic == 0:
        return "zeros where a record header should be"
    if magic == BLANK_MAGIC_CODE:
        return "an end-of-file blank record before the end of the range"
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return f"MAGICCODE {magic & 0xFFFFFFFF:#010x} is not a message magic code"
    if size < MIN_RECORD_SIZE or pos + size > end:
        return f"TOTALSIZE {size} does not fit"
    if check(buf, pos, end) <= 0:
        return f"field lengths do not add up to TOTALSIZE {size}"
    if check(buf, pos, end, offset) <= 0:
        physical = _I64.unpack_from(buf, pos + PHYSICAL_OFFSET_AT)[0]
        return f"PHYSICALOFFSET {physical} is not the record's position"
    return "BODYCRC does not match the body"


def resync(view: memoryview, pos: int, length: int, base: int, *, last: bool) -> tuple[int | None, int]:
    """Where whole records resume after the bad bytes at ``pos`` of a file (None: the data ends
    there), and how many bytes the search for them scanned.

    The CommitLog walk's rule, for every walker that must skip a bad record the same way (the
    sequential walk, the Spark decode tasks): first at ``pos + TOTALSIZE`` (a corrupt body or header
    field, the size intact), one check, cheap enough for the tail of a live file; unless the file is
    the last holding data (records never span files, so one before it was complete), also the next
    magic code whose record checks at exactly its own PHYSICALOFFSET (``base`` is the file's first
    offset). ``view`` must be a view of the whole file's buffer (``view.obj.find`` searches it).
    """
    size = _I32.unpack_from(view, pos)[0] if pos + TOTAL_SIZE_WIDTH <= length else 0
    nxt = pos + size
    if size >= MIN_RECORD_SIZE and nxt + SIZE_MAGIC_WIDTH <= length:
        if check(view, nxt, length, base + nxt, check_crc=True) > 0:
            return nxt, 0
    if last:
        return None, 0
    scanned = 0
    search = pos + 1
    find = view.obj.find  # type: ignore[union-attr]
    while search < length:
        hits = [h for h in (find(m, search, length) for m in _MAGIC_BYTES) if h >= 0]
        if not hits:
            return None, scanned + length - search
        at = min(hits) - TOTAL_SIZE_WIDTH  # the magic code follows TOTALSIZE
        scanned += min(hits) + 1 - search
        if at > pos and check(view, at, length, base + at, check_crc=True) > 0:
            return at, scanned
        search = min(hits) + 1
    return None, scanned


def check(
    buf: bytes | memoryview,
    pos: int,
    end: int,
    expected_offset: int | None = None,
    *,
    check_crc: bool = False,
) -> int:
    """Size of the whole record at ``pos`` (within ``end``), ``BLANK`` for an end-of-file marker,
    ``INVALID`` for anything else (zeros after the tail, a torn or corrupt record).

    ``check_crc`` also verifies BODYCRC, as the broker's recovery does (``checkCRCOnRecover``)."""
    if pos + SIZE_MAGIC_WIDTH > end:
        return INVALID
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return BLANK
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return INVALID
    if total < MIN_RECORD_SIZE or pos + total > end:
        return INVALID
    if expected_offset is not None and _I64.unpack_from(buf, pos + PHYSICAL_OFFSET_AT)[0] != expected_offset:
        return INVALID
    sys_flag = _I32.unpack_from(buf, pos + SYS_FLAG_AT)[0]
    crc = _I32.unpack_from(buf, pos + BODY_CRC_AT)[0] if check_crc else None
    try:
        _layout(buf, pos, total, magic, sys_flag, crc)
    except (ValueError, IndexError, struct.error):
        return INVALID
    return total


def looks_complete(buf: bytes | memoryview, pos: int, total: int) -> bool:
    """Whether a record that ``check``s can also be told fully written, properties included.

    BODYCRC covers only the body, and a preallocated file is zeros where nothing was written yet, so
    a record whose size, body and lengths are written but whose properties are still arriving checks
    like a whole one. Writes are in order, so the record is whole once its last byte is written. The
    properties are ``name 0x01 value`` pairs joined by 0x02 (``MessageDecoder.messageProperties2String``
    drops the last separator), so they end in the last value's last byte, or 0x01 for an empty value:
    0 only for a value ending in U+0000, which such a record then waits for its successor to show.
    A record without properties (PROPERTIES length 0) has no keys to lose. Anything else ending in 0
    may still be arriving.
    """
    if buf[pos + total - 1] != 0:
        return True
    return buf[pos + total - PROPERTIES_LENGTH_WIDTH] == 0 and _props_len(buf, pos, total) == 0


def _props_len(buf: bytes | memoryview, pos: int, total: int) -> int:
    magic = _SIZE_MAGIC.unpack_from(buf, pos)[1]
    sys_flag = _I32.unpack_from(buf, pos + SYS_FLAG_AT)[0]
    try:
        return _layout(buf, pos, total, magic, sys_flag)[3]
    except (ValueError, IndexError, struct.error):
        return -1


def whole_run(
    buf: bytes | memoryview, pos: int, end: int, base: int, soft_end: int, max_records: int
) -> tuple[int, int]:
    """How far whole records go on from ``pos``: ``(stop, records)``.

    Each record is ``check``ed within ``end`` at its own PHYSICALOFFSET (``base + pos``: ``base`` is
    the file's first offset) with BODYCRC, as every CommitLog walk checks it. The run stops before
    the first position that is not a whole record (a blank end-of-file marker, zeros, a torn or
    corrupt record: ``stop`` is that position), once ``stop`` reaches ``soft_end`` (a record that
    starts before it may run past it, never past ``end``), or after ``max_records`` records. The
    reput's walk (``store.reput.walk``) finds the runs it hands its dispatchers with it, in one call
    per run (compiled twin below).
    """
    records = 0
    while pos < soft_end and records < max_records:
        size = check(buf, pos, end, base + pos, check_crc=True)
        if size <= 0:
            break
        pos += size
        records += 1
    return pos, records


def hop(buf: bytes | memoryview | mmap.mmap, pos: int, soft_end: int) -> int:
    """How far records go on from ``pos`` followed by TOTALSIZE alone: the first position, at or past
    ``soft_end`` or not such a record (fewer than 8 bytes left, a MAGICCODE that is not a message's,
    a TOTALSIZE below the smallest record or past the end of ``buf``).

    The Spark planner's step (``store.spark.ranges.plan_file``: it checks nothing else; the decode
    tasks check each record fully), compiled below: the plan of a 1 GiB file is one task per file,
    and a Python step per record made it the pipeline's longest serial stretch.
    """
    length = len(buf)
    while pos < soft_end:
        size = _hop_size(buf, pos, length)
        if not size:
            break
        pos += size
    return pos


def _hop_size(buf: bytes | memoryview | mmap.mmap, pos: int, length: int) -> int:
    """The TOTALSIZE of the record at ``pos`` if ``hop`` goes over it, else 0 (fewer than 8 bytes
    left, a MAGICCODE that is not a message's, a TOTALSIZE below the smallest record or past the end)."""
    if pos + SIZE_MAGIC_WIDTH > length:
        return 0
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if (magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2) or size < MIN_RECORD_SIZE or size > length - pos:
        return 0
    return size


#: ``hop_span``'s store times when it hopped no record: an empty span (``lo > hi``).
NO_SPAN = (2**63 - 1, -(2**63))


def hop_span(buf: bytes | memoryview | mmap.mmap, pos: int, soft_end: int) -> tuple[int, int, int]:
    """``hop``, and the smallest and largest STORETIMESTAMP of the records it hopped over:
    ``(pos, lo, hi)``, ``NO_SPAN`` for none.

    A time-filtered read without a topic (``store.spark.message_plan``) leaves out a range only when
    no record of it can lie in the window. Store times go down when the clock is set back, so a
    range's first and last records do not bound it: its smallest and largest do. The hop reads every
    record's header anyway; the 8 bytes of STORETIMESTAMP lie in the same cache lines (a hopped
    record is at least ``MIN_RECORD_SIZE`` bytes, which holds the header with both hosts IPv6).
    """
    length = len(buf)
    lo, hi = NO_SPAN
    while pos < soft_end:
        size = _hop_size(buf, pos, length)
        if not size:
            break
        ts = store_timestamp(buf, pos)
        lo, hi = min(lo, ts), max(hi, ts)
        pos += size
    return pos, lo, hi


#: The pure-Python references under their own names (the tests compare them with the compiled twins).
check_reference = check
whole_run_reference = whole_run
hop_reference = hop
hop_span_reference = hop_span

_fast = load("store.commitlog._record_fast")
if _fast is not None:
    check = _fast.check  # the compiled twin of the reference above (same answers)
    whole_run = _fast.whole_run
    hop = _fast.hop
    hop_span = _fast.hop_span
