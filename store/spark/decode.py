"""Decode one CommitLog range into packed index entries: the work each decode task does.

Per record this is exactly the broker's ``buildIndex``, through the reput's decode of a record
(``store.reput.decode.index_record``, what the index dispatcher indexes) and the builder's
``KeyHasher``: a transaction rollback is skipped, then ``topic#UNIQ_KEY`` (when
the property is present) and each non-empty token of ``KEYS`` split on single spaces become one
entry each, in that order. Each record is fully checked first, as the sequential walk checks it
(lengths add up to TOTALSIZE, PHYSICALOFFSET matches its position, BODYCRC matches the body); a
record that fails is skipped as the walk skips it, and the task reports where and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.index.keys import KeyHasher
from store.reput.decode import index_record
from store.spark.entries import ENTRY
from store.spark.range_walk import walk_range
from store.spark.ranges import CommitLogRange


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
    out = bytearray()
    extend = out.extend
    pack = ENTRY.pack
    hasher = KeyHasher()

    def visit(view: memoryview, pos: int, size: int) -> bool:
        rec = index_record(view, pos)
        if rec is None:
            return False
        topic, offset, store_ts = rec.topic, rec.commit_log_offset, rec.store_timestamp
        for key in rec.keys:
            extend(pack(hasher(topic, key), offset, store_ts))
        return True

    walk = walk_range(rng, visit)
    return RangeEntries(
        rng.index,
        bytes(out),
        walk.records,
        rng.end - rng.start,
        tuple(walk.runs),
        tuple(walk.bad),
        walk.file_end,
    )
