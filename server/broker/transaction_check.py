"""The check-back: asking producers about half messages nobody decided (``TransactionalMessageCheckService``).

Every ``transactionCheckInterval`` the broker walks each queue of ``RMQ_SYS_TRANS_HALF_TOPIC`` from its
progress offset (the consumer offset of group ``CID_RMQ_SYS_TRANS``, persisted in
``consumerOffset.json`` like any group's, so a restart resumes where the walk stood), reading the op
queue (``RMQ_SYS_TRANS_OP_HALF_TOPIC``) to learn which half messages are already decided. For each
undecided half message old enough (``transactionTimeOut``, or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``)
it appends a copy with ``TRANSACTION_CHECK_TIMES`` one higher, moves its progress past the original,
and sends CHECK_TRANSACTION_STATE (oneway) to one live producer of the message's group; the producer
answers with an END_TRANSACTION naming the copy. A message checked ``transactionCheckMax`` times is
moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` instead. The walk stops at a message younger than the timeout
(later ones are younger still) and at the copies it appended itself (stored after the walk began).

Differences from 4.9.7, each where Java would spin or stall rather than decide:

- The op queue is read to its end before the half queue is walked (Java reads it 32 at a time as the
  walk needs; it decides the same), in pages, yielding between them.
- A half message that is old enough by neither rule (its age exactly the timeout, or an immunity
  whose copy could not be put) ends the walk; Java pulls the exhausted op queue again and again until
  its 60 s per-queue limit.
- An op record whose body is not a number is counted done (Java never moves its op progress past it,
  and so re-reads every later op on every pass).

The walk is a generator yielding after each message, so the caller (the server's event loop) can
serve others between steps; a producer that never answers costs one oneway write per check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator

from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from server.broker.client_channel import Channel
from server.broker.controller import BrokerController
from server.broker.put_message import PutRefused
from server.broker.transaction_states import HalfEvent, HalfMessageState
from server.broker.transactions import (
    CHECK_GROUP,
    PROPERTY_CHECK_IMMUNITY_TIME,
    PROPERTY_CHECK_TIMES,
    PROPERTY_PREPARED_QUEUE_OFFSET,
    PROPERTY_PRODUCER_GROUP,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    CheckBack,
    TransactionSettings,
    check_back,
    discard_record,
    op_half_offset,
    renewed_half_record,
    system_topic,
)
from store.config.topics import TopicConfig
from store.consumequeue.get_message import GetMessageStatus
from store.errors import StoreError

log = logging.getLogger(__name__)

#: ``TransactionalMessageServiceImpl.MAX_PROCESS_TIME_LIMIT``: one queue's walk stops after this (ms).
MAX_PROCESS_MS = 60_000
#: ``MessageStoreConfig.fileReservedTime`` (hours): a half message older than this is given up on.
FILE_RESERVED_HOURS = 72
#: Op records read per page (``fillOpRemoveMap`` pulls 32).
OP_PAGE = 32

_NO_NEW = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)

#: How a check-back is sent: the caller's front door turns it into a CHECK_TRANSACTION_STATE.
SendCheck = Callable[[Channel, CheckBack], None]


def java_parse_long(value: str) -> int:
    """``getLong``: ``Long.parseLong``, -1 when it throws."""
    text = value[1:] if value[:1] in "+-" else value
    if not text or not text.isascii() or not text.isdigit():
        return -1
    parsed = int(value)
    return parsed if -(2**63) <= parsed < 2**63 else -1


class TransactionChecker:
    """One broker's check-back over its half and op queues."""

    def __init__(
        self,
        broker: BrokerController,
        settings: TransactionSettings,
        send_check: SendCheck,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.send_check = send_check
        self.clock = clock or broker.clock
        #: Check-backs sent and half messages discarded since start (for tests and logs).
        self.sent = 0
        self.discarded = 0

    # -- progress (consumer offsets of CID_RMQ_SYS_TRANS) ------------------------------------------

    def _progress(self, topic: str, queue_id: int) -> int:
        """``fetchConsumeOffset``: the stored offset, else the queue's min offset."""
        offset = self.broker.offsets.query(CHECK_GROUP, topic, queue_id)
        if offset == -1:
            offset = self.broker.store.reader.min_offset(topic, queue_id)
        return offset

    def _commit(self, topic: str, queue_id: int, offset: int) -> None:
        self.broker.offsets.commit(CHECK_GROUP, topic, queue_id, offset)

    def _system_topic(self, topic: str) -> TopicConfig:
        return system_topic(self.broker.store, topic, self.clock())

    # -- the walk ------------------------------------------------------------------------------

    def check(self) -> Iterator[None]:
        """One pass over every half queue (``TransactionalMessageServiceImpl.check``)."""
        config = self._system_topic(TRANS_HALF_TOPIC)
        for queue_id in range(config.read_queue_nums):
            try:
                yield from self._check_queue(queue_id)
            except (StoreError, ProtocolError, OSError) as exc:
                log.error("transaction check of %s queue %d failed: %s", TRANS_HALF_TOPIC, queue_id, exc)

    def _read_ops(
        self, queue_id: int, op_offset: int, half_offset: int
    ) -> Generator[None, None, tuple[dict[int, int], list[int], int]]:
        """Every op record from ``op_offset`` on, read in pages (yielding between them): returns half
        offset -> op offset for those the walk has not passed, the op offsets already done, and the
        op progress (moved when the store no longer has the offset it was at)."""
        reader = self.broker.store.reader
        remove: dict[int, int] = {}
        done: list[int] = []
        offset = op_offset
        moved = 0
        while True:
            result = reader.get_message(TRANS_OP_HALF_TOPIC, queue_id, offset, OP_PAGE)
            if result.status is not GetMessageStatus.FOUND:
                if result.status in _NO_NEW or result.next_begin_offset == offset or moved > 2:
                    break
                # An offset the queue no longer (or never) had: go on from where the store says.
                moved += 1
                offset = result.next_begin_offset
                op_offset = offset
                self._commit(TRANS_OP_HALF_TOPIC, queue_id, offset)
                continue
            for buf in result.buffers:
                op = decode_message(buf, decompress=False)
                half = op_half_offset(op)
                if half is None:
                    log.warning("op record at %d is not a %s record: passed over", op.commit_log_offset, "d")
                    done.append(op.queue_offset)
                elif half < half_offset:
                    done.append(op.queue_offset)
                else:
                    remove[half] = op.queue_offset
            offset = result.next_begin_offset
            yield
        return remove, done, op_offset

    def _check_queue(self, queue_id: int) -> Iterator[None]:
        start = self.clock()
        half_offset = self._progress(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._progress(TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            return
        remove, done, op_offset = yield from self._read_ops(queue_id, op_offset, half_offset)
        reader = self.broker.store.reader
        settings = self.settings
        i = new_offset = half_offset
        misses = 1
        while self.clock() - start <= MAX_PROCESS_MS:
            if i in remove:
                done.append(remove.pop(i))
                i += 1
                new_offset = i
                continue
            result = reader.get_message(TRANS_HALF_TOPIC, queue_id, i, 1)
            if result.status is not GetMessageStatus.FOUND or not result.buffers:
                misses += 1
                if misses > 2 or result.status in _NO_NEW or result.next_begin_offset == i:
                    break
                i = new_offset = result.next_begin_offset
                continue
            half = decode_message(result.buffers[0], decompress=False)
            if self._discard_or_count(half):
                i += 1
                new_offset = i
                yield
                continue
            if half.store_timestamp >= start:
                break  # stored after this walk began: a copy of ours, or a new one; next pass
            now = self.clock()
            age = now - half.born_timestamp
            immunity = settings.timeout_ms
            immunity_text = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME)
            if immunity_text is not None:
                seconds = java_parse_long(immunity_text)
                immunity = settings.timeout_ms if seconds == -1 else seconds * 1000
                if age < immunity and self._immune(remove, done, half):
                    i += 1
                    new_offset = i
                    continue
            elif 0 <= age < immunity:
                break  # too young to ask about; every later one is younger
            if not (age > immunity or age <= -1):
                break  # see the module docstring: Java spins here until its time limit
            if not self._ask(half):
                break
            i += 1
            new_offset = i
            yield
        if new_offset != half_offset:
            self._commit(TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op = op_offset
        for offset in sorted(done):
            if offset == new_op:
                new_op += 1
            elif offset > new_op:
                break
        if new_op != op_offset:
            self._commit(TRANS_OP_HALF_TOPIC, queue_id, new_op)

    def _discard_or_count(self, half: MessageExt) -> bool:
        """``needDiscard`` / ``needSkip``: True when the half message was given up on (moved to
        ``TRANS_CHECK_MAX_TIME_TOPIC``); else its check count is raised in ``half.properties``."""
        state = HalfMessageState.from_check_times(half.properties.get(PROPERTY_CHECK_TIMES))
        check_max = self.settings.check_max
        if state.must_discard(check_max):
            state.apply(HalfEvent.DISCARD, check_max)
        else:
            state = state.apply(HalfEvent.CHECK, check_max)
            half.properties[PROPERTY_CHECK_TIMES] = state.check_times_property()
            if self.clock() - half.born_timestamp <= FILE_RESERVED_HOURS * 3600 * 1000:
                return False
            state.apply(HalfEvent.EXPIRE, check_max)
        log.error(
            "half message %s (offset %d) checked %d times or past the store's reserved time: moved to %s",
            half.msg_id,
            half.commit_log_offset,
            state.checks,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )
        self._system_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        try:
            self.broker.store.put([discard_record(half)])
        except (PutRefused, OSError) as exc:
            log.error("moving half message %s to %s failed: %s", half.msg_id, TRANS_CHECK_MAX_TIME_TOPIC, exc)
        self.discarded += 1
        return True

    def _immune(self, remove: dict[int, int], done: list[int], half: MessageExt) -> bool:
        """``checkPrepareQueueOffset``: True when the walk may pass over ``half`` (decided, or put back
        to wait out its immunity)."""
        prepared = half.properties.get(PROPERTY_PREPARED_QUEUE_OFFSET)
        if prepared is not None:
            first = java_parse_long(prepared)
            if first == -1:
                return False
            if first in remove:
                done.append(remove.pop(first))
                return True
        try:
            self.broker.store.put([renewed_half_record(half, immunity=True)])
        except (PutRefused, OSError) as exc:
            log.error("putting half message %s back failed: %s", half.msg_id, exc)
            return False
        return True

    def _ask(self, half: MessageExt) -> bool:
        """``putBackHalfMsgQueue`` then ``resolveHalfMsg``: False when the copy could not be put (the
        walk stops there and tries again next pass, as nothing was lost)."""
        try:
            copy = self.broker.store.put([renewed_half_record(half)])[0]
        except (PutRefused, OSError) as exc:
            log.error("putting half message %s back for its check failed: %s", half.msg_id, exc)
            return False
        try:
            request = check_back(half, copy.offset, copy.queue_offset, copy.offset_msg_id)
        except (PutRefused, ProtocolError) as exc:
            log.error("half message %s cannot be shown to its producer: %s", half.msg_id, exc)
            return True
        group = half.properties.get(PROPERTY_PRODUCER_GROUP) or ""
        channel = self.broker.producers.available_channel(group)
        if channel is None:
            log.warning("no producer of group %s online to check half message %s", group, half.msg_id)
            return True
        self.send_check(channel, request)
        self.sent += 1
        return True
