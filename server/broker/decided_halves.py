"""Which half messages are already decided, so a second END_TRANSACTION never stores a second copy.

The 4.9.7 broker keeps no such table: END_TRANSACTION reads the half message by its CommitLog offset,
checks it is the one named, and commits it (the real message written again) or rolls it back,
however often it is asked. Recorded from the real broker
(``tests/server/golden/end_transaction_twice_4.9.7.json``): a commit sent twice stores two copies, a
rollback after a commit is answered SUCCESS "not set any response code" (the message stays
delivered), a commit after a rollback stores the rolled-back message. Here, deliberately (issue 31
item 6, README "Transactions"), a half message is decided once: ``end_transaction`` asks this table
first.

A decision is known by the half message's queue and queue offset (the ``tranStateTableOffset`` the
request names and ``checkPrepareMessage`` verified), the key the broker's op records carry (the op
queue of the same queue id, the half's queue offset as the body). The table holds the decisions made
here, with their kind, and those read back from the op queue (kind unknown: a restart lost it),
newest last, at most ``capacity`` of them. The op queue is read from where this table last stopped,
at most ``catch_up`` records per END_TRANSACTION, starting ``capacity`` records before its end: a
decision older than that (or pushed out of the table) is not known, and is treated as the broker
treats every decision.
"""

from __future__ import annotations

import logging
from enum import Enum

from protocol.errors import ProtocolError
from protocol.message import decode_message
from server.broker.transactions import TRANS_OP_HALF_TOPIC, op_half_offset
from store.consumequeue.get_message import GetMessageStatus
from store.errors import StoreError
from store.message_store import MessageStore

log = logging.getLogger(__name__)

#: Decisions remembered (about 100 bytes each).
DEFAULT_CAPACITY = 100_000
#: Op records read back per END_TRANSACTION (each a small record read: well under 10 ms in all).
DEFAULT_CATCH_UP = 512


class Decision(Enum):
    COMMIT = "committed"
    ROLLBACK = "rolled back"
    #: Read back from the op queue: decided, but whether it was a commit is not known.
    UNKNOWN = "decided"


class DecidedHalves:
    """(half queue id, half queue offset) -> its ``Decision``."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, catch_up: int = DEFAULT_CATCH_UP) -> None:
        self.capacity = capacity
        self.catch_up = catch_up
        self._decided: dict[tuple[int, int], Decision] = {}
        #: Op queue id -> the op queue offset read up to.
        self._op_read: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._decided)

    def record(self, queue_id: int, half_offset: int, decision: Decision) -> None:
        """The half message at ``half_offset`` of half queue ``queue_id`` was decided here."""
        key = (queue_id, half_offset)
        self._decided.pop(key, None)
        self._decided[key] = decision
        self._bound()

    def decision(self, reader: MessageStore, queue_id: int, half_offset: int) -> Decision | None:
        """How the half message was decided, None when no decision is known."""
        self._read_ops(reader, queue_id)
        return self._decided.get((queue_id, half_offset))

    def _bound(self) -> None:
        while len(self._decided) > self.capacity:
            del self._decided[next(iter(self._decided))]

    def _read_ops(self, reader: MessageStore, queue_id: int) -> None:
        """Up to ``catch_up`` op records past the last one read (a failure is logged: the table then
        knows less, never more)."""
        try:
            start = self._op_read.get(queue_id)
            if start is None:
                end = reader.max_offset(TRANS_OP_HALF_TOPIC, queue_id)
                start = max(reader.min_offset(TRANS_OP_HALF_TOPIC, queue_id), end - self.capacity)
            left = self.catch_up
            while left > 0:
                result = reader.get_message(TRANS_OP_HALF_TOPIC, queue_id, start, min(left, 32))
                if result.status is not GetMessageStatus.FOUND or not result.buffers:
                    if result.next_begin_offset > start and result.status is not GetMessageStatus.FOUND:
                        start = result.next_begin_offset  # trimmed: go on from where the queue starts
                        left -= 1
                        continue
                    break
                for buf in result.buffers:
                    half = op_half_offset(decode_message(buf, decompress=False))
                    if half is not None:
                        self._decided.setdefault((queue_id, half), Decision.UNKNOWN)
                left -= len(result.buffers)
                start = result.next_begin_offset
            self._op_read[queue_id] = start
            self._bound()
        except (StoreError, ProtocolError, OSError) as exc:
            log.error("reading %s queue %d for decided halves failed: %s", TRANS_OP_HALF_TOPIC, queue_id, exc)
