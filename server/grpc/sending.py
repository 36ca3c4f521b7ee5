"""SendMessage's broker side: the chosen queue's SENDs through the broker's checks into the store.

Each v2 message, once converted (``conversion``), is the SEND a Proxy would make of it, and goes the
remoting SEND's way: ``send_check`` (topic checks, the queue id against the topic's config),
``header_to_store`` (the MULTI_TAG bit), ``put_message.single_record`` (``CLUSTER``, delay levels to
``SCHEDULE_TOPIC_XXXX``) and one ``WritableStore.put`` for the request's records (consecutive queue
offsets, one store time), indexed and queryable when the call is answered. A refusal of the broker
is answered as the Proxy answers the broker's remoting codes (``ResponseBuilder.buildCode``: SYSTEM_BUSY
is TOO_MANY_REQUESTS, TOPIC_NOT_EXIST is TOPIC_NOT_FOUND, everything else INTERNAL_SERVER_ERROR, with
the broker's remark).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.codes import ResponseCode
from server.broker.controller import BrokerController
from server.broker.put_message import (
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    PutContext,
    PutRefused,
    StoreUnavailable,
    single_record,
)
from server.broker.send_check import check_send, header_to_store
from server.broker.timer_messages import TIMER_TOPIC
from server.broker.transactions import reject_remark, system_topic
from server.broker.writable_store import WritableStore
from server.burst_log import BurstLog
from server.grpc.conversion import BrokerMessage
from server.grpc.v2 import Code
from server.grpc.validation import GrpcStatusError
from server.store_api import AppendResult

log = logging.getLogger(__name__)

#: ``ResponseBuilder.RESPONSE_CODE_MAPPING`` and ``isTopicNotExistError``: the remoting codes the
#: Proxy answers with a status of their own; every other refusal is INTERNAL_SERVER_ERROR.
_REMOTING_TO_STATUS = {
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
}


def refusal_status(refused: PutRefused) -> GrpcStatusError:
    """The Proxy's status for a broker refusal (code and remark)."""
    return GrpcStatusError(_REMOTING_TO_STATUS.get(refused.code, Code.INTERNAL_SERVER_ERROR), refused.remark)


@dataclass(frozen=True, slots=True)
class Stored:
    """One message's place: its queue, queue offset and CommitLog offset (which names a half
    message to EndTransaction)."""

    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1


class GrpcWriter:
    """The writable store as SendMessage uses it; ``on_scheduled`` arms the delivery timer."""

    def __init__(
        self,
        store: WritableStore,
        *,
        cluster: str,
        on_scheduled: Callable[[], None] | None = None,
        broker: BrokerController | None = None,
    ) -> None:
        self.store = store
        #: The consume side the remoting port shares (groups, committed offsets): with it the gRPC
        #: port serves SimpleConsumers (``receiving``).
        self.broker = broker
        self.cluster = cluster
        self.on_scheduled = on_scheduled
        self._write_errors = BurstLog(log)

    @property
    def _reject_transactions(self) -> bool:
        """``rejectTransactionMessage``: half messages refused (NO_PERMISSION, answered by the Proxy
        as INTERNAL_SERVER_ERROR with the broker's remark)."""
        return self.broker is not None and self.broker.settings.transactions.reject_transaction_message

    @property
    def max_message_size(self) -> int:
        return self.store.config.max_message_size

    @property
    def delay_levels(self) -> dict[int, int]:
        return self.store.delay_levels

    def send(self, messages: Sequence[BrokerMessage], queue_id: int, born: tuple[str, int]) -> list[Stored]:
        """Store ``messages`` in queue ``queue_id``, or raise ``GrpcStatusError``."""
        ctx = PutContext(
            self.cluster,
            self.max_message_size,
            born[0],
            born[1],
            self.store.max_delay_level,
            timer=self.store.timer_settings,
            now_ms=self.store.now_ms(),
        )
        records = []
        try:
            for message in messages:
                header = message.send_header(queue_id)
                config = check_send(self.store, header, born)
                header = header_to_store(header, config)
                if message.message_type == "TRANSACTION" and self._reject_transactions:
                    raise PutRefused(ResponseCode.NO_PERMISSION, reject_remark(self.store.writer.store_host))
                records.append(single_record(header, message.body, ctx))
            for system in {r.topic for r in records} & {TRANS_HALF_TOPIC, TIMER_TOPIC}:
                # as a remoting SEND of a half or timer message: the system topic with one queue,
                # not the writer's default four
                system_topic(self.store, system, int(time.time() * 1000))
            appended: list[AppendResult] = list(self.store.put(records))
        except PutRefused as refused:
            if isinstance(refused, StoreUnavailable):
                self._write_errors.event("writing the CommitLog failed: %s", refused.__cause__ or refused)
            raise refusal_status(refused) from None
        except OSError as exc:
            self._write_errors.event("writing the CommitLog failed: %s", exc)
            raise GrpcStatusError(
                Code.INTERNAL_SERVER_ERROR, "create mapped file failed, server is busy or broken."
            ) from None
        if self.on_scheduled is not None and any(r.topic in (SCHEDULE_TOPIC, TIMER_TOPIC) for r in records):
            self.on_scheduled()
        return [Stored(queue_id, a.queue_offset, a.offset) for a in appended]
