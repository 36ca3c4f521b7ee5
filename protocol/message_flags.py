"""The constants of a CommitLog record: ``sysFlag`` bits and well-known property names.

They live apart from the codec because the store, the server and the clients test these bits without
needing the codec itself. Values are RocketMQ's (``MessageDecoder``, ``MessageSysFlag``,
``MessageConst``). The magic codes and the IPv6 bits are ``protocol.record_layout``'s, re-exported.
"""

from __future__ import annotations

from enum import IntEnum

# The magic codes and the two IPv6 bits decide where a record's fields lie: they are declared with
# the layout (``protocol.record_layout``) and named here too, beside the other sysFlag bits.
from protocol.record_layout import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    STOREHOST_V6_FLAG,
)

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_TYPE_MASK",
    "COMPRESSION_TYPE_SHIFT",
    "INNER_BATCH_FLAG",
    "KEY_SEPARATOR",
    "MAGIC_CODE_V1",
    "MAGIC_CODE_V2",
    "MULTI_TAGS_FLAG",
    "NAME_VALUE_SEPARATOR",
    "NEED_UNWRAP_FLAG",
    "PROPERTY_KEYS",
    "PROPERTY_SEPARATOR",
    "PROPERTY_TAGS",
    "PROPERTY_UNIQ_KEY",
    "STOREHOST_V6_FLAG",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "TRANSACTION_TYPE_MASK",
    "CompressionType",
    "TransactionType",
    "compression_type_value",
    "transaction_type",
]

# sysFlag bits (``MessageSysFlag``).
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
# BORNHOST_V6_FLAG = 0x10 and STOREHOST_V6_FLAG = 0x20: imported above.
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80

#: The compression type sits in bits 8..10 of sysFlag (only meaningful with COMPRESSED_FLAG).
COMPRESSION_TYPE_SHIFT = 8
COMPRESSION_TYPE_MASK = 0x7 << COMPRESSION_TYPE_SHIFT


class CompressionType(IntEnum):
    """Body codecs by their sysFlag value; 0 is the pre-4.9.x flag meaning zlib."""

    LEGACY_ZLIB = 0
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


class TransactionType(IntEnum):
    """``sysFlag & 0xC``: the broker indexes every type except ROLLBACK."""

    NOT_TRANSACTION = TRANSACTION_NOT_TYPE
    PREPARED = TRANSACTION_PREPARED_TYPE
    COMMIT = TRANSACTION_COMMIT_TYPE
    ROLLBACK = TRANSACTION_ROLLBACK_TYPE


def compression_type_value(sys_flag: int) -> int:
    """The raw 3-bit compression type of ``sys_flag`` (may be a value no codec is defined for)."""
    return (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT


def transaction_type(sys_flag: int) -> TransactionType:
    """The transaction state a record's sysFlag declares."""
    return TransactionType(sys_flag & TRANSACTION_TYPE_MASK)


# Property names (``MessageConst``) and separators.
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
#: ``MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX``: the client-made unique id.
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
#: Separates the tokens of the KEYS property.
KEY_SEPARATOR = " "
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
