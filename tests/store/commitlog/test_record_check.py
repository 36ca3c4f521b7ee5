"""The compiled record check (``store/commitlog/_record_fast.c``) answers as its pure-Python reference.

Over the Java broker's own CommitLog (every position, so record starts, blank markers, zeros and
offsets inside records) and over randomly damaged copies, with and without BODYCRC and the
expected PHYSICALOFFSET.
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from store.commitlog import record
from store.config.store_config import StoreConfig

compiled = pytest.importorskip("store.commitlog._record_fast", reason="compiled accelerator not built")


def _answers(check: object, data: bytes, positions: list[int], end: int) -> list[tuple[int, ...]]:
    out = []
    for pos in positions:
        expected = struct.unpack_from(">q", data, pos + 28)[0] if pos + 36 <= len(data) else None
        out.append(
            (
                check(data, pos, end),  # type: ignore[operator]
                check(data, pos, end, pos),  # type: ignore[operator]
                check(data, pos, end, expected, check_crc=True),  # type: ignore[operator]
            )
        )
    return out


def test_every_position_of_the_java_commitlog(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    java, _ = golden_stores[0]
    first = sorted(java.store_path_commit_log.iterdir())[0].read_bytes()
    positions = list(range(0, len(first) - 8))
    want = _answers(record.check_reference, first, positions, len(first))
    assert _answers(compiled.check, first, positions, len(first)) == want
    assert sum(1 for a in want if a[2] > 0) > 250, "the file's records check"
    assert any(a[0] == record.BLANK for a in want), "and its blank end-of-file marker"


def test_damaged_records(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    java, _ = golden_stores[0]
    data = sorted(java.store_path_commit_log.iterdir())[0].read_bytes()[:6000]
    rng = random.Random(3)
    for trial in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(damaged) - 4)
            if rng.random() < 0.4:
                struct.pack_into(">i", damaged, at, rng.choice([-1, 0, 91, 0x7FFF, 0x7FFFFFFF, -(2**31)]))
            else:
                damaged[at] = rng.randrange(256)
        end = rng.randrange(len(damaged) // 2, len(damaged) + 1)
        positions = [0, *(rng.randrange(end) for _ in range(40))]
        blob = bytes(damaged)
        assert _answers(compiled.check, blob, positions, end) == _answers(
            record.check_reference, blob, positions, end
        ), trial


def test_crc_of_every_length_is_zlibs() -> None:
    """The CRC inside the check (carry-less multiply folding where the CPU has it) is zlib's."""
    from store.index import _index_range_fast

    rng = random.Random(9)
    blob = rng.randbytes(70_000)
    for n in [*range(0, 300), 1023, 1024, 1025, 65_535, 65_536, 69_999]:
        start = rng.randrange(0, 64)
        assert _index_range_fast._crc32(blob[start : start + n]) == zlib.crc32(blob[start : start + n]), n
