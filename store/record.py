"""Just enough of the CommitLog record layout to walk, validate and index records, fast.

The full decoder (``protocol.message``) builds a ``MessageExt`` with every field; walking a CommitLog
and building its index only needs the frame (TOTALSIZE, MAGICCODE, PHYSICALOFFSET) and the four
fields the broker's reput hands to ``buildIndex`` (SYSFLAG, STORETIMESTAMP, TOPIC, PROPERTIES). This
module reads exactly those with precompiled ``struct.Struct`` layouts and checks that the variable
lengths add up to TOTALSIZE, which is how a partially written tail is told from a whole record.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_TRANSACTION_MASK = 0xC
SYSFLAG_TRANSACTION_ROLLBACK = 0xC

PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"

#: TOTALSIZE .. BORNTIMESTAMP (48 bytes), fixed for every record.
PREFIX = struct.Struct(">iiiiiqqiq")
_SIZE_MAGIC = struct.Struct(">ii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_OFF_PHYSICAL = 28
_OFF_STORE_TS_V4 = 56
MIN_RECORD_SIZE = 91
BLANK_SIZE = 8

#: ``check`` results other than a record size.
BLANK = 0
INVALID = -1


class IndexFields(NamedTuple):
    """What the broker's dispatch request carries into ``IndexService.buildIndex``."""

    size: int
    physical_offset: int
    sys_flag: int
    store_timestamp: int
    topic: str
    keys: str | None
    uniq_key: str | None


def size_and_magic(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    return _SIZE_MAGIC.unpack_from(buf, pos)


def physical_offset(buf: bytes | memoryview, pos: int) -> int:
    return _I64.unpack_from(buf, pos + _OFF_PHYSICAL)[0]


def store_timestamp(buf: bytes | memoryview, pos: int) -> int:
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    return _I64.unpack_from(buf, pos + _OFF_STORE_TS_V4 + (12 if sys_flag & SYSFLAG_BORNHOST_V6 else 0))[0]


def _layout(
    buf: bytes | memoryview, pos: int, total: int, magic: int, sys_flag: int, crc: int | None = None
) -> tuple[int, int, int, int]:
    """(topic_at, topic_len, props_at, props_len) of a record, or raise ValueError if they do not add
    up (or, given the stored BODYCRC as ``crc``, if the body does not match it)."""
    p = pos + 48 + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8)
    p += 8 + (20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8) + 4 + 8
    end = pos + total
    if p + 4 > end:
        raise ValueError("short")
    body_len = _I32.unpack_from(buf, p)[0]
    if body_len < 0:
        raise ValueError("body length")
    p += 4
    if p + body_len > end:
        raise ValueError("short")
    if crc is not None and zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF != crc:
        raise ValueError("body CRC")
    p += body_len
    if magic == MAGIC_CODE_V2:
        if p + 2 > end:
            raise ValueError("short")
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    else:
        if p + 1 > end:
            raise ValueError("short")
        topic_len = buf[p]
        p += 1
    if topic_len < 0:
        raise ValueError("topic length")
    topic_at = p
    p += topic_len
    if p + 2 > end:
        raise ValueError("short")
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    props_at = p
    if props_len > 0:
        p += props_len
    if p != end:
        raise ValueError("lengths do not add up to TOTALSIZE")
    return topic_at, topic_len, props_at, max(props_len, 0)


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
    if pos + 8 > end:
        return INVALID
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return BLANK
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return INVALID
    if total < MIN_RECORD_SIZE or pos + total > end:
        return INVALID
    if expected_offset is not None and _I64.unpack_from(buf, pos + _OFF_PHYSICAL)[0] != expected_offset:
        return INVALID
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    crc = _I32.unpack_from(buf, pos + 8)[0] if check_crc else None
    try:
        _layout(buf, pos, total, magic, sys_flag, crc)
    except (ValueError, IndexError, struct.error):
        return INVALID
    return total


def property_value(props: bytes, name: str) -> str | None:
    """The value of one property, parsed like ``MessageDecoder.string2messageProperties``.

    Entries are ``name\\x01value`` separated by ``\\x02``; entries shorter than 3 characters, with an
    empty name or an empty value are ignored; a repeated name keeps its last value.
    """
    if not props:
        return None
    text = props.decode("utf-8", "replace")
    found: str | None = None
    prefix = name + "\x01"
    for item in text.split("\x02"):
        if len(item) >= 3 and item.startswith(prefix) and len(item) > len(prefix):
            found = item[len(prefix) :]
    return found


def index_fields(buf: bytes | memoryview, pos: int) -> IndexFields:
    """The dispatch fields of the (already checked) record at ``pos``."""
    total, magic, _crc, _qid, _flag, _qoff, phys, sys_flag, _born = PREFIX.unpack_from(buf, pos)
    born_len = 20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8
    store_ts = _I64.unpack_from(buf, pos + 48 + born_len)[0]
    topic_at, topic_len, props_at, props_len = _layout(buf, pos, total, magic, sys_flag)
    topic = bytes(buf[topic_at : topic_at + topic_len]).decode("utf-8", "replace")
    keys: str | None = None
    uniq: str | None = None
    if props_len > 0:
        text = bytes(buf[props_at : props_at + props_len]).decode("utf-8", "replace")
        for item in text.split("\x02"):
            if len(item) < 3:
                continue
            sep = item.find("\x01")
            if sep <= 0 or sep >= len(item) - 1:
                continue
            name = item[:sep]
            if name == PROPERTY_KEYS:
                keys = item[sep + 1 :]
            elif name == PROPERTY_UNIQ_KEY:
                uniq = item[sep + 1 :]
    return IndexFields(total, phys, sys_flag, store_ts, topic, keys, uniq)
