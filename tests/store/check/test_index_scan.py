"""``fsck``'s IndexFile loops (``store.check.index_scan``): what they find on files made by hand, and
the compiled twins against the reference on damaged files."""

from __future__ import annotations

import random
import struct

import pytest

from store.check import index_scan
from store.check.index_scan import scan_entries, scan_entries_reference, scan_slots, scan_slots_reference

_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
SLOTS_AT = 40


def _file(slots: list[int], entries: list[tuple[int, int, int, int]]) -> tuple[bytearray, int]:
    """A 40-byte header, the slots, entry 0 (unused) and ``entries`` from 1; returns (data, entries_at)."""
    entries_at = SLOTS_AT + 4 * len(slots)
    data = bytearray(entries_at + 20 * (len(entries) + 1))
    for s, value in enumerate(slots):
        _SLOT.pack_into(data, SLOTS_AT + 4 * s, value)
    for n, e in enumerate(entries, start=1):
        _ENTRY.pack_into(data, entries_at + 20 * n, *e)
    return data, entries_at


IMPLEMENTATIONS = [
    pytest.param((scan_slots_reference, scan_entries_reference), id="reference"),
    pytest.param((scan_slots, scan_entries), id="installed"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_healthy_file_has_no_events(impl: tuple) -> None:
    slots_fn, entries_fn = impl
    # 4 slots; hashes 5 and 9 fall in slot 1, 6 in slot 2; entry 3 links to entry 1.
    data, at = _file([0, 3, 2, 0], [(5, 100, 0, 0), (6, 200, 1, 0), (9, 300, 2, 1)])
    refs = bytearray(4)
    assert slots_fn(data, SLOTS_AT, 4, at, 4, refs) == (2, [])
    assert entries_fn(data, 4, at, 4, 100, 300, refs) == []
    assert refs == bytearray([0, 1, 1, 1])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_each_kind_is_reported_once_with_its_count_in_first_seen_order(impl: tuple) -> None:
    slots_fn, entries_fn = impl
    data, at = _file(
        [7, -1, 2, 1],  # slot 0 past the count, slot 1 negative; slot 2 names entry 2 (hash -3: slot 1)
        [
            (3, 500, 0, 0),  # 1: phy beyond the header's end 400
            (-3, 200, -5, 0),  # 2: negative hash, negative timeDiff
            (7, 100, 0, 9),  # 3: phy before entry 2's; links forward
            (11, 300, 0, 2),  # 4: links to entry 2 (slot 1, not 3)
            (3, 300, 0, -4),  # 5: links to a negative entry
        ],
    )
    refs = bytearray(6)
    used, events = slots_fn(data, SLOTS_AT, 4, at, 6, refs)
    assert used == 4
    assert events == [("slot", 2, 0, 7, 0), ("slot-hash", 1, 2, 2, 0)]
    assert entries_fn(data, 4, at, 6, 100, 400, refs) == [
        ("phy-range", 1, 1, 500, 0),
        ("hash", 1, 2, -3, 0),
        ("diff", 1, 2, -5, 0),
        ("phy-order", 1, 3, 100, 200),
        ("link", 1, 3, 9, 0),
        ("link-slot", 1, 4, 2, 0),
        ("link-bad", 1, 5, -4, 0),
    ]
    assert refs == bytearray([0, 1, 2, 0, 0, 0])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_arguments_that_do_not_fit_the_buffer_are_refused(impl: tuple) -> None:
    slots_fn, entries_fn = impl
    data, at = _file([0, 0], [(1, 1, 0, 0)])
    with pytest.raises(ValueError):
        slots_fn(data, SLOTS_AT, 100, at, 2, bytearray(2))  # more slots than the buffer holds
    with pytest.raises(ValueError):
        entries_fn(data, 2, at, 3, 0, 10, bytearray(3))  # more entries than the buffer holds
    with pytest.raises(ValueError):
        entries_fn(data, 2, at, 2, 0, 10, bytearray(1))  # refs of another length


def test_the_compiled_loops_agree_with_the_reference_on_damaged_files() -> None:
    if scan_slots is scan_slots_reference:
        pytest.skip("the compiled twin is not built (or RMQ_PURE_PYTHON is set)")
    rng = random.Random(22)
    slots_n, count = 97, 400
    kinds: set[str] = set()
    for trial in range(60):
        slots = [0] * slots_n
        entries = []
        phy = 1000
        for n in range(1, count):
            h = rng.randrange(1 << 31)
            s = h % slots_n
            entries.append((h, phy, rng.randrange(1000), slots[s]))
            slots[s] = n
            phy += rng.randrange(0, 3) * 50
        data, at = _file(slots, entries)
        for _ in range(trial % 12):  # damage: random bytes over slots or entries
            pos = rng.randrange(SLOTS_AT, len(data) - 8)
            k = rng.choice((1, 4, 8))
            data[pos : pos + k] = rng.randbytes(k)
        begin, end = 1000, phy
        results = []
        for slots_fn, entries_fn in (
            (scan_slots_reference, scan_entries_reference),
            (scan_slots, scan_entries),
        ):
            refs = bytearray(count)
            results.append(
                (
                    slots_fn(data, SLOTS_AT, slots_n, at, count, refs),
                    entries_fn(data, slots_n, at, count, begin, end, refs),
                    bytes(refs),
                )
            )
        assert results[0] == results[1], trial
        kinds.update(e[0] for e in results[0][0][1] + results[0][1])
    assert len(kinds) >= 6, kinds  # the damage reached most kinds


def test_the_reference_reads_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk boundary inside the slots and the entries changes nothing."""
    data, at = _file([0, 3, 2, 0], [(5, 100, 0, 0), (6, 200, 1, 0), (9, 300, 2, 1)])
    whole = (
        scan_slots_reference(data, SLOTS_AT, 4, at, 4, bytearray(4)),
        scan_entries_reference(data, 4, at, 4, 100, 300, bytearray(4)),
    )
    monkeypatch.setattr(index_scan, "CHUNK", 1)
    assert (
        scan_slots_reference(data, SLOTS_AT, 4, at, 4, bytearray(4)),
        scan_entries_reference(data, 4, at, 4, 100, 300, bytearray(4)),
    ) == whole


@pytest.mark.parametrize(
    "matching",
    [
        pytest.param(index_scan.matching_keys_reference, id="reference"),
        pytest.param(index_scan.matching_keys, id="installed"),
    ],
)
def test_matching_keys_compares_hash_and_offset_only(matching) -> None:  # type: ignore[no-untyped-def]
    entries = _ENTRY.pack(5, 100, 7, 0) + _ENTRY.pack(6, 100, 7, 1) + _ENTRY.pack(9, 300, 0, 0)
    packed = (
        struct.pack(">iqq", 5, 100, 111) + struct.pack(">iqq", 6, 100, 111) + struct.pack(">iqq", 9, 301, 1)
    )
    assert matching(entries, packed) == 2  # the third names another record
    assert matching(entries, packed[:40]) == 2
    assert matching(entries[:20], packed) == 1
    assert matching(b"", packed) == 0
