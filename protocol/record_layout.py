"""The CommitLog record layout, declared once: every Python reader and writer of records takes it here.

Where it comes from (RocketMQ 4.9.7): ``CommitLog.calMsgLength`` (the fields and their widths),
``CommitLog.DefaultAppendMessageCallback`` / ``MessageExtEncoder.encode`` (the order the broker writes
them, the end-of-file blank of ``END_FILE_MIN_BLANK_LENGTH`` bytes, the properties limit of
``Short.MAX_VALUE``) and ``MessageDecoder`` (``QUEUE_OFFSET_POSITION``, ``PHY_POS_POSITION``,
``SYSFLAG_POSITION``, the host widths by sysFlag). The V2 magic code and its two-byte topic length
are RocketMQ 5's (``MessageDecoder.MESSAGE_MAGIC_CODE_V2``); 4.9.7 writes V1 only.

A record, big-endian, byte offsets from its start::

      0 TOTALSIZE        i32   the whole record's size
      4 MAGICCODE        i32   MAGIC_CODE_V1 / MAGIC_CODE_V2 (BLANK_MAGIC_CODE: end-of-file blank)
      8 BODYCRC          i32   CRC-32 of the stored body, 31 bits
     12 QUEUEID          i32
     16 FLAG             i32
     20 QUEUEOFFSET      i64
     28 PHYSICALOFFSET   i64   the record's own CommitLog offset
     36 SYSFLAG          i32   bit 0x10: born host IPv6, bit 0x20: store host IPv6
     40 BORNTIMESTAMP    i64
     48 BORNHOST         4 or 16 bytes of IP + i32 port: 8 or 20 bytes
        STORETIMESTAMP   i64   at 56, or 68 after an IPv6 born host
        STOREHOST        8 or 20 bytes, as BORNHOST
        RECONSUMETIMES   i32
        PREPARED TX OFF  i64
        BODYLEN          i32   then BODY (BODYLEN bytes)
        TOPICLEN         i8 (V1) or i16 (V2), then TOPIC
        PROPERTIESLEN    i16, then PROPERTIES

Everything before BORNHOST sits at a fixed offset (``*_AT``); what follows moves with the two IPv6
bits, so it is given per *host kind* ``(sys_flag >> HOST_KIND_SHIFT) & 3`` (bit 0 born host IPv6,
bit 1 store host IPv6) in tables indexed by it, or computed by the functions below. The smallest
record (V1, IPv4 hosts, empty body, topic and properties) is ``MIN_RECORD_SIZE`` = 91 bytes. An
end-of-file blank is TOTALSIZE (the free bytes) and ``BLANK_MAGIC_CODE``: ``BLANK_SIZE`` = 8 bytes.

Hot loops read these as module constants (bound to local names where it matters), never through
attribute lookups or calls. ``protocol/_record_layout.h`` states the same layout for the compiled
twins; ``tests/protocol/test_record_layout.py`` checks the two agree and match records Java wrote.
"""

from __future__ import annotations

import struct

# -- magic codes (the signed int32 Java writes) ------------------------------------------------------

#: Record magic, version 1 (``CommitLog.MESSAGE_MAGIC_CODE``): the topic length is one byte.
MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
#: Record magic, version 2 (RocketMQ 5): the topic length is two bytes (topics over 127 bytes).
MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
#: ``CommitLog.BLANK_MAGIC_CODE``: the ``[free bytes][magic]`` marker that pads the end of a file.
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

# -- the sysFlag bits that move fields (``MessageSysFlag``) ----------------------------------------

#: The born host is IPv6 (16-byte address): BORNHOST is 20 bytes, not 8.
BORNHOST_V6_FLAG = 0x10
#: The store host is IPv6 (``STOREHOSTADDRESS_V6_FLAG``): STOREHOST is 20 bytes, not 8.
STOREHOST_V6_FLAG = 0x20
#: ``(sys_flag >> HOST_KIND_SHIFT) & 3`` is the host kind the per-kind tables below are indexed by.
HOST_KIND_SHIFT = 4

# -- widths of the fields (bytes) ---------------------------------------------------------------------

