"""``CommitLog.refresh``'s shortcuts (kept snapshots, ``_quick_end``) against the full walk.

A writable store refreshes after every put, so the refresh keeps its file snapshots when every file
checks as unchanged and finds the end past the known one with one compiled call when what follows
is whole records and zeros. Both must give exactly what the full walk gives: the end, the settled
end, the last record, the bytes visited, the corruption found. Two CommitLog views of one directory,
one with the shortcuts and one without, are refreshed after each step of a seeded writer that copies
Java's CommitLog in random pieces (torn records), pre-creates the next file as the broker does, and
now and then damages the bytes at or just past the end, or cuts and restores a file.
"""

from __future__ import annotations

import bisect
import os
import random
from pathlib import Path

import pytest

from store.commitlog.mapped_files import CommitLog

JAVA = "java-4.9.7-a"
FILE_SIZE = 262144


class _FullWalk(CommitLog):
    """The CommitLog without the refresh's shortcuts: every refresh lists, remaps what changed and
    walks from the known end record by record, as before they existed."""

    def _unchanged(self, names: list[str]) -> bool:
        return False

    def _quick_end(self, known: int) -> int | None:
        return None


class _Counted(CommitLog):
    """The CommitLog as it is, counting the refreshes ``_quick_end`` answered."""

    quick_answers = 0

    def _quick_end(self, known: int) -> int | None:
        found = super()._quick_end(known)
        self.quick_answers += found is not None
        return found


def _record_bounds(data: bytes, end: int) -> list[int]:
    """Where each record of a file's ``data`` ends (TOTALSIZE hops from its start)."""
    bounds: list[int] = []
    pos = 0
    while pos + 4 <= end:
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        if size <= 0 or pos + size > end:
            break
        pos += size
        bounds.append(pos)
    return bounds


def _state(log: CommitLog) -> tuple[object, ...]:
    return (log.max_offset, log.settled_end, log._last_record, dict(log.corrupt), log.bytes_visited)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_shortcuts_find_what_the_full_walk_finds(stores_dir: Path, tmp_path: Path, seed: int) -> None:
    source = stores_dir / JAVA / "commitlog"
    names = sorted(p.name for p in source.iterdir() if p.name.isdigit())[:6]
    directory = tmp_path / "commitlog"
    directory.mkdir()
    rng = random.Random(seed)
    quick: _Counted | None = None
    full: _FullWalk | None = None
    steps = 0
    try:
        for i, name in enumerate(names):
            for n in names[i : i + 2]:  # the current file and the pre-created next one
                if not (directory / n).exists():
                    with open(directory / n, "wb") as fh:
                        fh.truncate(FILE_SIZE)
            if quick is None:
                quick = _Counted(directory, FILE_SIZE)
                full = _FullWalk(directory, FILE_SIZE)
            assert quick is not None and full is not None
            data = (source / name).read_bytes()
            end = len(data.rstrip(b"\0"))
            path = directory / name
            fd = os.open(path, os.O_RDWR)
            try:
                bounds = _record_bounds(data, end)
                pos = 0
                while pos < end:
                    step = rng.choice((rng.randint(1, 64), rng.randint(300, 1500), rng.randint(1, 9000)))
                    if rng.random() < 0.6:
                        # Up to the end of a whole record, as this process's writer appends them.
                        i = bisect.bisect_right(bounds, pos) + rng.randint(0, 2)
                        step = (bounds[i] if i < len(bounds) else end) - pos
                    os.pwrite(fd, data[pos : min(pos + step, end)], pos)
                    pos = min(pos + step, end)
                    damage = rng.random()
                    if damage < 0.03 and pos + 16 < FILE_SIZE:
                        # Garbage past the written end (a stray write): the walks must agree on it.
                        os.pwrite(fd, rng.randbytes(8), pos + rng.randint(0, 8))
                    elif damage < 0.05 and pos > 64:
                        # A byte of a written record flipped (BODYCRC or a length broken).
                        at = rng.randrange(max(0, pos - 600), pos)
                        os.pwrite(fd, bytes([data[at] ^ 0xFF]), at)
                    quick.refresh()
                    full.refresh()
                    steps += 1
                    assert _state(quick) == _state(full), f"step {steps} (file {name}, byte {pos})"
                    if damage < 0.05:
                        # Put the true bytes back (and zeros past the end), as the writer's next
                        # appends would find them, then let both views see it.
                        os.pwrite(fd, data[:pos], 0)
                        os.pwrite(fd, bytes(FILE_SIZE - pos), pos)
                        quick.refresh()
                        full.refresh()
                        assert _state(quick) == _state(full), f"after the repair of step {steps}"
                    elif damage > 0.995 and pos > 1024:
                        # Cut under the maps, refreshed, then restored.
                        os.ftruncate(fd, pos - 512)
                        quick.refresh()
                        full.refresh()
                        assert _state(quick) == _state(full), f"after the cut of step {steps}"
                        os.ftruncate(fd, FILE_SIZE)
                        os.pwrite(fd, data[:pos], 0)
                        quick.refresh()
                        full.refresh()
                        assert _state(quick) == _state(full), f"after the restore of step {steps}"
            finally:
                os.close(fd)
    finally:
        for log in (quick, full):
            if log is not None:
                log.close()
    assert quick is not None
    assert steps > 200 and quick.quick_answers > steps // 3, (steps, quick.quick_answers)


def test_zeros_at_the_known_end_are_not_the_end_when_a_later_file_has_data(
    stores_dir: Path, tmp_path: Path
) -> None:
    """A hole at the known end (a record never written there) followed by the rest of the file and
    the next file's data: the data does not end at the zeros (records never span files), so the
    walk searches past them and skips the hole as corruption; the shortcut must leave it to it."""
    source = stores_dir / JAVA / "commitlog"
    first, second = sorted(p.name for p in source.iterdir() if p.name.isdigit())[:2]
    directory = tmp_path / "commitlog"
    directory.mkdir()
    data = (source / first).read_bytes()
    bounds = _record_bounds(data, len(data.rstrip(b"\0")))
    known, hole_end = bounds[10], bounds[11]
    for name in (first, second):
        with open(directory / name, "wb") as fh:
            fh.truncate(FILE_SIZE)
    (directory / first).write_bytes(data[:known] + bytes(FILE_SIZE - known))
    quick = CommitLog(directory, FILE_SIZE)
    full = _FullWalk(directory, FILE_SIZE)
    try:
        assert quick.max_offset == full.max_offset == known
        with open(directory / first, "r+b") as fh:
            fh.seek(hole_end)
            fh.write(data[hole_end:])
        (directory / second).write_bytes((source / second).read_bytes())
        quick.refresh()
        full.refresh()
        assert _state(quick) == _state(full)
        assert full.corrupt == {known: hole_end} and full.max_offset > int(second)
    finally:
        quick.close()
        full.close()
