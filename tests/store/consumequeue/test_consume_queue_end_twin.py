"""The forward scan that confirms a consume queue file's written end
(``store.consumequeue.consume_queue.first_invalid_entry``): the compiled twin
(``store.consumequeue._consume_queue_fast``)
agrees with the pure-Python reference, and both with the broker's rule applied by hand, on the Java
golden queue files and on random and hostile input (garbage entries, every sign of offset and size,
truncated buffers, bounds past the buffer, odd arguments).

The agreement tests call both implementations directly, so they check the C code whichever way the
rest of the suite runs (``RMQ_PURE_PYTHON=1`` or not).
"""

from __future__ import annotations

import importlib
import mmap
import random
import struct
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.accel import pure_python
from store.consumequeue import consume_queue
from store.consumequeue.consume_queue import REFERENCE

PY_SCAN: Callable[..., Any] = REFERENCE["first_invalid_entry"]


def _fast() -> ModuleType:
    try:
        return importlib.import_module("store.consumequeue._consume_queue_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


def _by_hand(data: bytes, start: int, stop: int) -> int:
    """The broker's rule, spelled out from the format: signed big-endian fields, 20-byte entries."""
    pos = start
    end = min(stop, len(data))
    while pos + 20 <= end:
        offset = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if offset < 0 or size <= 0:
            break
        pos += 20
    return pos


def test_the_module_uses_the_compiled_twin_unless_pure_python_is_asked() -> None:
    if pure_python():
        assert consume_queue.first_invalid_entry is PY_SCAN
    else:
        assert consume_queue.first_invalid_entry is _fast().first_invalid_entry


def test_both_agree_on_the_golden_queue_files(stores_dir: Path) -> None:
    """Every Java-written queue file, from every entry start: the end is where Java's entries end."""
    fast = _fast()
    files = sorted((stores_dir / "java-4.9.7-a" / "consumequeue").rglob("0" * 20))
    assert files
    for path in files:
        data = path.read_bytes()
        written = -(-len(data.rstrip(b"\0")) // 20) * 20
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                for start in range(0, len(data) + 40, 20):
                    want = written if start <= written else start
                    assert PY_SCAN(view, start, len(data)) == want
                    assert fast.first_invalid_entry(view, start, len(data)) == want
            finally:
                view.release()


def _field(rng: random.Random) -> bytes:
    """An entry with each field drawn from the edges: zero, one, max, min, -1, random."""
    offset = rng.choice([0, 1, 2**63 - 1, -(2**63), -1, rng.randrange(-(2**63), 2**63)])
    size = rng.choice([0, 1, 2**31 - 1, -(2**31), -1, rng.randrange(-(2**31), 2**31)])
    tags = rng.randrange(-(2**63), 2**63)
    return struct.pack(">qiq", offset, size, tags)


def test_both_agree_on_random_files() -> None:
    """Random files: a valid prefix, then zeros, garbage entries and random bytes; random bounds,
    truncated lengths (not whole entries) and stops past the buffer."""
    fast = _fast()
    rng = random.Random(20261123)
    for _ in range(3000):
        entries = rng.randrange(0, 60)
        parts = [
            struct.pack(
                ">qiq", rng.randrange(0, 2**63), rng.randrange(1, 2**31), rng.randrange(-(2**63), 2**63)
            )
            for _ in range(entries)
        ]
        for _ in range(rng.randrange(0, 60)):
            kind = rng.random()
            parts.append(bytes(20) if kind < 0.4 else _field(rng) if kind < 0.8 else rng.randbytes(20))
        data = b"".join(parts)
        data = data[: rng.randrange(0, len(data) + 1)] if rng.random() < 0.3 else data
        start = 20 * rng.randrange(0, len(data) // 20 + 3)
        stop = rng.choice([len(data), rng.randrange(-40, len(data) + 41), 2**62, -(2**62)])
        want = _by_hand(data, start, stop)
        for buf in (data, memoryview(data), bytearray(data)):
            assert PY_SCAN(buf, start, stop) == want, (data.hex(), start, stop)
            assert fast.first_invalid_entry(buf, start, stop) == want, (data.hex(), start, stop)


def test_a_full_file_of_valid_entries_scans_to_its_end() -> None:
    """300,000 valid entries (a full 6 MB file): the end is the file's end, in both."""
    fast = _fast()
    entry = (5).to_bytes(8, "big") + (1).to_bytes(4, "big") + bytes(8)
    data = entry * 300_000
    assert fast.first_invalid_entry(data, 0, len(data)) == len(data)
    assert PY_SCAN(data, 0, len(data)) == len(data)
    cut = data[:-1]
    assert fast.first_invalid_entry(cut, 0, 2**63 - 1) == len(data) - 20
    assert PY_SCAN(cut, 0, 2**63 - 1) == len(data) - 20


@pytest.mark.parametrize("start", [-20, 1, 19, 21, -1, -(2**70), 2**70 + 1])
def test_a_start_that_is_not_an_entry_start_is_refused_by_both(start: int) -> None:
    fast = _fast()
    data = bytes(100)
    with pytest.raises(ValueError):
        PY_SCAN(data, start, 100)
    with pytest.raises(ValueError):
        fast.first_invalid_entry(data, start, 100)


def test_bounds_past_a_long_compare_as_in_python() -> None:
    """A start past any buffer (beyond a C long long) scans nothing and is returned as it is."""
    fast = _fast()
    data = (1).to_bytes(8, "big") + (1).to_bytes(4, "big") + bytes(8)
    big = 20 * 2**70
    assert PY_SCAN(data, big, 2**80) == big
    assert fast.first_invalid_entry(data, big, 2**80) == big
    assert PY_SCAN(data, 0, 2**80) == fast.first_invalid_entry(data, 0, 2**80) == 20
    assert PY_SCAN(data, 0, -(2**80)) == fast.first_invalid_entry(data, 0, -(2**80)) == 0


def test_bad_arguments_raise_not_crash() -> None:
    fast = _fast()
    bad = [(), (b"",), (b"", 0), (b"", 0, 0, 0), (None, 0, 20), (123, 0, 20), (b"", "0", 20), (b"", 0, 2.5)]
    for args in bad:
        with pytest.raises((TypeError, ValueError)):
            fast.first_invalid_entry(*args)
    with pytest.raises(TypeError):
        PY_SCAN(None, 0, 20)