TOTAL_SIZE_WIDTH = 4
MAGIC_CODE_WIDTH = 4
BODY_CRC_WIDTH = 4
QUEUE_ID_WIDTH = 4
FLAG_WIDTH = 4
QUEUE_OFFSET_WIDTH = 8
PHYSICAL_OFFSET_WIDTH = 8
SYS_FLAG_WIDTH = 4
BORN_TIMESTAMP_WIDTH = 8
IPV4_WIDTH = 4
IPV6_WIDTH = 16
PORT_WIDTH = 4
#: A host field: address + port.
HOST_V4_WIDTH = IPV4_WIDTH + PORT_WIDTH  # 8
HOST_V6_WIDTH = IPV6_WIDTH + PORT_WIDTH  # 20
STORE_TIMESTAMP_WIDTH = 8
RECONSUME_TIMES_WIDTH = 4
PREPARED_TRANSACTION_OFFSET_WIDTH = 8
BODY_LENGTH_WIDTH = 4
#: TOPICLEN is a signed byte in V1, a signed short in V2.
TOPIC_LENGTH_WIDTH_V1 = 1
TOPIC_LENGTH_WIDTH_V2 = 2
#: PROPERTIESLEN is a signed short.
PROPERTIES_LENGTH_WIDTH = 2

#: The longest topic (bytes) each magic code can carry, and the longest properties string.
TOPIC_MAX_LENGTH_V1 = 0x7F  # Byte.MAX_VALUE
TOPIC_MAX_LENGTH_V2 = 0x7FFF  # Short.MAX_VALUE
TOPIC_MAX_LENGTH = {MAGIC_CODE_V1: TOPIC_MAX_LENGTH_V1, MAGIC_CODE_V2: TOPIC_MAX_LENGTH_V2}
PROPERTIES_MAX_LENGTH = 0x7FFF  # Short.MAX_VALUE

# -- fixed offsets --------------------------------------------------------------------------------------

TOTAL_SIZE_AT = 0
MAGIC_CODE_AT = TOTAL_SIZE_AT + TOTAL_SIZE_WIDTH  # 4
BODY_CRC_AT = MAGIC_CODE_AT + MAGIC_CODE_WIDTH  # 8
QUEUE_ID_AT = BODY_CRC_AT + BODY_CRC_WIDTH  # 12
FLAG_AT = QUEUE_ID_AT + QUEUE_ID_WIDTH  # 16
QUEUE_OFFSET_AT = FLAG_AT + FLAG_WIDTH  # 20
PHYSICAL_OFFSET_AT = QUEUE_OFFSET_AT + QUEUE_OFFSET_WIDTH  # 28
SYS_FLAG_AT = PHYSICAL_OFFSET_AT + PHYSICAL_OFFSET_WIDTH  # 36
#: The bytes up to and including SYSFLAG: what must be there before the rest can be located.
SYS_FLAG_END = SYS_FLAG_AT + SYS_FLAG_WIDTH  # 40
BORN_TIMESTAMP_AT = SYS_FLAG_END  # 40
BORN_HOST_AT = BORN_TIMESTAMP_AT + BORN_TIMESTAMP_WIDTH  # 48

#: TOTALSIZE and MAGICCODE, the two fields every record and every end-of-file blank begins with.
SIZE_MAGIC_WIDTH = TOTAL_SIZE_WIDTH + MAGIC_CODE_WIDTH  # 8
SIZE_MAGIC = struct.Struct(">ii")
#: The end-of-file blank (``END_FILE_MIN_BLANK_LENGTH``): a record needs this much room after it.
BLANK_SIZE = SIZE_MAGIC_WIDTH  # 8

# -- the parts that move with the IPv6 bits ----------------------------------------------------------


def host_kind(sys_flag: int) -> int:
    """0..3: bit 0 set for an IPv6 born host, bit 1 for an IPv6 store host."""
    return (sys_flag >> HOST_KIND_SHIFT) & 3


def born_host_width(sys_flag: int) -> int:
    return HOST_V6_WIDTH if sys_flag & BORNHOST_V6_FLAG else HOST_V4_WIDTH


def store_host_width(sys_flag: int) -> int:
    return HOST_V6_WIDTH if sys_flag & STOREHOST_V6_FLAG else HOST_V4_WIDTH


def _store_timestamp_at(sys_flag: int) -> int:
    return BORN_HOST_AT + born_host_width(sys_flag)


def _body_length_at(sys_flag: int) -> int:
    return (
        _store_timestamp_at(sys_flag)
        + STORE_TIMESTAMP_WIDTH
        + store_host_width(sys_flag)
        + RECONSUME_TIMES_WIDTH
        + PREPARED_TRANSACTION_OFFSET_WIDTH
    )


