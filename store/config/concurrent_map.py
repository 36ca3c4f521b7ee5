"""The iteration order of the broker's ``ConcurrentHashMap<String, ...>`` tables, kept through their
history.

fastjson writes ``topics.json``, ``subscriptionGroup.json`` and the GET_ALL_TOPIC_CONFIG /
GET_ALL_SUBSCRIPTIONGROUP_CONFIG bodies in the order the broker's map iterates: by hash bucket, each
bucket in the order of its linked nodes. A new key goes to the end of its bucket, but when the map
doubles (at three quarters full) ``transfer`` splits each bucket in two and rebuilds both halves by
putting each node in front of the ones already moved, except the bucket's last run of nodes that go
the same way, which moves as it is. So after a resize, keys that share a bucket can come out in the
reverse of the order they were put in: the order is a function of the map's history (puts, removals,
the moments it grew; the table never shrinks), not of the keys and their insertion order (golden:
``tests/server/golden/many_topics_4.9.7.json.gz``, 3,000 topics, where the table grew from 2,048 to
4,096 buckets). This model replays that history: O(1) per put and removal, O(n) per resize (amortized
O(1)), the order O(n) once after a change.

A table loaded from its file has another history (``loaded``): fastjson reads the file's map into a
``new ConcurrentHashMap()`` of its own (16 buckets, growing as it reads), and the manager ``putAll``s
that map, in its order, into its table, which ``putAll`` first sizes for all of them at once
(``tryPresize``: 2,981 topics make 16,384 buckets; golden ``afterRestart``).

Not modelled: a bucket of 8 or more keys, which the broker turns into a tree whose new keys go first
(with string hashes spread over a table at most three quarters full it practically never happens).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from protocol.index_key import java_string_hash

#: Buckets of a ``new ConcurrentHashMap()`` (fastjson's map for a ``ConcurrentMap`` field it reads).
FASTJSON_MAP_BUCKETS = 16


def _table_size_for(c: int) -> int:
    """``tableSizeFor``: the least power of two at least ``c``."""
    return 1 << max(0, c - 1).bit_length()


def spread(name: str) -> int:
    """``ConcurrentHashMap.spread(key.hashCode())``: the hash whose low bits pick the bucket."""
    h = java_string_hash(name) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 0x7FFFFFFF


_V = TypeVar("_V")


class ConcurrentMapOrder:
    """The keys of a ``new ConcurrentHashMap(capacity)`` in its iteration order, through ``put`` and
    ``remove`` as the map sees them (not thread-safe: the owning table calls it under its lock)."""

    __slots__ = ("_bins", "_hash", "_order", "buckets")

    def __init__(self, buckets: int, names: Iterable[str] = ()) -> None:
        #: The table's length now (a power of two; ``new ConcurrentHashMap(1024)`` starts at 2048).
        self.buckets = buckets
        self._bins: dict[int, list[str]] = {}
        self._hash: dict[str, int] = {}
        self._order: list[str] | None = None
        for name in names:
            self.put(name)

    def __len__(self) -> int:
        return len(self._hash)

    def __contains__(self, name: object) -> bool:
        return name in self._hash

    def put(self, name: str) -> None:
        """``put``: a present key keeps its place; a new one ends its bucket, and the table doubles
        when it holds three quarters of its length (``addCount``)."""
        if name in self._hash:
            return
        h = spread(name)
        self._hash[name] = h
        self._bins.setdefault(h & (self.buckets - 1), []).append(name)
        self._order = None
        while len(self._hash) >= self.buckets - (self.buckets >> 2):
            self._grow()

    def remove(self, name: str) -> None:
        h = self._hash.pop(name, None)
        if h is None:
            return
        index = h & (self.buckets - 1)
        nodes = self._bins[index]
        nodes.remove(name)
        if not nodes:
            del self._bins[index]
        self._order = None

    @classmethod
    def loaded(cls, buckets: int, first: Iterable[str], read: Iterable[str]) -> ConcurrentMapOrder:
        """A manager's table after ``decode``: ``first`` put by its constructor, then ``putAll`` of
        the map fastjson read ``read`` (the file's keys in file order) into."""
        parsed = cls(FASTJSON_MAP_BUCKETS, read)
        table = cls(buckets, first)
        table.put_all(parsed.names())
        return table

    def put_all(self, names: list[str]) -> None:
        """``putAll`` of a map iterating ``names``: ``tryPresize`` for their count, then each ``put``."""
        wanted = _table_size_for(len(names) + (len(names) >> 1) + 1)
        while wanted > self.buckets - (self.buckets >> 2):
            self._grow()
        for name in names:
            self.put(name)

    def ordered(self, entries: Mapping[str, _V], buckets: int) -> tuple[ConcurrentMapOrder, dict[str, _V]]:
        """``entries`` in this order, and the order to keep: a new one made from ``entries`` as
        they are (in ``buckets``) should they have been changed behind it (a table's dict edited
        directly, not through the table), rather than failing."""
        order = self
        if len(order) != len(entries) or any(name not in order for name in entries):
            order = ConcurrentMapOrder(buckets, entries)
        return order, {name: entries[name] for name in order.names()}

    def names(self) -> list[str]:
        """Every key in iteration order (kept until the next change: do not modify)."""
        if self._order is None:
            bins = self._bins
            self._order = [name for index in sorted(bins) for name in bins[index]]
        return self._order

    def _grow(self) -> None:
        """``transfer`` to a table twice as long: bucket i splits into i and i + n by hash bit n."""
        n = self.buckets
        hashes = self._hash
        grown: dict[int, list[str]] = {}
        for index, nodes in self._bins.items():
            bits = [hashes[name] & n for name in nodes]
            last_run = len(nodes) - 1
            while last_run > 0 and bits[last_run - 1] == bits[-1]:
                last_run -= 1
            tail = nodes[last_run:]
            # the nodes before the last run are put, one by one, in front of their half
            low = [name for name, bit in zip(nodes[:last_run], bits, strict=False) if not bit][::-1]
            high = [name for name, bit in zip(nodes[:last_run], bits, strict=False) if bit][::-1]
            if bits[-1]:
                high += tail
            else:
                low += tail
            if low:
                grown[index] = low
            if high:
                grown[index + n] = high
        self._bins = grown
        self.buckets = n << 1
