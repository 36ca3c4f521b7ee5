"""One consume queue file rebuilt from the CommitLog while the store is served (issue 31, item 7).

A consume queue file overwritten in place under a running reader (``cp`` of another file's bytes
over it: same inode, other entries) leaves nothing of its old entries to answer from: the reader's
map shows the new bytes. ``ConsumeQueue.refresh`` notices it (``ConsumeQueue._overwritten``), puts
an empty in-memory file in its place that answers nothing yet, and hands this rebuild to the store,
which runs it as a reput dispatcher in bounded slices (``store.file_repairs``).

What it writes is what the consume queue dispatcher writes for the same records: the entries come
from the builder's ``extract_entries`` (``dispatch_entry`` for the records it leaves to it), and an
entry lands at the slot of its record's QUEUEOFFSET, the first record of a queue offset winning as
in ``putMessagePositionInfo``. The walk starts at the CommitLog offset of the file's first entry
known before the damage and ends past its last (for the queue's last file: the CommitLog's end when
the rebuild began). Slots below the last entry found that no record claims get the broker's blank
entry (``fillPreBlank``, a record lost in a gap), so every later entry stays at its queue offset.

The queue's last file may still be written (a live broker, or this process's own builder): once
installed, its rebuild goes on following the CommitLog (``follow``), so the entries the writer adds
are found in the records, until the file is full; a read past what it holds meanwhile is sent back
to its own offset (``ConsumeQueue.rebuilding``), never past entries still to come.
"""

from __future__ import annotations

import struct

from store.consumequeue.consume_queue import (
    CQ_STORE_UNIT_SIZE,
    PRE_BLANK_SIZE,
    ConsumeQueue,
    RebuildRequest,
    entry_bytes,
)
from store.consumequeue.consume_queue_build import SPECIAL, extract_entries
from store.reput.decode import DispatchError, dispatch_entry
from store.reput.dispatcher import Run, skip_to

_I32 = struct.Struct(">i")
_BLANK = entry_bytes(0, PRE_BLANK_SIZE, 0)
#: Records ``extract_entries`` walks per call (its groups are held in memory until written here).
_BATCH_RECORDS = 4096


class QueueFileRebuild:
    """The reput dispatcher that refills one consume queue file's buffer from the CommitLog."""

    def __init__(
        self, queue: ConsumeQueue, request: RebuildRequest, delays: tuple[dict[int, int], int]
    ) -> None:
        copy, buffer, from_offset, to_offset, follow = request
        self.queue = queue
        self.copy = copy
        self.topic = queue.topic
        self.queue_id = queue.queue_id
        self._raw_topic = self.topic.encode("utf-8")
        #: The file's first byte offset in the queue (its name) and the queue offsets it holds.
        self.start = copy.start
        self.first_slot = self.start // CQ_STORE_UNIT_SIZE
        self.slots = len(buffer) // CQ_STORE_UNIT_SIZE
        self.buffer = buffer
        self._filled = bytearray(self.slots)
        self._count = 0
        #: Slots below this are all filled (entries or blanks): ``written`` looks from here on.
        self._low = 0
        #: The CommitLog offset of the next record to read, and the one past which none is needed
        #: (none: ``follow``, the queue's last file, is read until it is full).
        self.next_offset = from_offset
        self.to_offset = to_offset
        self.follow = follow
        #: The written bytes a file not being written keeps (entries whose records are gone stay
        #: blanks, not a shorter file that would end the queue there); a followed file has what the
        #: CommitLog has.
        self._at_least = 0 if follow else copy.written
        self._delays = delays
        self.done = False
        self.label = f"consume queue file {copy.path}"

    # -- in the queue ---------------------------------------------------------------------------------

    def install(self) -> None:
        """The walk caught up: the copy answers from now on."""
        self.queue.rebuilt(self.copy, self.buffer, self.written(self._at_least), following=not self.done)

    def extend(self) -> None:
        """The walk found more of the file (following the queue's last file)."""
        self.queue.extend(self.copy, self.written(0), following=not self.done)

    def alive(self) -> bool:
        """Is the copy still answering for the file (not dropped for a restored file)?"""
        return self.queue.holds(self.copy)

    def abandon(self) -> None:
        self.done = True

    # -- the reput's dispatcher -----------------------------------------------------------------------

    def begin(self) -> bool:
        return not self.done

    def resume_offset(self) -> int:
        return self.next_offset

    def flush(self) -> None:
        """Nothing to flush: the buffer is this process's own."""

    def dispatch(self, run: Run) -> None:
        view, base, pos, end = run.view, run.base, run.pos, run.end
        if self.done or base + end <= self.next_offset:
            return
        if base + pos < self.next_offset:
            pos = skip_to(run, self.next_offset)
        while pos < end and (self.follow or base + pos < self.to_offset):
            stop, after, _seen, groups = extract_entries(view, pos, end, base, _BATCH_RECORDS)
            for raw_topic, queue_id, entries, queue_offsets, _times, _consecutive in groups:
                if queue_id == self.queue_id and raw_topic == self._raw_topic:
                    offsets = memoryview(queue_offsets).cast("q")
                    for i, queue_offset in enumerate(offsets):
                        at = i * CQ_STORE_UNIT_SIZE
                        self._put(queue_offset, entries[at : at + CQ_STORE_UNIT_SIZE])
            pos = after
            if stop == SPECIAL:
                size = _I32.unpack_from(view, pos)[0]
                self._one(view[pos : pos + size], base + pos, size)
                pos += size
        self.next_offset = base + pos
        if self._count == self.slots or (not self.follow and self.next_offset >= self.to_offset):
            self.done = True

    def _one(self, buf: memoryview, offset: int, size: int) -> None:
        """A record ``extract_entries`` leaves to ``dispatch_entry`` (a delayed message's)."""
        try:
            entry = dispatch_entry(buf, self._delays)
        except (DispatchError, ValueError, struct.error):
            return  # the dispatcher writes no entry for it either
        if entry is None:
            return
        topic, queue_id, queue_offset, code, _store_ts = entry
        if topic == self.topic and queue_id == self.queue_id:
            self._put(queue_offset, entry_bytes(offset, size, code))

    def _put(self, queue_offset: int, entry: bytes) -> None:
        slot = queue_offset - self.first_slot
        if 0 <= slot < self.slots and not self._filled[slot]:
            self._filled[slot] = 1
            self._count += 1
            at = slot * CQ_STORE_UNIT_SIZE
            self.buffer[at : at + CQ_STORE_UNIT_SIZE] = entry

    def written(self, at_least: int) -> int:
        """Blank the slots no record claimed below the last one found, and below ``at_least`` (the
        written bytes the file had: entries whose records are gone stay blanks, not a shorter
        queue); the file's written bytes."""
        top = max(self._filled.rfind(1) + 1, min(at_least // CQ_STORE_UNIT_SIZE, self.slots))
        low, self._low = self._low, max(self._low, top)
        for slot in range(low, top):
            if not self._filled[slot]:
                at = slot * CQ_STORE_UNIT_SIZE
                self.buffer[at : at + CQ_STORE_UNIT_SIZE] = _BLANK
                self._filled[slot] = 1
                self._count += 1
        return top * CQ_STORE_UNIT_SIZE
