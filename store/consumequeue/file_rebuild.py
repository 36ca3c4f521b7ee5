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
the rebuild began, so the entries a live writer added meanwhile are found too). Slots below the last
entry found that no record claims get the broker's blank entry (``fillPreBlank``, a record lost in a
gap), so every later entry stays at its queue offset.
"""

from __future__ import annotations

import struct

from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE, entry_bytes
from store.consumequeue.consume_queue_build import SPECIAL, extract_entries
from store.reput.decode import DispatchError, dispatch_entry
from store.reput.dispatcher import Run, skip_to

_I32 = struct.Struct(">i")
_BLANK = entry_bytes(0, PRE_BLANK_SIZE, 0)
#: Records ``extract_entries`` walks per call (its groups are held in memory until written here).
_BATCH_RECORDS = 4096


class QueueFileRebuild:
    """The reput dispatcher that refills one consume queue file's buffer from the CommitLog."""

    kind = "consume_queue"

    def __init__(
        self,
        topic: str,
        queue_id: int,
        start: int,
        buffer: bytearray,
        from_offset: int,
        to_offset: int,
        delays: tuple[dict[int, int], int],
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self._raw_topic = topic.encode("utf-8")
        #: The file's first byte offset in the queue (its name) and the queue offsets it holds.
        self.start = start
        self.first_slot = start // CQ_STORE_UNIT_SIZE
        self.slots = len(buffer) // CQ_STORE_UNIT_SIZE
        self.buffer = buffer
        self._filled = bytearray(self.slots)
        #: The CommitLog offset of the next record to read, and the one past which none is needed.
        self.next_offset = from_offset
        self.to_offset = to_offset
        self._delays = delays
        self.done = False
        self.found = 0

    @property
    def label(self) -> str:
        return f"{self.topic}/{self.queue_id} file {self.start:020d}"

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
        while pos < end and base + pos < self.to_offset:
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
        if self.next_offset >= self.to_offset:
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
            at = slot * CQ_STORE_UNIT_SIZE
            self.buffer[at : at + CQ_STORE_UNIT_SIZE] = entry
            self.found += 1

    def finish(self, at_least: int) -> int:
        """Blank the slots no record claimed below the last one found, and below ``at_least`` (the
        written bytes the file had: entries whose records are gone stay blanks, not a shorter
        queue); the file's written bytes."""
        self.done = True
        top = max(self._filled.rfind(1) + 1, min(at_least // CQ_STORE_UNIT_SIZE, self.slots))
        for slot in range(top):
            if not self._filled[slot]:
                at = slot * CQ_STORE_UNIT_SIZE
                self.buffer[at : at + CQ_STORE_UNIT_SIZE] = _BLANK
        return top * CQ_STORE_UNIT_SIZE
