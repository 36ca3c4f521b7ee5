"""Which keys the broker indexes for a record, and their IndexFile hashes (prefix-cached per topic).

Shared by the sequential builder, its range walk (``store.index.index_range``), fsck and the Spark decode;
the compiled range walk (``store/index/_index_range_fast.c``) follows the same rules.
"""

from __future__ import annotations

import array
import sys
from operator import mul

from protocol.index_key import java_string_hash
from protocol.message import IndexFields
from protocol.message_flags import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK

_INT_MASK = 0xFFFFFFFF
_UTF16 = "utf-16-be" if sys.byteorder == "big" else "utf-16-le"


class KeyHasher:
    """``index_key_hash(topic + "#" + key)`` with the ``topic#`` part hashed once per topic.

    Java's String hash is the polynomial sum(c[i] * 31^(n-1-i)) mod 2^32 over UTF-16 code units, so
    hash(prefix + key) = hash(prefix) * 31^len(key) + hash(key), and hash(key) is a dot product with
    a table of powers, which ``sum(map(mul, ...))`` evaluates in C instead of a Python loop per
    character. The builder hashes millions of keys that share a few topics.
    """

    def __init__(self) -> None:
        self._prefix: dict[str, int] = {}
        self._pow31: list[int] = [1]
        self._desc: list[int] = []  # 31^(m-1), ..., 31^1, 31^0 for the longest key seen (m)

    def _grow(self, n: int) -> None:
        pows = self._pow31
        while len(pows) <= n:
            pows.append((pows[-1] * 31) & _INT_MASK)
        if len(self._desc) < n:
            self._desc = pows[n - 1 :: -1]

    def __call__(self, topic: str, key: str) -> int:
        prefix = self._prefix.get(topic)
        if prefix is None:
            prefix = java_string_hash(topic + "#") & _INT_MASK
            self._prefix[topic] = prefix
        units: bytes | array.array[int] = (
            key.encode("ascii") if key.isascii() else array.array("H", key.encode(_UTF16, "surrogatepass"))
        )
        n = len(units)
        desc = self._desc
        if len(desc) < n or len(self._pow31) <= n:
            self._grow(n)
            desc = self._desc
        h = (prefix * self._pow31[n] + sum(map(mul, units, desc[len(desc) - n :]))) & _INT_MASK
        if h & 0x80000000:
            h -= 1 << 32
            return 0 if h == -(1 << 31) else -h
        return h


def index_keys(fields: IndexFields) -> list[str]:
    """The keys (after ``topic#``) the broker indexes for one record, in its order (none for a rollback)."""
    if fields.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
        return []
    keys: list[str] = []
    if fields.unique_key is not None:
        keys.append(fields.unique_key)
    if fields.keys:
        keys.extend(k for k in fields.keys.split(" ") if k)
    return keys
