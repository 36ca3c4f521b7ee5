"""What ``fsck`` checks inside one IndexFile without reading the CommitLog: do its parts agree?

The broker and the builder only ever append: entries are numbered in CommitLog order, each links
to an older entry of the same slot, every slot names the newest entry of its chain, and every
entry below ``indexCount`` is on exactly one chain. Zeroed pages, random bytes, forward or looping
links, slots beyond the count, and entries a crash left past the count all break one of those
rules, and the first break of each kind is reported with the file, the byte position and what is
wrong, plus how many more of that kind there are. Reads the file once with precompiled layouts, in
chunks: what the scan keeps is one byte per entry (``refs``), bounded by maxIndexNum, not by the store.
"""

from __future__ import annotations

import array
import struct
import sys
from dataclasses import dataclass, field

from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from store.index.index_file import ENTRY, IndexFile

#: Slots or entries read at a time: what the scan holds of a file besides one flag per entry.
CHUNK = 1 << 16
_HASH = struct.Struct(">i")


@dataclass(slots=True)
class Findings:
    """The first occurrence of each kind of problem, and how many there were."""

    first: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, text: str) -> None:
        if kind not in self.first:
            self.first[kind] = text
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def lines(self, name: str) -> list[str]:
        out = []
        for kind, text in self.first.items():
            more = self.counts[kind] - 1
            out.append(f"index file {name}: {text}" + (f" (and {more} more like it)" if more else ""))
        return out


def scan_index_file(f: IndexFile) -> list[str]:
    """Problems of ``f``'s slots and entries, one line per kind (first occurrence, then a count)."""
    found = Findings()
    h = f.read_header()
    slots_n = f.hash_slot_num
    count = h.index_count
    if count > f.index_num:
        found.add("count", f"indexCount {count} (byte 36) exceeds maxIndexNum {f.index_num}")
        count = f.index_num
    count = max(count, 1)
    entries_at = INDEX_HEADER_SIZE + slots_n * INDEX_SLOT_SIZE
    data = f.buffer
    # One flag per entry (how many slots or links point at it, capped at 2): bounded by the file's
    # geometry (maxIndexNum bytes), never by the store. The slots and entries themselves are read in
    # chunks of CHUNK, and an entry a slot or link names is read where it lies: holding a file's
    # entries as tuples cost ~190 bytes each, gigabytes for one full file of the default geometry.
    refs = bytearray(count)

    def entry_at(n: int) -> int:
        return entries_at + n * INDEX_ENTRY_SIZE

    def hash_at(n: int) -> int:
        return _HASH.unpack_from(data, entries_at + n * INDEX_ENTRY_SIZE)[0]

    used = 0
    for base in range(0, slots_n, CHUNK):
        stop = min(base + CHUNK, slots_n)
        slots = array.array(
            "i", data[INDEX_HEADER_SIZE + base * INDEX_SLOT_SIZE : INDEX_HEADER_SIZE + stop * INDEX_SLOT_SIZE]
        )
        if sys.byteorder == "little":
            slots.byteswap()
        for k, value in enumerate(slots):
            if value == 0:
                continue
            s = base + k
            used += 1
            pos = INDEX_HEADER_SIZE + s * INDEX_SLOT_SIZE
            if value < 0 or value >= count:
                found.add("slot", f"slot {s} (byte {pos}) points at entry {value}, outside 1..indexCount-1")
                continue
            if hash_at(value) % slots_n != s:
                found.add(
                    "slot-hash",
                    f"slot {s} (byte {pos}) points at entry {value}, whose key hash is not of slot {s}",
                )
            refs[value] = min(refs[value] + 1, 2)
    if used != h.hash_slot_count and count > 1:
        found.add("slots-used", f"hashSlotCount {h.hash_slot_count} (byte 32) but {used} slots are in use")
    last_phy = h.begin_phy_offset
    for base in range(1, count, CHUNK):
        stop = min(base + CHUNK, count)
        for k, (key_hash, phy, diff, prev) in enumerate(
            ENTRY.iter_unpack(data[entry_at(base) : entry_at(stop)])
        ):
            n = base + k
            pos = entry_at(n)
            if key_hash < 0:
                found.add("hash", f"entry {n} (byte {pos}) has a negative key hash {key_hash}")
            if diff < 0:
                found.add("diff", f"entry {n} (byte {pos + 12}) has a negative timeDiff {diff}")
            if not h.begin_phy_offset <= phy <= h.end_phy_offset:
                found.add(
                    "phy-range",
                    f"entry {n} (byte {pos + 4}) points at CommitLog offset {phy}, outside the header's "
                    f"{h.begin_phy_offset}..{h.end_phy_offset}",
                )
            else:
                if phy < last_phy:
                    found.add(
                        "phy-order",
                        f"entry {n} (byte {pos + 4}) points at CommitLog offset {phy}, before the previous "
                        f"entry's {last_phy} (entries are written in CommitLog order)",
                    )
                last_phy = max(last_phy, phy)
            if prev < 0:
                found.add(
                    "link-bad", f"entry {n} (byte {pos + 16}) links to entry {prev}, which cannot exist"
                )
            elif prev >= n:
                found.add(
                    "link", f"entry {n} (byte {pos + 16}) links forward to entry {prev} (a chain can loop)"
                )
            elif prev > 0:
                if hash_at(prev) % slots_n != key_hash % slots_n:
                    found.add(
                        "link-slot", f"entry {n} (byte {pos + 16}) links to entry {prev} of another slot"
                    )
                refs[prev] = min(refs[prev] + 1, 2)
    for n in range(1, count):
        if refs[n] == 0:
            found.add("orphan", f"entry {n} (byte {entry_at(n)}) is on no chain: its key cannot be found")
        elif refs[n] > 1:
            found.add("merge", f"entry {n} (byte {entry_at(n)}) is linked from two places (chains merge)")
    if count < f.index_num and any(data[entry_at(count) : entry_at(count + 1)]):
        found.add(
            "torn",
            f"entry {count} (byte {entry_at(count)}), just past indexCount, holds data: a put interrupted "
            "by a crash (the builder undoes it)",
        )
    return found.lines(f.name)
