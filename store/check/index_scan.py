"""The per-slot and per-entry loops of ``fsck``'s IndexFile scan (``store.check.index_files``).

A full IndexFile of the broker's default geometry has 5M slots and 20M entries: a Python step for
each was half of ``fsck``'s time. These two functions are the loops, with their rules and nothing
else; ``index_files.scan_index_file`` turns what they found into the report's lines. Each has a
compiled twin of the same name and arguments (``store/check/_index_scan_fast.c``) that replaces it
when built; this is the readable reference, and the tests run both.

What they find is a list of events, one per kind of problem, in the order each kind was first met:
``(kind, times, a, b, c)``, where ``times`` counts every occurrence and ``a, b, c`` are the first
one's numbers (unused ones 0):

- ``scan_slots``: ``slot`` (a = slot, b = the entry it names), ``slot-hash`` (the same);
- ``scan_entries``: ``hash`` (a = entry, b = its key hash), ``diff`` (a = entry, b = timeDiff),
  ``phy-order`` (a = entry, b = its CommitLog offset, c = the previous entry's), ``phy-range``
  (a = entry, b = offset), ``link-slot`` / ``link-bad`` / ``link`` (a = entry, b = the entry it
  links to).

Both count into ``refs`` (one byte per entry, capped at 2) how many slots or links name each entry.
"""

from __future__ import annotations

import array
import struct
import sys

from protocol.accel import load

__all__ = ["CHUNK", "Event", "matching_keys", "scan_entries", "scan_slots"]

#: Slots or entries read at a time by the reference: what it holds of a file besides ``refs``.
CHUNK = 1 << 16
SLOT_SIZE = 4
ENTRY_SIZE = 20
_ENTRY = struct.Struct(">iqii")
_HASH = struct.Struct(">i")

#: (kind, times, a, b, c): see the module docstring.
Event = tuple[str, int, int, int, int]


class _Events:
    def __init__(self) -> None:
        self.first: dict[str, list[int]] = {}

    def add(self, kind: str, a: int, b: int = 0, c: int = 0) -> None:
        got = self.first.get(kind)
        if got is None:
            self.first[kind] = [1, a, b, c]
        else:
            got[0] += 1

    def out(self) -> list[Event]:
        return [(kind, v[0], v[1], v[2], v[3]) for kind, v in self.first.items()]


def _check(data: object, slots_n: int, entries_at: int, count: int, refs: bytearray) -> None:
    """The arguments the loops rely on (the compiled twins read the buffer without bounds checks)."""
    if slots_n <= 0 or count < 1 or len(refs) != count or entries_at < 0:
        raise ValueError("index scan: need slots_n > 0, count >= 1, entries_at >= 0, len(refs) == count")
    if entries_at + count * ENTRY_SIZE > len(data):  # type: ignore[arg-type]
        raise ValueError("index scan: the entries do not fit in the buffer")


def scan_slots(
    data: object, slots_at: int, slots_n: int, entries_at: int, count: int, refs: bytearray
) -> tuple[int, list[Event]]:
    """``(slots in use, events)`` of the ``slots_n`` slots at ``data[slots_at:]`` (big-endian int32
    each, naming an entry of ``count`` at ``data[entries_at:]``, 20 bytes each)."""
    _check(data, slots_n, entries_at, count, refs)
    if slots_at < 0 or slots_at + slots_n * SLOT_SIZE > len(data):  # type: ignore[arg-type]
        raise ValueError("index scan: the slots do not fit in the buffer")
    found = _Events()
    unpack_hash = _HASH.unpack_from
    used = 0
    for base in range(0, slots_n, CHUNK):
        stop = min(base + CHUNK, slots_n)
        slots = array.array("i", data[slots_at + base * SLOT_SIZE : slots_at + stop * SLOT_SIZE])  # type: ignore[index]
        if sys.byteorder == "little":
            slots.byteswap()
        for k, value in enumerate(slots):
            if value == 0:
                continue
            s = base + k
            used += 1
            if value < 0 or value >= count:
                found.add("slot", s, value)
                continue
            if unpack_hash(data, entries_at + value * ENTRY_SIZE)[0] % slots_n != s:  # type: ignore[call-overload]
                found.add("slot-hash", s, value)
            if refs[value] < 2:
                refs[value] += 1
    return used, found.out()


def scan_entries(
    data: object, slots_n: int, entries_at: int, count: int, begin: int, end: int, refs: bytearray
) -> list[Event]:
    """The events of entries ``1..count-1`` at ``data[entries_at:]``; ``begin..end`` is the header's
    CommitLog range, ``slots_n`` the slots a key hash is taken modulo."""
    _check(data, slots_n, entries_at, count, refs)
    found = _Events()
    unpack_hash = _HASH.unpack_from
    last_phy = begin
    for base in range(1, count, CHUNK):
        stop = min(base + CHUNK, count)
        n = base - 1
        chunk = data[entries_at + base * ENTRY_SIZE : entries_at + stop * ENTRY_SIZE]  # type: ignore[index]
        for key_hash, phy, diff, prev in _ENTRY.iter_unpack(chunk):
            n += 1
            if key_hash < 0:
                found.add("hash", n, key_hash)
            if diff < 0:
                found.add("diff", n, diff)
            if begin <= phy <= end:
                if phy > last_phy:
                    last_phy = phy
                elif phy < last_phy:
                    found.add("phy-order", n, phy, last_phy)
            else:
                found.add("phy-range", n, phy)
            if 0 < prev < n:
                if unpack_hash(data, entries_at + prev * ENTRY_SIZE)[0] % slots_n != key_hash % slots_n:  # type: ignore[call-overload]
                    found.add("link-slot", n, prev)
                if refs[prev] < 2:
                    refs[prev] += 1
            elif prev < 0:
                found.add("link-bad", n, prev)
            elif prev >= n:
                found.add("link", n, prev)
    return found.out()


def matching_keys(entries: bytes | memoryview, packed: bytes | bytearray | memoryview) -> int:
    """How many leading entries of ``entries`` (IndexFile entries, 20 bytes each: key hash, CommitLog
    offset, timeDiff, link) name the key hash and record of the same unit of ``packed`` (20 bytes
    each: key hash, CommitLog offset, store time; what ``index_range`` packs for a stretch of records).

    The deep check's bulk step: both start with the big-endian int32 hash and int64 offset, so a
    unit agrees when its first 12 bytes do."""
    n = min(len(entries), len(packed)) // ENTRY_SIZE
    a, b = memoryview(entries), memoryview(packed)
    for i in range(n):
        at = i * ENTRY_SIZE
        if a[at : at + 12] != b[at : at + 12]:
            return i
    return n


#: The pure-Python references under their own names (the tests compare them with the compiled twins).
scan_slots_reference = scan_slots
scan_entries_reference = scan_entries
matching_keys_reference = matching_keys

_fast = load("store.check._index_scan_fast")
if _fast is not None:
    scan_slots = _fast.scan_slots  # the compiled twins of the references above
    scan_entries = _fast.scan_entries
    matching_keys = _fast.matching_keys
