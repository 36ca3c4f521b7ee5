"""The IndexFile key and its hash, exactly as the Java broker computes them.

The key is ``topic + "#" + key``; the hash is Java's ``String.hashCode`` over UTF-16 code units
(int32 wraparound), then ``Math.abs``, with ``Integer.MIN_VALUE`` (whose abs is still negative)
mapped to 0. Keys outside the BMP (emoji) count as two code units, as in Java.
"""

from __future__ import annotations

import array
import sys

from protocol.accel import load

_INT_MASK = 0xFFFFFFFF
_INT_SIGN = 0x80000000
_UTF16 = "utf-16-be" if sys.byteorder == "big" else "utf-16-le"


def build_index_key(topic: str, key: str) -> str:
    """The string the broker hashes and stores for ``key`` in ``topic``."""
    return f"{topic}#{key}"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, as a signed int32."""
    h = 0
    if s.isascii():
        units: bytes | array.array[int] = s.encode("ascii")
    else:
        units = array.array("H", s.encode(_UTF16, "surrogatepass"))
    for unit in units:
        h = (31 * h + unit) & _INT_MASK
    return h - (1 << 32) if h & _INT_SIGN else h


def index_key_hash(index_key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, and 0 for ``Integer.MIN_VALUE``."""
    h = java_string_hash(index_key)
    if h == -(1 << 31):
        return 0
    return -h if h < 0 else h


#: The pure-Python references, kept reachable after the compiled twins replace the names above.
REFERENCE = {"java_string_hash": java_string_hash, "index_key_hash": index_key_hash}

_fast = load("protocol._index_key_fast")
if _fast is not None:
    java_string_hash = _fast.java_string_hash  # type: ignore[assignment]
    index_key_hash = _fast.index_key_hash  # type: ignore[assignment]
