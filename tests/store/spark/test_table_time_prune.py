"""A ``storeTimestamp`` filter without a topic reads only the ranges whose records reach into it.

The store here has CommitLog files that each cover their own stretch of store time, one range per
file. A time window inside one file's stretch must plan that file's range alone, and still return
every record in the window, including one stamped after the clock was set back: such a record lies
in a later file than its time suggests, and the first and last records of that file do not bound it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.spark.message_plan import open_store, plan_store
from store.spark.message_rows import RowFilter, range_rows
from store.write.writer import StoreRecord, StoreWriter

T0 = 1_795_824_000_000
FILE_SIZE = 16 * 1024
#: Records per CommitLog file: each is 325 bytes, so 50 fill a 16 KiB file up to its end-of-file record.
PER_FILE = 50
FILES = 6
#: Store time of the record that a clock set back stamps into the last file (inside file 1's span).
STEPPED_BACK = T0 + 1 * 100_000 + 7_500


def _write(root: Path, *, step_back: bool = False) -> list[tuple[int, int]]:
    """``FILES`` files of ``PER_FILE`` records, file ``i``'s records stored at ``T0 + i * 100 s`` plus
    one second per record; with ``step_back`` the last file's middle record is stamped
    ``STEPPED_BACK`` (the clock set back, then forward again). ``(offset, store time)`` of each."""
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=FILE_SIZE, message_index_enable=False)
    out = []
    with StoreWriter(config) as writer:
        for i in range(FILES * PER_FILE):
            f, n = divmod(i, PER_FILE)
            ts = T0 + f * 100_000 + n * 1000
            if step_back and f == FILES - 1 and n == PER_FILE // 2:
                ts = STEPPED_BACK
            done = writer.put(StoreRecord("TopicA", b"x" * 217, f"KEYS\x01k{i:04d}\x02"), store_timestamp=ts)
            out.append((done.offset, ts))
    # each file holds the records the times above give it
    assert [off // FILE_SIZE for off, _ in out] == [i // PER_FILE for i in range(FILES * PER_FILE)]
    return out


def _plan_and_read(root: Path, lo: int | None, hi: int | None) -> tuple[int, list[int]]:
    """How many ranges the plan reads, and the offsets of the rows it returns."""
    tasks, _warnings = plan_store(open_store(root), RowFilter(None, lo, hi), range_bytes=FILE_SIZE)
    rows = []
    for t in tasks:
        assert t.offsets is None
        rows.extend(row[0] for row in range_rows(t.rng, t.broker, ("commitLogOffset",), t.row_filter))
    return len(tasks), rows


def test_no_filter_reads_every_range(tmp_path: Path) -> None:
    written = _write(tmp_path)
    ranges, rows = _plan_and_read(tmp_path, None, None)
    assert sorted(rows) == [off for off, _ in written]
    files = {off // FILE_SIZE for off, _ in written}
    assert ranges == len(files)


@pytest.mark.parametrize(
    ("lo", "hi", "ranges"),
    [
        (T0 + 2 * 100_000 + 10_000, T0 + 2 * 100_000 + 20_000, 1),  # inside file 2's span
        (T0 + 2 * 100_000 + 40_000, T0 + 3 * 100_000 + 5_000, 2),  # the end of file 2, start of 3
        (T0 + 4 * 100_000, None, 2),  # from file 4's first record on
        (None, T0 + 49_000, 1),  # up to file 0's last record
        (T0 + 60_000, T0 + 90_000, 0),  # between file 0's last record and file 1's first
        (T0 + 100 * 100_000, None, 0),  # after every record
    ],
)
def test_a_time_window_reads_only_the_ranges_it_reaches(
    tmp_path: Path, lo: int | None, hi: int | None, ranges: int
) -> None:
    written = _write(tmp_path)
    expected = sorted(off for off, ts in written if (lo is None or ts >= lo) and (hi is None or ts <= hi))
    planned, rows = _plan_and_read(tmp_path, lo, hi)
    assert sorted(rows) == expected
    assert planned == ranges


def test_a_record_stamped_after_the_clock_went_back_is_not_lost(tmp_path: Path) -> None:
    """The last file's middle record has a store time inside file 1's span: a window around it (and
    between two of file 1's records) must read the last file, whose first and last records are far
    later, and file 1 (whose span it lies in), nothing else."""
    written = _write(tmp_path, step_back=True)
    lo, hi = STEPPED_BACK - 400, STEPPED_BACK + 400
    expected = sorted(off for off, ts in written if lo <= ts <= hi)
    assert [off // FILE_SIZE for off in expected] == [FILES - 1]
    planned, rows = _plan_and_read(tmp_path, lo, hi)
    assert sorted(rows) == expected
    assert planned == 2
