"""``ReceiveLeases`` over the broker's writable store and consume side.

The lease table is sans-IO; this gives it the store to read (the consume queues, then the records:
each checked as ``decode_message`` checks it but kept as its bytes, ``StoredRecord``, which the gRPC
receive writes into its answer straight from the bytes; decoded whole, the body inflated, only for
a dead letter or when the answer takes the Python path), the committed offsets of
``BrokerController`` (the same ``consumerOffset.json`` as the remoting consumers'), and the way to
write a dead letter: ``send_back``'s record into ``%DLQ%group`` (one queue, created when missing),
as the broker's send-back stores it.
"""

from __future__ import annotations

import struct

from protocol.message import MessageExt, check_record, decode_message
from protocol.record_layout import (
    BODY_LENGTH_AT,
    PREPARED_TRANSACTION_OFFSET_WIDTH,
    QUEUE_ID_AT,
    RECONSUME_TIMES_WIDTH,
    host_kind,
)
from server.broker.controller import BrokerController
from server.broker.receive_leases import ReceiveLeases, Record
from server.broker.send_back import DLQ_QUEUE_NUMS, destination, send_back_record
from store.consumequeue.get_message import RecordFilter

#: QUEUEID, FLAG (skipped), QUEUEOFFSET, PHYSICALOFFSET: the head fields the lease table reads.
_QUEUE_FIELDS = struct.Struct(">i4xqq")
_RECONSUME_TIMES = struct.Struct(">i")
#: RECONSUMETIMES' offset by host kind: just before PREPAREDTRANSACTIONOFFSET, which ends at BODYLEN.
_RECONSUME_TIMES_AT = tuple(
    at - PREPARED_TRANSACTION_OFFSET_WIDTH - RECONSUME_TIMES_WIDTH for at in BODY_LENGTH_AT
)


class StoredRecord:
    """One record read for a receive: its bytes and the fields the lease table reads (``Record``).

    Building a ``MessageExt`` per message (hosts, texts, a properties dict, an object of twenty
    fields) was most of a receive's own time, and the answer then read the record again from it;
    ``message_bytes.ReceivedMessages.record`` writes the answer from these bytes instead. The record
    is checked here, when read, as ``decode_message`` would check it, so a bad record fails the
    receive where it always did."""

    __slots__ = ("commit_log_offset", "queue_id", "queue_offset", "raw", "reconsume_times")

    def __init__(self, raw: bytes) -> None:
        sys_flag = check_record(raw)
        self.raw = raw
        self.queue_id, self.queue_offset, self.commit_log_offset = _QUEUE_FIELDS.unpack_from(raw, QUEUE_ID_AT)
        self.reconsume_times = _RECONSUME_TIMES.unpack_from(raw, _RECONSUME_TIMES_AT[host_kind(sys_flag)])[0]

    def decode(self) -> MessageExt:
        """The whole message, its body inflated as a client expects it."""
        return decode_message(self.raw)


class StoreReader:
    """The ``Reader`` of ``ReceiveLeases`` over a writable store's consume queues."""

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker

    def read(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        n: int,
        tags_codes: frozenset[int] | None,
        record_filter: RecordFilter | None = None,
    ) -> tuple[list[StoredRecord], int]:
        reader = self._broker.store.reader
        result = reader.get_message(topic, queue_id, offset, n, tags_codes, record_filter)
        return [StoredRecord(bytes(buf)) for buf in result.buffers], result.next_begin_offset

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        reader = self._broker.store.reader
        return reader.min_offset(topic, queue_id), reader.max_offset(topic, queue_id)


def store_dead_letter(broker: BrokerController, group: str, message: MessageExt) -> None:
    """The message's dead letter in ``%DLQ%group`` (a negative level always means the DLQ)."""
    store = broker.store
    dest = destination(
        group, reconsume_times=message.reconsume_times, delay_level=-1, max_times=0, retry_queue_nums=1
    )
    broker.create_topic_in_send_back(dest.topic, DLQ_QUEUE_NUMS)
    # A record decoded with its body inflated keeps the stored bytes (``stored_body``): the copy
    # carries the body as stored, as the broker's does.
    record = send_back_record(
        message, dest, max_delay_level=store.max_delay_level, max_message_size=store.config.max_message_size
    )
    store.put([record])


def _message(record: Record) -> MessageExt:
    if isinstance(record, StoredRecord):
        return record.decode()
    assert isinstance(record, MessageExt), record
    return record


def store_leases(broker: BrokerController, broker_name: str) -> ReceiveLeases:
    """The lease table of this broker's SimpleConsumers."""
    return ReceiveLeases(
        StoreReader(broker),
        broker_name=broker_name,
        commit=broker.commit_offset,
        committed=broker.query_offset,
        dead_letter=lambda group, record: store_dead_letter(broker, group, _message(record)),
        # A gRPC consumer is a member of its group while it heartbeats (``server.grpc.channels``).
        alive=lambda group, client_id: broker.consumers.find_member(group, client_id) is not None,
    )
