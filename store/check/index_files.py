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

from dataclasses import dataclass, field

from store.check.index_scan import CHUNK, scan_entries, scan_slots
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from store.index.index_file import IndexFile

__all__ = ["CHUNK", "Findings", "scan_index_file"]


@dataclass(slots=True)
class Findings:
    """The first occurrence of each kind of problem, and how many there were."""

    first: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, text: str, times: int = 1) -> None:
        """``times`` problems of ``kind``, the first of them said by ``text``."""
        if kind not in self.first:
            self.first[kind] = text
        self.counts[kind] = self.counts.get(kind, 0) + times

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

    # The per-slot and per-entry loops (compiled when built: ``store.check.index_scan``) report each
    # kind's first occurrence and count; the lines are said here.
    used, events = scan_slots(data, INDEX_HEADER_SIZE, slots_n, entries_at, count, refs)
    for kind, times, s, value, _ in events:
        pos = INDEX_HEADER_SIZE + s * INDEX_SLOT_SIZE
        if kind == "slot":
            text = f"slot {s} (byte {pos}) points at entry {value}, outside 1..indexCount-1"
        else:
            text = f"slot {s} (byte {pos}) points at entry {value}, whose key hash is not of slot {s}"
        found.add(kind, text, times)
    if used != h.hash_slot_count and count > 1:
        found.add("slots-used", f"hashSlotCount {h.hash_slot_count} (byte 32) but {used} slots are in use")
    begin, end = h.begin_phy_offset, h.end_phy_offset
    for kind, times, n, b, c in scan_entries(data, slots_n, entries_at, count, begin, end, refs):
        found.add(kind, _entry_text(kind, entry_at(n), n, b, c, begin, end), times)
    # Entries nothing points at, and entries two things point at, in entry order: found with
    # bytearray searches instead of a Python step per entry.
    orphan = refs.find(0, 1, count)
    merge = refs.find(2, 1, count)
    kinds = []
    if orphan >= 0:
        text = f"entry {orphan} (byte {entry_at(orphan)}) is on no chain: its key cannot be found"
        kinds.append((orphan, "orphan", text, refs.count(0, 1, count)))
    if merge >= 0:
        text = f"entry {merge} (byte {entry_at(merge)}) is linked from two places (chains merge)"
        kinds.append((merge, "merge", text, refs.count(2, 1, count)))
    for _first, kind, text, times in sorted(kinds):
        found.add(kind, text, times)
    if count < f.index_num and any(data[entry_at(count) : entry_at(count + 1)]):
        found.add(
            "torn",
            f"entry {count} (byte {entry_at(count)}), just past indexCount, holds data: a put interrupted "
            "by a crash (the builder undoes it)",
        )
    return found.lines(f.name)


def _entry_text(kind: str, at: int, n: int, b: int, c: int, begin: int, end: int) -> str:
    """The line for the first problem of ``kind`` at entry ``n`` (byte ``at``): ``scan_entries``' event."""
    if kind == "hash":
        return f"entry {n} (byte {at}) has a negative key hash {b}"
    if kind == "diff":
        return f"entry {n} (byte {at + 12}) has a negative timeDiff {b}"
    if kind == "phy-order":
        return (
            f"entry {n} (byte {at + 4}) points at CommitLog offset {b}, before the previous entry's {c} "
            "(entries are written in CommitLog order)"
        )
    if kind == "phy-range":
        return (
            f"entry {n} (byte {at + 4}) points at CommitLog offset {b}, outside the header's {begin}..{end}"
        )
    if kind == "link-slot":
        return f"entry {n} (byte {at + 16}) links to entry {b} of another slot"
    if kind == "link-bad":
        return f"entry {n} (byte {at + 16}) links to entry {b}, which cannot exist"
    return f"entry {n} (byte {at + 16}) links forward to entry {b} (a chain can loop)"
