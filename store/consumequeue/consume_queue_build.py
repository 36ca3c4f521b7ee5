"""A run's consume queue entries, laid out per queue: the consume queue dispatcher's inner loop.

``extract_entries(view, pos, end, base, max_records)`` walks the whole, checked records of
``view[pos:end]`` (one CommitLog file's run from the reput; ``base`` is the offset of ``view[0]``) and
computes, for each, what ``store.reput.decode.dispatch_entry`` computes: no entry for a PREPARED or
ROLLBACK record, otherwise the entry ``(base + position, TOTALSIZE, tagsCode)`` in queue
``(topic, QUEUEID)`` at QUEUEOFFSET, with the record's store time. It returns
``(stop, pos, seen, groups)``: why it stopped, where (the next record's position), the records
walked, and one group per queue in the order the queues were first met::

    (topic bytes, queue id, entries, queue offsets, store times, consecutive)

``entries`` are the 20-byte consume queue entries exactly as the broker writes them, so the builder
appends a queue's batch with one write; ``queue offsets`` and ``store times`` are native int64 arrays
(``array("q")`` bytes) the builder reads where a batch cannot go in whole (a new file, a hole, a
duplicate); ``consecutive`` says each queue offset is the previous one plus one.

Why a batch: the builder used to decode each record in Python and ``pwrite`` its 20 bytes alone
(705 s of a 786 s rebuild of a 28.5M-record store, issue 22); per queue per run it is one write.

It stops at:

- ``END``: ``pos`` reached ``end``;
- ``BUDGET``: ``max_records`` records were walked (the builder's bound on what it holds in memory);
- ``SPECIAL``: the record at ``pos`` is one whose entry is left to ``dispatch_entry`` (the caller
  dispatches it alone): a ``SCHEDULE_TOPIC_XXXX`` record with a DELAY property (its tagsCode is a
  delivery time from the broker's delay levels, and a DELAY that is not an int is refused), or one
  whose lengths do not fit inside it (the reput's check makes that impossible for its runs; the
  rule keeps every read inside the record).

This is the readable reference; ``store/consumequeue/_consume_queue_build_fast.c`` is the same
function in C (loaded below, see ``protocol.accel``), compared with this one by
``tests/store/consumequeue/test_consume_queue_batch.py``.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable

from protocol.accel import load
from protocol.index_key import java_string_hash
from protocol.record_layout import (
    BODY_LENGTH_AT,
    BODY_LENGTH_WIDTH,
    HOST_KIND_SHIFT,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    PROPERTIES_LENGTH_WIDTH,
    SIZE_MAGIC_WIDTH,
    STORE_TIMESTAMP_AT,
    TOPIC_LENGTH_WIDTH_V1,
    TOPIC_LENGTH_WIDTH_V2,
    head_struct,
)
from store.consumequeue.consume_queue import entry_bytes

__all__ = [
    "BUDGET",
    "END",
    "SPECIAL",
    "Group",
    "append_entries",
    "extract_entries",
    "extract_entries_reference",
]

#: Why ``extract_entries`` returned (the ``stop`` field of its result).
END = 0
SPECIAL = 1
BUDGET = 2

#: One queue's part of a call: (topic bytes, queue id, entries, queue offsets, store times, consecutive).
Group = tuple[bytes, int, bytes, bytes, bytes, bool]

_HEAD = head_struct("TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TX_MASK = 0xC
_TX_PREPARED = 0x4
_TX_ROLLBACK = 0xC
_SCHEDULE_TOPIC = b"SCHEDULE_TOPIC_XXXX"


def _scan_properties(props: bytes) -> tuple[bytes | None, bool]:
    """The last non-empty TAGS value and whether a DELAY item is there (``dispatch_entry``'s reads)."""
    tags = None
    delay = False
    for item in props.split(b"\x02"):
        if item.startswith(b"TAGS\x01") and len(item) > 5:
            tags = item[5:]
        elif item.startswith(b"DELAY\x01"):
            delay = True
    return tags, delay


def extract_entries(
    view: memoryview | bytes, pos: int, end: int, base: int, max_records: int
) -> tuple[int, int, int, list[Group]]:
    """The entries of the records of ``view[pos:end]``, per queue; see the module docstring."""
    if pos < 0 or end > len(view) or pos > end:
        raise ValueError("extract_entries: need 0 <= pos <= end <= len(view)")
    groups: dict[tuple[bytes, int], tuple[bytearray, array[int], array[int], list[bool]]] = {}
    seen = 0
    stop = END
    while True:
        if pos >= end:
            stop = END
            break
        if seen >= max_records:
            stop = BUDGET
            break
        stop = SPECIAL
        if end - pos < SIZE_MAGIC_WIDTH:
            break
        total = _I32.unpack_from(view, pos)[0]
        if total < MIN_RECORD_SIZE or total > end - pos:
            break
        _total, magic, queue_id, queue_offset, _phy, sys_flag = _HEAD.unpack_from(view, pos)
        tran = sys_flag & _TX_MASK
        if tran == _TX_PREPARED or tran == _TX_ROLLBACK:
            seen += 1
            pos += total
            continue
        kind = (sys_flag >> HOST_KIND_SHIFT) & 3
        store_ts = _I64.unpack_from(view, pos + STORE_TIMESTAMP_AT[kind])[0]
        p = BODY_LENGTH_AT[kind]
        if p + BODY_LENGTH_WIDTH > total:
            break
        p += BODY_LENGTH_WIDTH + max(_I32.unpack_from(view, pos + p)[0], 0)
        if magic == MAGIC_CODE_V2:
            if p + TOPIC_LENGTH_WIDTH_V2 > total:
                break
            topic_len = _I16.unpack_from(view, pos + p)[0]
            p += TOPIC_LENGTH_WIDTH_V2
        else:
            if p + TOPIC_LENGTH_WIDTH_V1 > total:
                break
            topic_len = view[pos + p]
            p += TOPIC_LENGTH_WIDTH_V1
        if topic_len < 0 or p + topic_len + PROPERTIES_LENGTH_WIDTH > total:
            break
        topic = bytes(view[pos + p : pos + p + topic_len])
        p += topic_len
        props_len = _I16.unpack_from(view, pos + p)[0]
        p += PROPERTIES_LENGTH_WIDTH
        code = 0
        if props_len > 0:
            if p + props_len > total:
                break
            tags, delay = _scan_properties(bytes(view[pos + p : pos + p + props_len]))
            if delay and topic == _SCHEDULE_TOPIC:
                break  # a delivery time: dispatch_entry's
            if tags is not None:
                code = java_string_hash(tags.decode("utf-8", "replace"))
        group = groups.get((topic, queue_id))
        if group is None:
            group = groups[(topic, queue_id)] = (bytearray(), array("q"), array("q"), [True])
        entries, qoffs, times, consecutive = group
        if qoffs and (qoffs[-1] == 2**63 - 1 or queue_offset != qoffs[-1] + 1):
            consecutive[0] = False
        entries += entry_bytes(base + pos, total, code)
        qoffs.append(queue_offset)
        times.append(store_ts)
        seen += 1
        pos += total
    out = [
        (topic, queue_id, bytes(entries), qoffs.tobytes(), times.tobytes(), consecutive[0])
        for (topic, queue_id), (entries, qoffs, times, consecutive) in groups.items()
    ]
    return stop, pos, seen, out


#: The pure-Python reference under its own name (the tests compare it with the compiled twin).
extract_entries_reference = extract_entries

#: The builder's common case written in one compiled call (``ConsumeQueueBuilder._dispatch``): None
#: in pure Python, where the builder's own path (the reference) does everything.
append_entries: Callable[..., tuple[int, int, int, int, int, int] | None] | None = None

_fast = load("store.consumequeue._consume_queue_build_fast")
if _fast is not None:
    extract_entries = _fast.extract_entries  # the compiled twin of the reference above
    append_entries = _fast.append_entries
