"""How a Spark decode task walks its CommitLog range: the sequential walk's checks and skip rule.

Both rebuilds decode ranges in parallel (the index's ``decode.decode_range``, the consume queues'
``consume_queue.decode_cq_range``) and must walk them exactly as the sequential builders walk the
CommitLog: every record fully checked (lengths, PHYSICALOFFSET, BODYCRC), an end-of-file marker (or no
room left for one) ending the file, a record that does not check noted with its reason and skipped
by ``record.resync``. What the walk finds besides the records, the runs of whole records and the bad
bytes between them, is what the driver strings together to find gaps (``rebuild.find_gaps``).

A walker with a compiled loop over whole records (the index's ``index_range``, the sequential
builder's own) passes it as ``scan``: it takes every record it can from a position, and only where
it stops (a bad record, an end-of-file marker) does the per-record step below look, as the reput
leaves such a position to the CommitLog's own walk. Per record, Python then does nothing.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.record_layout import BLANK_SIZE, SIZE_MAGIC_WIDTH
from store.commitlog import record
from store.commitlog.record import describe_invalid
from store.spark.ranges import CommitLogRange


@dataclass(slots=True)
class RangeWalk:
    """Where one range's whole records are.

    ``runs`` are the stretches ``(start, end)`` of consecutive whole records, in order; where a run
    ends before the range does, ``bad`` says why the bytes there are not a record (offset -> reason).
    ``file_end`` is where an end-of-file marker (or no room for one) ended the file inside the range.
    """

    records: int = 0
    runs: list[tuple[int, int]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    file_end: int | None = None


#: ``scan(view, pos, end, base) -> (stop, records)``: the whole records from ``pos`` on, each fully
#: checked (at its own offset, BODYCRC) and visited, up to the first it cannot take (``stop``).
Scan = Callable[[memoryview, int, int, int], tuple[int, int]]


def walk_range(
    rng: CommitLogRange, visit: Callable[[memoryview, int, int], bool], scan: Scan | None = None
) -> RangeWalk:
    """Walk the records of ``rng``, calling ``visit(view, pos, size)`` for each one that checks
    (``pos`` within the file's ``view``, valid only during the call).

    ``visit`` returns False when the record is not one after all (its fields do not decode): it is then
    bad bytes like a record that fails its check, noted and skipped. With ``scan``, runs of whole
    records are taken by it, and ``visit`` sees only a record where ``scan`` stopped (none, when the
    two agree on what a record is: the position then is bad bytes or the file's end).
    """
    walk = RangeWalk()
    runs, bad = walk.runs, walk.bad
    records = 0
    base = rng.file_start
    check = record.check
    with open(rng.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            pos = run_start = rng.start - base
            end = rng.end - base
            while pos < end:
                if scan is not None:
                    pos, n = scan(view, pos, end, base)
                    records += n
                    if pos >= end:
                        break
                if pos + SIZE_MAGIC_WIDTH <= end:
                    size = check(view, pos, end, base + pos, check_crc=True)
                else:
                    size = record.BLANK
                if size == record.BLANK and (
                    pos + BLANK_SIZE > len(mm) or check(view, pos, len(mm)) == record.BLANK
                ):
                    walk.file_end = base + pos  # an end-of-file marker, or no room left for one
                    break
                if size <= 0 or not visit(view, pos, size):
                    if pos > run_start:
                        runs.append((base + run_start, base + pos))
                    bad.append((base + pos, describe_invalid(view, pos, end, base + pos)))
                    nxt, _scanned = record.resync(view, pos, end, base, last=rng.last)
                    if nxt is None:
                        run_start = pos = end
                        break
                    run_start = pos = nxt
                    continue
                records += 1
                pos += size
            if pos > run_start:
                runs.append((base + run_start, base + pos))
        finally:
            view.release()
    walk.records = records
    return walk
