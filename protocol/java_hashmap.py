"""The iteration order of a ``java.util.HashMap<String, String>``.

Java keeps ``extFields`` in a ``HashMap`` and serializes it in iteration order, so a header we build
is only byte-identical to the Java broker's if its keys come out in that order. A default
``HashMap`` has a power-of-two table (16, doubled whenever the size passes 3/4 of it); a key lives in
bucket ``(h ^ (h >>> 16)) & (capacity - 1)`` with ``h = String.hashCode()``; iteration walks the
buckets in index order and each bucket in insertion order (resizing splits a bucket without
reordering it). Bins of 8+ colliding keys turn into trees in Java; no header comes near that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from protocol.index_key import java_string_hash

_DEFAULT_CAPACITY = 16


def _capacity(size: int) -> int:
    capacity = _DEFAULT_CAPACITY
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


_T = TypeVar("_T")


def _spread_bucket(hash_code: int, mask: int) -> int:
    h = hash_code & 0xFFFFFFFF
    return (h ^ (h >> 16)) & mask


def _bucket(key: str, mask: int) -> int:
    return _spread_bucket(java_string_hash(key), mask)


def hashmap_order_by_hash(
    items: Iterable[_T], hash_code: Callable[[_T], int], capacity: int | None = None
) -> list[_T]:
    """``items`` (distinct keys, in insertion order) as a default ``HashMap`` (or one of ``capacity``
    buckets) iterates them, given each key's Java ``hashCode()``."""
    item_list = list(items)
    mask = (capacity or _capacity(len(item_list))) - 1
    return sorted(item_list, key=lambda item: _spread_bucket(hash_code(item), mask))


#: Key sets whose order is remembered are at most this many characters in all: a header's own keys
#: (every answer of one kind has the same few), never a client's arbitrarily long ones.
_MEMO_CHARS = 512


def _sorted_keys(keys: tuple[str, ...], capacity: int) -> tuple[str, ...]:
    mask = capacity - 1
    # sorted() is stable, so keys sharing a bucket keep their insertion order, as in Java.
    return tuple(sorted(keys, key=lambda key: _bucket(key, mask)))


_memo_sorted_keys = functools.lru_cache(maxsize=1024)(_sorted_keys)


def _ordered_keys(keys: tuple[str, ...], capacity: int) -> tuple[str, ...]:
    """``_sorted_keys``, remembered for small key sets: every SEND answer, pull answer and header
    the server builds orders the same few keys, and hashing them in Python each time was a few
    microseconds of every request."""
    if sum(map(len, keys)) <= _MEMO_CHARS:
        return _memo_sorted_keys(keys, capacity)
    return _sorted_keys(keys, capacity)


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a default Java ``HashMap`` iterates them."""
    key_tuple = tuple(keys)
    return list(_ordered_keys(key_tuple, _capacity(len(key_tuple))))


def as_java_hashmap(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` whose iteration order is the Java ``HashMap`` order of its keys."""
    return {key: mapping[key] for key in java_hashmap_order(mapping)}


class JavaHashMap:
    """A ``java.util.HashMap<String, String>`` whose iteration order is Java's, through puts and removes.

    The order depends on more than the keys present: the table never shrinks (a map that once held
    13 entries keeps 32 buckets after a remove), and a key removed then put again goes to the end of
    its bucket. The broker's send path does exactly that with ``WAIT``, so this keeps both: a Python
    dict for insertion order and the largest capacity the table has grown to.
    """

    __slots__ = ("_capacity", "_items")

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = {}
        self._capacity = _DEFAULT_CAPACITY
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self.put(key, value)

    def put(self, key: str, value: str) -> None:
        """``HashMap.put``: a present key keeps its place, a new one is appended (and may grow the table)."""
        self._items[key] = value
        if len(self._items) > self._capacity * 3 // 4:
            self._capacity *= 2

    def remove(self, key: str) -> str | None:
        """``HashMap.remove``: the table keeps its size."""
        return self._items.pop(key, None)

    def get(self, key: str) -> str | None:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def ordered(self) -> dict[str, str]:
        """The entries in Java's iteration order (buckets in index order, each in insertion order)."""
        items = self._items
        return {key: items[key] for key in _ordered_keys(tuple(items), self._capacity)}
