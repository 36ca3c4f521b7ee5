"""``ReceiveLeases`` over the broker's writable store and consume side.

The lease table is sans-IO; this gives it the store to read (the consume queues, then the records,
decoded with their bodies inflated as a client expects them), the committed offsets of
``BrokerController`` (the same ``consumerOffset.json`` as the remoting consumers'), and the way to
write a dead letter: ``send_back``'s record into ``%DLQ%group`` (one queue, created when missing),
as the broker's send-back stores it.
"""

from __future__ import annotations

from protocol.message import MessageExt, decode_message
from server.broker.controller import BrokerController
from server.broker.receive_leases import ReceiveLeases
from server.broker.send_back import DLQ_QUEUE_NUMS, destination, send_back_record
from store.consumequeue.get_message import RecordFilter


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
    ) -> tuple[list[MessageExt], int]:
        reader = self._broker.store.reader
        result = reader.get_message(topic, queue_id, offset, n, tags_codes, record_filter)
        messages = [decode_message(bytes(buf)) for buf in result.buffers]
        return messages, result.next_begin_offset

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


def store_leases(broker: BrokerController, broker_name: str) -> ReceiveLeases:
    """The lease table of this broker's SimpleConsumers."""
    return ReceiveLeases(
        StoreReader(broker),
        broker_name=broker_name,
        commit=broker.commit_offset,
        committed=broker.query_offset,
        dead_letter=lambda group, message: store_dead_letter(broker, group, message),
        # A gRPC consumer is a member of its group while it heartbeats (``server.grpc.channels``).
        alive=lambda group, client_id: broker.consumers.find_member(group, client_id) is not None,
    )
