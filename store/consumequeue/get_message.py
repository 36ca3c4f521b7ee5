"""``DefaultMessageStore.getMessage`` (4.9.7): what a pull reads from one consume queue.

The statuses, the next offset, the batch limits and the "suggest pulling from a slave" flag are the
broker's, rule for rule (``java-4.9.7-a.cq-expected.json`` pins them):

- max offset 0 -> NO_MESSAGE_IN_QUEUE (next 0); offset < min -> OFFSET_TOO_SMALL (next min);
  offset == max -> OFFSET_OVERFLOW_ONE (next offset); offset > max -> OFFSET_OVERFLOW_BADLY (next max);
  no readable entry at the offset -> OFFSET_FOUND_NULL (next: the start of the next queue file; the
  offset itself while its file is being rebuilt, ``store.consumequeue.file_rebuild``).
- Otherwise the entries from ``offset`` to the end of *its* file are scanned (at most
  max(16000, 20 * maxMsgNums) bytes of them): an entry whose tagsCode the filter rejects is skipped
  (NO_MATCHED_MESSAGE while nothing was found), one whose record is gone from the CommitLog
  (MESSAGE_WAS_REMOVING while nothing was found) makes the scan skip to the next CommitLog file;
  the scan stops before the message that would overflow the batch: ``maxMsgNums``, and 32 messages /
  256 KiB (8 / 64 KiB for messages more than ``accessMessageInMemoryMaxRatio``% of physical memory
  behind the CommitLog's end), the byte limit counted before adding the next message, so the first
  always fits. Next = offset + entries scanned.

This runs as a master with ``offsetCheckInSlave`` irrelevant: the next offsets are always corrected.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue, is_ext_addr
from store.platform.memory import in_memory_bytes, total_physical_memory

__all__ = [
    "RECORD_FILTER_BUDGET",
    "GetMessageResult",
    "GetMessageStatus",
    "get_message",
    "total_physical_memory",
]

#: The most records one call hands to a ``record_filter`` without a match. The broker scans the
#: whole range (up to a consume queue file, 300,000 entries, for a huge ``maxMsgNums``); each record
#: filtered here costs a property decode and an evaluation on the event loop, so the scan stops there
#: instead, answering what it found and the offset it reached (a client pulls again from it). A
#: client's usual 32-message pull covers at most 800 entries, far below.
RECORD_FILTER_BUDGET = 4096

#: ``MessageFilter.isMatchedByCommitLog``: whether a stored record (its exact bytes) is delivered.
RecordFilter = Callable[[memoryview], bool]


class GetMessageStatus(enum.Enum):
    """The broker's ``GetMessageStatus`` names (the PULL_MESSAGE remark is the name)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """What ``getMessage`` answers; ``buffers`` are the raw records (each exactly its CommitLog bytes)."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)


def _batch_full(
    config: StoreConfig, size: int, max_msg_nums: int, total: int, count: int, in_disk: bool
) -> bool:
    """``isTheBatchFull``."""
    if total == 0 or count == 0:
        return False
    if max_msg_nums <= count:
        return True
    if in_disk:
        return (
            total + size > config.max_transfer_bytes_on_message_in_disk
            or count > config.max_transfer_count_on_message_in_disk - 1
        )
    return (
        total + size > config.max_transfer_bytes_on_message_in_memory
        or count > config.max_transfer_count_on_message_in_memory - 1
    )


def get_message(
    config: StoreConfig,
    commitlog: CommitLog,
    queue: ConsumeQueue,
    offset: int,
    max_msg_nums: int,
    tags_codes: frozenset[int] | None = None,
    record_filter: RecordFilter | None = None,
) -> GetMessageResult:
    """``getMessage(group, topic, queueId, offset, maxMsgNums, filter)`` on ``queue``.

    ``tags_codes``: a TAG subscription's code set (None: no filter, as for ``*``); an entry matches
    when the low 32 bits of its tagsCode (Java's ``Long.intValue``) are in it; a ConsumeQueueExt
    address matches anything (the client filters again). ``record_filter``: the filter's look at the
    record itself (an SQL92 subscription's), asked after the record is read; a record it refuses is
    skipped as one the tags refuse (at most ``RECORD_FILTER_BUDGET`` of them per call).
    """
    min_offset = queue.min_offset
    max_offset = queue.max_offset
    max_phy = commitlog.max_offset
    if max_offset == 0:
        return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if offset < min_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if offset == max_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
    if offset > max_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
    buf = queue.index_buffer(offset)
    if buf is None:
        # A file being rebuilt from the CommitLog (it failed its checks) has nothing to answer yet:
        # the puller is sent back to the same offset, never past the entries it is to get.
        later = offset if queue.rebuilding(offset) else queue.roll_next_file(offset)
        return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, later, min_offset, max_offset)
    memory = in_memory_bytes(config.access_message_in_memory_max_ratio)
    file_size = commitlog.mapped_file_size
    status = GetMessageStatus.NO_MATCHED_MESSAGE
    buffers: list[memoryview] = []
    total = 0
    next_phy_file_start: int | None = None
    max_phy_pulling = 0
    limit = min(len(buf), max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE))
    refused = 0
    i = 0
    while i < limit:
        phy = int.from_bytes(buf[i : i + 8], "big", signed=True)
        size = int.from_bytes(buf[i + 8 : i + 12], "big", signed=True)
        code = int.from_bytes(buf[i + 12 : i + 20], "big", signed=True)
        max_phy_pulling = phy
        if next_phy_file_start is not None and phy < next_phy_file_start:
            i += CQ_STORE_UNIT_SIZE
            continue
        if _batch_full(config, size, max_msg_nums, total, len(buffers), max_phy - phy > memory):
            break
        if tags_codes is not None and not is_ext_addr(code):
            low = code & 0xFFFFFFFF
            if (low - (1 << 32) if low & 0x80000000 else low) not in tags_codes:
                if total == 0:
                    status = GetMessageStatus.NO_MATCHED_MESSAGE
                i += CQ_STORE_UNIT_SIZE
                continue
        record = commitlog.select(phy, size)
        if record is None:
            if total == 0:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_phy_file_start = phy + file_size - phy % file_size
            i += CQ_STORE_UNIT_SIZE
            continue
        if record_filter is not None and not record_filter(record):
            if total == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += CQ_STORE_UNIT_SIZE
            refused += 1
            if refused >= RECORD_FILTER_BUDGET:
                break
            continue
        buffers.append(record)
        total += size
        status = GetMessageStatus.FOUND
        next_phy_file_start = None
        i += CQ_STORE_UNIT_SIZE
    return GetMessageResult(
        status,
        offset + i // CQ_STORE_UNIT_SIZE,
        min_offset,
        max_offset,
        buffers,
        max_phy - max_phy_pulling > memory,
    )
