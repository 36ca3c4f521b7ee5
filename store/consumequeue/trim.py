"""Trimming consume queues back to the CommitLog's end, as the 4.9.7 broker's recovery does.

When the CommitLog ends below where a queue's entries point (a torn tail cut off at open, a
CommitLog file cut short, the last files removed), the broker's ``CommitLog.recoverNormally`` /
``recoverAbnormally`` call ``truncateDirtyLogicFiles(processOffset)``, and every
``ConsumeQueue.truncateDirtyLogicFiles`` keeps only the entries that point below that offset: from
its last file back, a file whose first entry points at or past the end is deleted; in the first file
that survives, entries are kept from its start up to the first one that points at or past the end (or
is not an entry: offset < 0, size <= 0). With no CommitLog left at all the broker destroys every queue
(``destroyLogics``), which is the same rule at offset 0.

Without this, a writer resuming such a store would hand out the old queue offsets again: new records
written at the cut would either be skipped by the consume queue builder (their offsets are below
the queue's last entry's end) or old entries would point at new, different records.

The bytes past the kept entries are zeroed (the broker only moves its write position back; zeros
are what the builder and the readers take for the written end).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from store.consumequeue.builder import check_geometry
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue

__all__ = ["QueueTrim", "trim_queues_past"]

log = logging.getLogger("store.consumequeue.consume_queue")
_OFFSET_SIZE = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class QueueTrim:
    """One queue cut back: its written end (in entries) before and after."""

    topic: str
    queue_id: int
    old_end: int
    new_end: int


def _queue_files(directory: Path) -> list[int]:
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit() and len(n) == 20)


def _last_entry_offset(root: Path, topic: str, queue_id: int, file_size: int) -> tuple[int, int] | None:
    """(written end in entries, CommitLog offset of the last entry), None for an empty queue."""
    reader = ConsumeQueue(root, topic, queue_id, file_size)
    try:
        end = reader.max_offset
        last = reader.entry(end - 1) if end > 0 else None
        return None if last is None else (end, last.commit_log_offset)
    finally:
        reader.close()


def _trim_queue(directory: Path, file_size: int, end: int) -> int:
    """``ConsumeQueue.truncateDirtyLogicFiles(end)`` on one queue; returns its new end in entries."""
    for start in reversed(_queue_files(directory)):
        path = directory / f"{start:020d}"
        with open(path, "r+b") as f:
            data = f.read()
            first = _OFFSET_SIZE.unpack_from(data, 0)[0] if len(data) >= CQ_STORE_UNIT_SIZE else end
            if first >= end:
                f.close()
                path.unlink()
                continue
            keep = CQ_STORE_UNIT_SIZE
            for pos in range(CQ_STORE_UNIT_SIZE, len(data) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                offset, size = _OFFSET_SIZE.unpack_from(data, pos)
                if offset < 0 or size <= 0 or offset >= end:
                    break
                keep = pos + CQ_STORE_UNIT_SIZE
            if data[keep:].strip(b"\0"):
                f.seek(keep)
                f.write(bytes(len(data) - keep))
            return (start + keep) // CQ_STORE_UNIT_SIZE
    return 0


def trim_queues_past(root: Path, file_size: int, end: int) -> list[QueueTrim]:
    """Cut every queue under ``root`` back to its entries that point below CommitLog offset ``end``.

    Only queues whose last entry points at or past ``end`` are touched (the broker truncates when the
    queues' largest offset reaches the recovered end); the others are not read beyond their last
    entry. Logs one WARNING when anything was trimmed. Returns the queues cut back.
    """
    trimmed: list[QueueTrim] = []
    check_geometry(root, file_size)  # never cut files of another geometry (a wrong broker.conf)
    try:
        topics = sorted(e.name for e in os.scandir(root) if e.is_dir())
    except FileNotFoundError:
        return trimmed
    for topic in topics:
        queue_ids = sorted(int(e.name) for e in os.scandir(root / topic) if e.is_dir() and e.name.isdigit())
        for queue_id in queue_ids:
            last = _last_entry_offset(root, topic, queue_id, file_size)
            if last is None or last[1] < end:
                continue
            new_end = _trim_queue(root / topic / str(queue_id), file_size, end)
            trimmed.append(QueueTrim(topic, queue_id, last[0], new_end))
    if trimmed:
        entries = sum(t.old_end - t.new_end for t in trimmed)
        shown = ", ".join(f"{t.topic}/{t.queue_id} {t.old_end}->{t.new_end}" for t in trimmed[:8])
        more = f" and {len(trimmed) - 8} more" if len(trimmed) > 8 else ""
        log.warning(
            "the CommitLog ends at offset %d, below %d consume queue entries that point at or past it "
            "(a torn tail cut off, a CommitLog file cut short or removed): trimmed as the broker's "
            "recovery does (truncateDirtyLogicFiles), so new records take those queue offsets again; "
            "queue ends before->after: %s%s",
            end,
            entries,
            shown,
            more,
        )
    return trimmed
