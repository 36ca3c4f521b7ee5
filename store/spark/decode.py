"""Decode one CommitLog range into packed index entries: the work each decode task does.

Per record this is exactly the broker's ``buildIndex``, through the reput's decode of a record
(``store.reput.decode.index_record``, what the index dispatcher indexes) and the builder's
``KeyHasher``: a transaction rollback is skipped, then ``topic#UNIQ_KEY`` (when
the property is present) and each non-empty token of ``KEYS`` split on single spaces become one
entry each, in that order. Each record is fully checked first, as the sequential walk checks it
(lengths add up to TOTALSIZE, PHYSICALOFFSET matches its position, BODYCRC matches the body); a
record that fails is skipped as the walk skips it, and the task reports where and why.

The records are walked by the sequential builder's own loop, ``store.index.index_range.index_range``
(compiled when its twin is built; the pure-Python reference under ``RMQ_PURE_PYTHON=1``), packing
the keys into one ``bytearray`` per range: per record no Python runs, and what leaves the task is
one blob. Where that loop stops (a record that does not check, an end-of-file marker), the walk's
per-record step takes over (``range_walk``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from store.index.index_range import index_range
from store.index.keys import KeyHasher
from store.reput.decode import index_record
from store.spark.entries import ENTRY
from store.spark.range_walk import walk_range
from store.spark.ranges import CommitLogRange

_NO_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True)
class RangeEntries:
    """What one range decoded into, and where its whole records are.

    ``runs`` are the stretches ``(start, end)`` of consecutive whole records, in order; where a run
    ends before the range does, ``bad`` says why the bytes there are not a record (offset -> reason).
    The driver strings the runs of all ranges together: where one run does not begin where the
    previous ended (or at the next file after an end-of-file marker, ``file_end``), there is a gap
    (``store.commitlog.gaps``), exactly where the sequential builder's walk finds it.
    """

    index: int
    blob: bytes
    records: int
    bytes_read: int
    runs: tuple[tuple[int, int], ...] = ()
    bad: tuple[tuple[int, str], ...] = ()
    file_end: int | None = None


def decode_range(rng: CommitLogRange) -> RangeEntries:
    """Walk ``rng`` record by record (``range_walk``) and pack every index entry it yields.

    A record that does not check, or whose fields do not decode, is skipped the way the sequential
    walk skips it (``record.resync``: at ``pos + TOTALSIZE`` when whole records go on there, else,
    outside the last file holding data, at the next magic code whose record checks at its own
    offset); the driver decides whether that is a gap to refuse or the end of the log.
    """
    out, result = _decode(rng)
    return replace(result, blob=bytes(out))


def entries_path(directory: str | os.PathLike[str], index: int) -> Path:
    """Where ``decode_range_to_file`` leaves the entries of range ``index``."""
    return Path(directory) / f"range-{index:08d}"


def decode_range_to_file(rng: CommitLogRange, directory: str) -> tuple[RangeEntries, int]:
    """``decode_range``, the blob written to ``entries_path(directory, rng.index)`` instead of
    returned: ``(the result without its blob, its entry count)``.

    What a Spark decode task hands back is then a few numbers, not megabytes of entries that Spark
    would pickle into its JVM, keep in its block store and shuffle to the write tasks; those read
    their slices of the file (``index_writer.write_spans``, or the driver's ``index_stream``).
    ``directory`` is in the rebuild's
    staging directory, on the filesystem every executor reaches (as the store and the output are).
    """
    out, result = _decode(rng)
    path = entries_path(directory, rng.index)
    # Written aside and renamed: the file appears whole, so the driver's writer (``index_stream``)
    # can take it the moment it exists, while this job's other tasks still run.
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as fh:
        fh.write(out)
    os.replace(part, path)
    return result, len(out) // ENTRY.size


def _decode(rng: CommitLogRange) -> tuple[bytearray, RangeEntries]:
    """The packed entries of ``rng`` and what its walk found (the result's ``blob`` left empty)."""
    out = bytearray()
    extend = out.extend
    pack = ENTRY.pack
    hasher = KeyHasher()
    topics: set[str] = set()

    def scan(view: memoryview, pos: int, end: int, base: int) -> tuple[int, int]:
        result = index_range(view, pos, end, base, out, topics, 0, _NO_LIMIT)
        return result[1], result[3]  # (pos, seen): where it stopped, the records it walked

    def visit(view: memoryview, pos: int, size: int) -> bool:
        rec = index_record(view, pos)
        if rec is None:
            return False
        topic, offset, store_ts = rec.topic, rec.commit_log_offset, rec.store_timestamp
        for key in rec.keys:
            extend(pack(hasher(topic, key), offset, store_ts))
        return True

    walk = walk_range(rng, visit, scan)
    return out, RangeEntries(
        rng.index,
        b"",
        walk.records,
        rng.end - rng.start,
        tuple(walk.runs),
        tuple(walk.bad),
        walk.file_end,
    )