_KIND_FLAGS = tuple(kind << HOST_KIND_SHIFT for kind in range(4))
#: Where STORETIMESTAMP is, by host kind: (56, 68, 56, 68).
STORE_TIMESTAMP_AT = tuple(_store_timestamp_at(f) for f in _KIND_FLAGS)
#: Where BODYLEN is, by host kind: (84, 96, 96, 108); the body starts BODY_LENGTH_WIDTH later.
BODY_LENGTH_AT = tuple(_body_length_at(f) for f in _KIND_FLAGS)


def store_timestamp_at(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP in a record with this sysFlag."""
    return STORE_TIMESTAMP_AT[(sys_flag >> HOST_KIND_SHIFT) & 3]


def body_length_at(sys_flag: int) -> int:
    """Offset of BODYLEN in a record with this sysFlag (the fixed part ends 4 bytes later)."""
    return BODY_LENGTH_AT[(sys_flag >> HOST_KIND_SHIFT) & 3]


def topic_length_width(magic: int) -> int:
    """Width of TOPICLEN: 2 for MAGIC_CODE_V2, else 1."""
    return TOPIC_LENGTH_WIDTH_V2 if magic == MAGIC_CODE_V2 else TOPIC_LENGTH_WIDTH_V1


def record_size(
    sys_flag: int, body_length: int, topic_length: int, properties_length: int, magic: int = MAGIC_CODE_V1
) -> int:
    """TOTALSIZE of a record with these lengths (``CommitLog.calMsgLength``; a negative length counts 0)."""
    return (
        body_length_at(sys_flag)
        + BODY_LENGTH_WIDTH
        + max(body_length, 0)
        + topic_length_width(magic)
        + topic_length
        + PROPERTIES_LENGTH_WIDTH
        + max(properties_length, 0)
    )


#: The smallest record: V1, IPv4 hosts, empty body, topic and properties.
MIN_RECORD_SIZE = record_size(0, 0, 0, 0)  # 91

# -- struct layouts -------------------------------------------------------------------------------------

#: The fixed-offset head in field order (name, struct code); ``head_struct`` reads some of it.
_HEAD_FIELDS = (
    ("TOTALSIZE", "i"),
    ("MAGICCODE", "i"),
    ("BODYCRC", "i"),
    ("QUEUEID", "i"),
    ("FLAG", "i"),
    ("QUEUEOFFSET", "q"),
    ("PHYSICALOFFSET", "q"),
    ("SYSFLAG", "i"),
    ("BORNTIMESTAMP", "q"),
)


def head_struct(*names: str) -> struct.Struct:
    """A ``struct.Struct`` unpacking the named head fields (from offset 0, in record order), the
    fields between them skipped: ``head_struct("TOTALSIZE", "QUEUEID")`` is ``>i8xi``."""
    wanted = list(names)
    known = [name for name, _ in _HEAD_FIELDS]
    if any(name not in known for name in wanted) or wanted != sorted(wanted, key=known.index):
        raise ValueError(f"head fields must be among {known}, in that order: {names}")
    fmt, pad = ">", 0
    for name, code in _HEAD_FIELDS:
        if not wanted:
            break
        if name == wanted[0]:
            fmt += (f"{pad}x" if pad else "") + code
            pad = 0
            wanted.pop(0)
        else:
            pad += struct.calcsize(">" + code)
    return struct.Struct(fmt)


def _fixed_part(sys_flag: int) -> struct.Struct:
    born_ip = born_host_width(sys_flag) - PORT_WIDTH
    store_ip = store_host_width(sys_flag) - PORT_WIDTH
    return struct.Struct(f">iiiiiqqiq{born_ip}siq{store_ip}siiqi")


#: The fixed part, TOTALSIZE through BODYLEN (17 values, hosts as bytes), by host kind.
FIXED_PART = tuple(_fixed_part(f) for f in _KIND_FLAGS)

assert BORNHOST_V6_FLAG == 1 << HOST_KIND_SHIFT and STOREHOST_V6_FLAG == 2 << HOST_KIND_SHIFT
assert all(FIXED_PART[k].size == BODY_LENGTH_AT[k] + BODY_LENGTH_WIDTH for k in range(4))
assert head_struct(*(name for name, _ in _HEAD_FIELDS)).size == BORN_HOST_AT
