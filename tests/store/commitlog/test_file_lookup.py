"""``CommitLog.release`` and ``file_holding`` touch only the files their offsets fall in.

A writable store refreshes and runs its reput after every put; both used to go over every file of
the CommitLog (``release`` asked each file whether the range overlapped it, the reput's ``_span``
looked for the file holding its position from the first file on), so a put cost more the more files
the store had. Now both find the files by bisection; these tests hold them to the files and pages
each range covers, with the numbers written out for a CommitLog of four 64 KiB files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from store.commitlog.mapped_files import CommitLog

SIZE = 65536
PAGE = 4096


class _Advised:
    """Stands in for a file's map in ``release``: records each ``madvise``."""

    def __init__(self, index: int, calls: list[tuple[int, int, int]]) -> None:
        self.index, self.calls = index, calls

    def madvise(self, option: int, start: int, length: int) -> None:
        self.calls.append((self.index, start, length))


@pytest.fixture
def commitlog(tmp_path: Path) -> Any:
    directory = tmp_path / "commitlog"
    directory.mkdir()
    for i in range(4):
        (directory / f"{i * SIZE:020d}").write_bytes(b"\0" * SIZE)
    log = CommitLog(directory, SIZE)
    yield log
    log.close()


def _advised(commitlog: CommitLog, start: int, end: int) -> list[tuple[int, int, int]]:
    calls: list[tuple[int, int, int]] = []
    files = commitlog._files  # the test looks inside on purpose
    real = [f.mm for f in files]
    try:
        for i, f in enumerate(files):
            f.mm = _Advised(i, calls)  # type: ignore[assignment]
        commitlog.release(start, end)
    finally:
        for f, mm in zip(files, real, strict=True):
            f.mm = mm
    return calls


def test_release_advises_the_pages_of_the_files_the_range_covers(commitlog: CommitLog) -> None:
    assert os.sysconf("SC_PAGE_SIZE") == PAGE
    # inside one file: from the page holding the start to the last whole page before the end
    assert _advised(commitlog, 5000, 20000) == [(0, 4096, 12288)]
    # across files 1 and 2 into the first bytes of 3 (less than a page there: nothing)
    assert _advised(commitlog, 70000, 200000) == [(1, 4096, 61440), (2, 0, 65536)]
    # from before the first file to past the last
    assert _advised(commitlog, 0, 10 * SIZE) == [(i, 0, SIZE) for i in range(4)]
    # the last file alone, as a reput near the end asks
    assert _advised(commitlog, 3 * SIZE + 100, 3 * SIZE + 9000) == [(3, 0, 8192)]
    assert _advised(commitlog, 9000, 9000) == []
    assert _advised(commitlog, 4 * SIZE, 5 * SIZE) == []


def test_file_holding_finds_the_file_of_an_offset(commitlog: CommitLog) -> None:
    def start_of(offset: int) -> int | None:
        f = commitlog.file_holding(offset)
        return None if f is None else f.start

    assert [start_of(o) for o in (0, 1, SIZE - 1, SIZE, 2 * SIZE + 7, 4 * SIZE - 1)] == [
        0, 0, 0, SIZE, 2 * SIZE, 3 * SIZE,
    ]  # fmt: skip
    assert start_of(4 * SIZE) is None and start_of(-1) is None
