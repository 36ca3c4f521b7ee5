"""END_TRANSACTION's decision (``EndTransactionProcessor``), sans-IO over the writable store.

A producer commits or rolls back the half message it names by CommitLog offset. The broker reads the
record there, checks it is the one named (producer group, queue offset, CommitLog offset:
``checkPrepareMessage``), and then, for a commit, writes the real message (``transactions``) and,
for either, the op record that tells the check-back the message is decided. An unknown state (the
producer's UNKNOW, type 0) changes nothing and gets no answer, as does any other type the header
check let through. The 4.9.7 broker keeps no table of decided transactions: a second commit of the
same half message writes the real message again, a rollback after a commit is answered SUCCESS and a
commit after a rollback delivers the message (recorded: ``tests/server/golden/
end_transaction_twice_4.9.7.json``). Here, deliberately, a half message is decided once
(``server.broker.decided_halves``): the same decision again gets the broker's answer to it and
writes nothing (neither the message nor a second op record); a different one, or any one when the
first was read back from the op queue and its kind is not known, is refused SYSTEM_ERROR (as
``checkPrepareMessage``'s refusals) naming what was decided.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from protocol.codes import ResponseCode
from protocol.custom_headers import EndTransactionRequestHeader
from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from protocol.message_flags import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from server.broker.controller import BrokerController
from server.broker.decided_halves import Decision
from server.broker.put_message import PutRefused, StoreUnavailable
from server.broker.transaction_states import HalfEvent, HalfMessageState
from server.broker.transactions import (
    PROPERTY_CHECK_TIMES,
    TransactionSettings,
    check_prepared,
    committed_record,
    op_record,
)

log = logging.getLogger(__name__)

#: ``RemotingCommand.createResponseCommand``'s remark, left on a SUCCESS nobody gave a remark (the
#: rollback's answer).
NOT_SET_REMARK = "not set any response code"


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """The answer's code and remark."""

    code: int
    remark: str | None


def already_decided_remark(decision: Decision) -> str:
    """SYSTEM_ERROR's remark for a second, different decision of a decided half message."""
    return f"The prepared transaction message was already {decision.value}"


def _second_decision(event: HalfEvent, earlier: Decision) -> EndOutcome:
    """The answer to a decision for a half message decided before: nothing is written."""
    if event is HalfEvent.COMMIT and earlier is Decision.COMMIT:
        return EndOutcome(ResponseCode.SUCCESS, None)
    if event is HalfEvent.ROLLBACK and earlier is Decision.ROLLBACK:
        return EndOutcome(ResponseCode.SUCCESS, NOT_SET_REMARK)
    return EndOutcome(ResponseCode.SYSTEM_ERROR, already_decided_remark(earlier))


def look_message(broker: BrokerController, offset: int) -> MessageExt | None:
    """``lookMessageByOffset``: the record at ``offset`` (stored body, not inflated), or None."""
    if offset < 0:
        return None
    buf = broker.store.reader.view_message(offset)
    if buf is None:
        return None
    try:
        return decode_message(buf, decompress=False)
    except ProtocolError:
        return None


def _final_message_refused(refused: PutRefused, max_message_size: int) -> EndOutcome:
    """``sendFinalMessage``'s own remarks for the store's refusals."""
    if isinstance(refused, StoreUnavailable) or refused.code == ResponseCode.SERVICE_NOT_AVAILABLE:
        return EndOutcome(ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now.")
    if refused.code == ResponseCode.MESSAGE_ILLEGAL:
        return EndOutcome(
            ResponseCode.MESSAGE_ILLEGAL,
            "The message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {max_message_size}B, msg properties length limit 32KB.",
        )
    return EndOutcome(refused.code, refused.remark)


def end_transaction(
    broker: BrokerController, header: EndTransactionRequestHeader, settings: TransactionSettings
) -> EndOutcome | None:
    """Commit or roll back the half message ``header`` names; None: no answer (unknown state)."""
    kind = header.commit_or_rollback
    if kind == TRANSACTION_COMMIT_TYPE:
        event = HalfEvent.COMMIT
    elif kind == TRANSACTION_ROLLBACK_TYPE:
        event = HalfEvent.ROLLBACK
    else:
        log.debug("end transaction %s: state %s, nothing done", header.transaction_id, kind)
        return None
    half = look_message(broker, header.commit_log_offset)
    remark = check_prepared(half, header)
    if remark is not None:
        return EndOutcome(ResponseCode.SYSTEM_ERROR, remark)
    assert half is not None
    decided = broker.decided_halves
    earlier = decided.decision(broker.store.reader, half.queue_id, half.queue_offset)
    if earlier is not None:
        return _second_decision(event, earlier)
    HalfMessageState.from_check_times(half.properties.get(PROPERTY_CHECK_TIMES)).apply(
        event, settings.check_max
    )
    store = broker.store
    if event is HalfEvent.COMMIT:
        try:
            store.put([committed_record(half)])
        except PutRefused as refused:
            return _final_message_refused(refused, store.config.max_message_size)
        except OSError as exc:
            log.error("writing the committed message of %s failed: %s", half.msg_id, exc)
            return EndOutcome(ResponseCode.SYSTEM_ERROR, "Create mapped file failed.")
    decided.record(
        half.queue_id, half.queue_offset, Decision.COMMIT if event is HalfEvent.COMMIT else Decision.ROLLBACK
    )
    _write_op(broker, half)
    return EndOutcome(ResponseCode.SUCCESS, None if event is HalfEvent.COMMIT else NOT_SET_REMARK)


def _write_op(broker: BrokerController, half: MessageExt) -> None:
    """``deletePrepareMessage``: the op record; a failure is logged (the check-back then asks the
    producer again, whose answer is the same), never the producer's error."""
    store = broker.store
    now = broker.clock()
    # No topic config for the op topic: the broker never lists it (``topics.UNLISTED_TOPICS``).
    try:
        store.put([op_record(half, store.writer.store_host, store.writer.store_port, now)])
    except (PutRefused, OSError) as exc:
        log.error("writing the op record of half message %s failed: %s", half.msg_id, exc)
