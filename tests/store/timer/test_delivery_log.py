"""``timer/deliveries``: the watermark and the delivery intents, read back as written, a torn tail
dropped, and the dead entries rewritten away once they outnumber the live ones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from store.errors import StoreError
from store.timer import delivery_log
from store.timer.delivery_log import TimerDeliveryLog


def _file(path: Path) -> tuple[int, list[tuple[int, int]]]:
    """The file as its layout says: the 8-byte watermark, then 16-byte entries (big-endian)."""
    data = path.read_bytes()
    (watermark,) = struct.unpack(">q", data[:8])
    entries = [struct.unpack(">qq", data[i : i + 16]) for i in range(8, len(data) - 15, 16)]
    return watermark, entries


def test_intents_and_watermark_are_in_the_file_as_written(tmp_path: Path) -> None:
    path = tmp_path / "timer" / "deliveries"
    log = TimerDeliveryLog(path)
    log.open()
    assert not path.exists(), "no timer delivered yet: no file"
    log.intend(1, 4096)
    log.intend(0, 8192)
    assert _file(path) == (0, [(1, 4096), (0, 8192)])
    log.advance(1)
    assert _file(path) == (1, [(1, 4096), (0, 8192)])  # the dead entry stays until a rewrite
    log.close()
    again = TimerDeliveryLog(path)
    again.open()
    assert again.watermark == 1 and sorted(again.intents) == [(1, 4096)]
    assert _file(path) == (1, [(1, 4096)]), "dead entries are dropped when the file is opened"
    again.close()


def test_a_torn_tail_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "deliveries"
    path.write_bytes(struct.pack(">q", 2) + struct.pack(">qq", 3, 100) + b"\x00\x00\x00\x00\x00\x05\x00")
    log = TimerDeliveryLog(path)
    log.open()
    assert log.watermark == 2 and log.intents == [(3, 100)]
    log.intend(4, 200)
    log.close()
    assert _file(path) == (2, [(3, 100), (4, 200)])


def test_a_negative_watermark_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "deliveries"
    path.write_bytes(struct.pack(">q", -1))
    with pytest.raises(StoreError, match="negative watermark"):
        TimerDeliveryLog(path).open()


def test_dead_entries_are_rewritten_away_once_they_outnumber_the_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_log, "COMPACT_AFTER", 4)
    path = tmp_path / "deliveries"
    log = TimerDeliveryLog(path)
    log.open()
    log.intend(100, 1)  # one far timer delivered out of order stays live
    for q in range(6):
        log.intend(q, 1000 + q)
        log.advance(q + 1)
    # the fifth dead entry passed COMPACT_AFTER=4 with one live entry: rewritten then
    watermark, entries = _file(path)
    assert watermark == 6 and sorted(entries) == [(5, 1005), (100, 1)]
    log.close()
