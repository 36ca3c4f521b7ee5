"""Index a byte range of whole CommitLog records into one IndexFile: the builder's inner loop.

``index_range`` walks the records of ``view[pos:end]`` (one CommitLog file's map; ``base`` is that
file's first offset) and, for each, does what the broker's reput + ``buildIndex`` do: skip a
TRANSACTION_ROLLBACK record, put ``topic#UNIQ_KEY`` and ``topic#token`` for each non-empty KEYS
token, skip a record already covered by the file (``offset < endPhyOffset``: the broker's
de-duplication of a re-dispatched record). It returns at the first of:

- ``END``: ``pos`` reached ``end``;
- ``ROLL``: the record at ``pos`` has keys left to put and ``target`` is None or full; ``skip`` says
  how many of its keys are already in (the caller creates the next file and calls again);
- ``OTHER``: ``pos`` holds no plain whole record inside ``[pos, end)``: a blank end-of-file marker,
  zeros, a torn or corrupt record, one running past ``end``, or one the walk accepts but whose
  fields the decoder refuses. The caller lets the CommitLog's own walk deal with that one
  (``CommitLog.iter_records`` skips a blank to the next file and resyncs past corruption);
- ``BUDGET``: ``budget`` records were completed.

The rules for "a plain whole record" are ``store.commitlog.record.check`` with BODYCRC and the expected
PHYSICALOFFSET, plus the reput's decode of its index fields (``store.reput.decode.index_record``)
accepting it. The reput hands the index dispatcher runs it checked already: ``checked`` skips the
BODYCRC, the one costly part of the check, which the reput computed for the same bytes. This is the readable
reference; ``store/index/_index_range_fast.c`` is the same function in C (loaded below, see
``protocol.accel``) and must give byte-identical index files (``tests/store/index/test_index_range.py``).
Only bytes inside ``[pos, end)`` are read: ``end`` is where the CommitLog says whole records stop.

The file's header is rewritten after every key, as ``IndexFile.put_hash`` does: a builder killed at
any instant leaves a file it can repair and resume (``store.index.builder``).

``target`` may also be a ``bytearray``: each key is then appended to it as one packed ``PACKED``
entry (key hash, CommitLog offset, store time) and the target is never full. That is how a Spark
decode task (``store.spark.decode``) walks its range: the same walk, checks, keys and hashes as the
sequential builder, compiled when the twin is, and one compact blob per range instead of one Python
object per record. ``put_entries`` is the other half: it replays such entries into an IndexFile
through ``IndexFile.put_hash`` (the twin's writer is the same code as its ``index_range``'s).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from protocol.accel import load
from store.commitlog import record
from store.commitlog.mapped_files import RECHECK_EVERY
from store.index.index_file import IndexFile
from store.index.keys import KeyHasher
from store.reput.decode import index_record

#: Why ``index_range`` returned (the ``stop`` field of its result).
END = 0
ROLL = 1
OTHER = 2
BUDGET = 3

_HASHER = KeyHasher()

#: A packed index entry, as a ``bytearray`` target collects them: key hash (i32, already made
#: non-negative), CommitLog offset (i64), store time in ms (i64), big-endian.
PACKED = struct.Struct(">iqq")


class RangeResult(NamedTuple):
    """What one ``index_range`` call did (the compiled twin returns a plain tuple of the same fields)."""

    stop: int
    #: Offset in ``view`` of the next record to index (the one that stopped the walk, or ``end``).
    pos: int
    #: Keys of the record at ``pos`` already in the index (non-zero only with ``ROLL``).
    skip: int
    #: Records completed (indexed, skipped as rollbacks or duplicates, or without keys).
    seen: int
    #: Records whose keys were put (``IndexBuilder.records_indexed``).
    records: int
    #: Keys put (``IndexBuilder.keys_indexed``).
    keys: int


def index_range(
    view: memoryview,
    pos: int,
    end: int,
    base: int,
    target: IndexFile | bytearray | None,
    topics: set[str],
    skip: int,
    budget: int,
    safe_length: Callable[[], int] | None = None,
    checked: bool = False,
) -> RangeResult:
    """Index the whole records of ``view[pos:end]`` into ``target``; see the module docstring.

    ``checked``: the records' BODYCRC was verified already (the reput's runs, ``record.whole_run``),
    so it is not computed again; every other rule still applies.

    ``safe_length`` (the CommitLog file's ``MappedFile.safe_length``) is asked again every
    ``RECHECK_EVERY`` bytes and cuts ``end`` when the file shrank under the map
    (``store.commitlog.mapped_files``'s
    safe-length contract): the walk never touches bytes a truncation removed.
    """
    seen = records = keys_put = 0
    sink = target if isinstance(target, bytearray) else None
    check = record.check
    recheck_at = pos + RECHECK_EVERY
    while True:
        if safe_length is not None and pos >= recheck_at:
            end = min(end, safe_length())
            recheck_at = pos + RECHECK_EVERY
        if pos >= end:
            return RangeResult(END, pos, skip, seen, records, keys_put)
        if seen >= budget:
            return RangeResult(BUDGET, pos, skip, seen, records, keys_put)
        offset = base + pos
        size = check(view, pos, end, offset, check_crc=not checked)
        if size <= 0:
            return RangeResult(OTHER, pos, skip, seen, records, keys_put)
        rec = index_record(view[pos : pos + size], 0)
        if rec is None:
            return RangeResult(OTHER, pos, skip, seen, records, keys_put)
        topics.add(rec.topic)
        keys = rec.keys
        if skip < len(keys):
            if sink is not None:
                topic, store_ts = rec.topic, rec.store_timestamp
                for key in keys[skip:]:
                    sink += PACKED.pack(_HASHER(topic, key), offset, store_ts)
                    keys_put += 1
                records += 1
            elif target is None:
                return RangeResult(ROLL, pos, skip, seen, records, keys_put)
            elif offset >= target.end_phy_offset:
                store_ts = rec.store_timestamp
                topic = rec.topic
                for key in keys[skip:]:
                    if not target.put_hash(_HASHER(topic, key), offset, store_ts):
                        return RangeResult(ROLL, pos, skip, seen, records, keys_put)
                    skip += 1
                    keys_put += 1
                records += 1
        skip = 0
        seen += 1
        pos += size


def put_entries(target: IndexFile, blob: bytes | bytearray | memoryview) -> int:
    """Put the packed ``PACKED`` entries of ``blob`` into ``target`` in order, as ``IndexFile.put_hash``
    puts keys; returns how many went in (fewer than the blob holds only when ``target`` is full)."""
    if len(blob) % PACKED.size:
        raise ValueError("put_entries: need an IndexFile and whole 20-byte entries")
    put = target.put_hash
    done = 0
    for key_hash, offset, store_ts in PACKED.iter_unpack(blob):
        if not put(key_hash, offset, store_ts):
            break
        done += 1
    return done


#: The pure-Python references under their own names (the tests compare them with the compiled twins).
index_range_reference = index_range
put_entries_reference = put_entries

_fast = load("store.index._index_range_fast")
if _fast is not None:
    index_range = _fast.index_range  # the compiled twin of the reference above
    put_entries = _fast.put_entries
