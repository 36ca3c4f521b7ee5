"""Transactions over gRPC as the Proxy 5.1.4 runs them: its transaction data, EndTransaction, and the
check-back turned into a ``RecoverOrphanedTransactionCommand`` on the producer's Telemetry stream.

A 5.x client names a half message by topic and transaction id (the message id), never by the CommitLog
and queue offsets END_TRANSACTION needs; the Proxy (``TransactionDataManager``) remembers them:

- a transactional SendMessage stores the half message (``put_message``: ``RMQ_SYS_TRANS_HALF_TOPIC``)
  and records (producer group, transaction id) -> (queue offset, CommitLog offset), the producer group
  being the topic (``SendMessageActivity``: "use topicName as producerGroup");
- the broker's check-back (``transaction_check``) sends CHECK_TRANSACTION_STATE to a channel of the
  group; a gRPC producer's channel (``channels.TelemetryChannel``) records the copy the broker put
  back (the header's offsets) and writes the message to the client's Telemetry stream
  (``GrpcClientChannel.processCheckTransaction``); a full stream drops it, and its data, as
  ``onSendCheckTransactionStateFailed`` does: the next check asks again;
- EndTransaction (``EndTransactionActivity``, ``TransactionProcessor``): a valid topic (ILLEGAL_TOPIC
  ...), a transaction id (INVALID_TRANSACTION_ID "transaction id cannot be empty"), then the newest
  unexpired entry of the pair is taken out (``pollNoExpireTransactionData``); none is
  INTERNAL_SERVER_ERROR "cannot found transaction data" (TRANSACTION_DATA_NOT_FOUND has no status
  of its own). The entry becomes END_TRANSACTION's header (COMMIT 8, ROLLBACK 12, else 0;
  ``fromTransactionCheck`` when the source is SOURCE_SERVER_CHECK) and goes to the broker core's
  ``end_transaction``. The Proxy sends it oneway, so the broker's refusal (a wrong offset, a failed
  write) never reaches the client: it is logged and the answer is OK.

Entries live ``transactionDataExpireMillis`` (30 s) and at most ``transactionDataMaxNum`` (15) per
pair, oldest dropped first; the table as a whole is bounded too (``MAX_ENTRIES``), its oldest pair
going first, since a Proxy's cleaner thread is replaced here by expiry on use and that bound.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from protocol.codes import ResponseCode
from protocol.custom_headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from protocol.message import MessageExt
from protocol.message_flags import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from server.broker.controller import BrokerController
from server.broker.end_transaction import end_transaction
from server.broker.transactions import PROPERTY_PRODUCER_GROUP
from server.grpc.receiving import build_message
from server.grpc.v2 import Code, definition, service
from server.grpc.validation import GrpcStatusError, is_blank, validate_topic

log = logging.getLogger(__name__)

#: ``ProxyConfig.transactionDataExpireMillis`` and ``transactionDataMaxNum``.
EXPIRE_MS = 30_000
MAX_PER_TRANSACTION = 15
#: (group, transaction id) pairs kept at once.
MAX_ENTRIES = 100_000

_RESOLUTIONS = {
    definition.TransactionResolution.COMMIT: TRANSACTION_COMMIT_TYPE,
    definition.TransactionResolution.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
}


@dataclass(frozen=True, slots=True)
class TransactionData:
    """``TransactionData``: where the half message (or its check-back copy) is, until when."""

    tran_state_table_offset: int
    commit_log_offset: int
    expire_ms: int


class GrpcTransactions:
    """The Proxy's transaction data and EndTransaction over one broker."""

    def __init__(
        self,
        broker: BrokerController,
        *,
        clock: Callable[[], int],
        expire_ms: int = EXPIRE_MS,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.broker = broker
        self._clock = clock
        self.expire_ms = expire_ms
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], list[TransactionData]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def add(self, group: str, transaction_id: str, queue_offset: int, commit_log_offset: int) -> None:
        """``addTransactionData``: after a half message is stored, or a check-back is sent."""
        key = (group, transaction_id)
        entries = self._data.setdefault(key, [])
        self._data.move_to_end(key)
        entries.append(TransactionData(queue_offset, commit_log_offset, self._clock() + self.expire_ms))
        if len(entries) > MAX_PER_TRANSACTION:
            del entries[0]
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def poll(self, group: str, transaction_id: str) -> TransactionData | None:
        """``pollNoExpireTransactionData``: the newest unexpired entry, taken out."""
        key = (group, transaction_id)
        entries = self._data.get(key)
        if entries is None:
            return None
        now = self._clock()
        found = None
        while entries:
            data = entries.pop()
            if data.expire_ms >= now:
                found = data
                break
        if not entries:
            del self._data[key]
        return found

    def remove(self, group: str, transaction_id: str, data: TransactionData) -> None:
        entries = self._data.get((group, transaction_id))
        if entries is not None and data in entries:
            entries.remove(data)
            if not entries:
                del self._data[(group, transaction_id)]

    # -- the check-back --------------------------------------------------------------------------

    def recover_command(
        self, header: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> tuple[service.TelemetryCommand, Callable[[], None]]:
        """The Telemetry command for one CHECK_TRANSACTION_STATE, and how to forget its data when
        the command cannot be written (``onSendCheckTransactionStateFailed``)."""
        group = message.properties.get(PROPERTY_PRODUCER_GROUP) or ""
        transaction_id = header.transaction_id or ""
        self.add(group, transaction_id, header.tran_state_table_offset, header.commit_log_offset)
        added = self._data[(group, transaction_id)][-1]
        command = service.TelemetryCommand(
            recover_orphaned_transaction_command=service.RecoverOrphanedTransactionCommand(
                transaction_id=transaction_id,
                message=build_message(message, attempt=message.reconsume_times + 1),
            )
        )
        return command, lambda: self.remove(group, transaction_id, added)

    # -- EndTransaction --------------------------------------------------------------------------

    def end(self, request: service.EndTransactionRequest) -> service.EndTransactionResponse:
        topic = request.topic.name
        validate_topic(topic)
        if is_blank(request.transaction_id):
            raise GrpcStatusError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        data = self.poll(topic, request.transaction_id)
        if data is None:
            raise GrpcStatusError(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=data.tran_state_table_offset,
            commit_log_offset=data.commit_log_offset,
            commit_or_rollback=_RESOLUTIONS.get(request.resolution, TRANSACTION_NOT_TYPE),
            from_transaction_check=request.source == definition.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        outcome = end_transaction(self.broker, header, self.broker.settings.transactions)
        if outcome is not None and outcome.code != ResponseCode.SUCCESS:
            log.warning(
                "end transaction %s of topic %s refused by the broker: %s",
                request.transaction_id,
                topic,
                outcome.remark,
            )
        return service.EndTransactionResponse(status=definition.Status(code=Code.OK, message="OK"))
