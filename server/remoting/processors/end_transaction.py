"""END_TRANSACTION (37): a producer's commit or rollback of a half message (``serve --writable``).

The decision is ``server.broker.end_transaction``'s; this decodes the header, runs its
``checkFields`` (the transaction type must be 0, 8 or 12) with the broker's answers (thrown from
the header's decoding, so in JSON whatever the request's serialization: ``exception_answer``), and
answers.
The Java client sends END_TRANSACTION oneway (the connection then drops the answer); a client that
asks for one gets the broker's. An unknown state (0) is never answered.
"""

from __future__ import annotations

from protocol.command import RemotingCommand
from protocol.custom_headers import EndTransactionRequestHeader
from protocol.message_flags import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from server.broker.controller import BrokerController
from server.broker.end_transaction import end_transaction
from server.remoting.reply import exception_answer

_HEADER_CLASS = "org.apache.rocketmq.common.protocol.header.EndTransactionRequestHeader"

#: ``checkFields``'s two failures as the 4.9.7 broker answers them (``exceptionSimpleDesc``: the
#: exception and its top frame).
TYPE_MISSING_REMARK = (
    'java.lang.NullPointerException: Cannot invoke "java.lang.Integer.intValue()" because '
    f'"this.commitOrRollback" is null, {_HEADER_CLASS}.checkFields(EndTransactionRequestHeader.java:48)'
)
TYPE_WRONG_REMARK = (
    "org.apache.rocketmq.remoting.exception.RemotingCommandException: commitOrRollback field wrong, "
    f"{_HEADER_CLASS}.checkFields(EndTransactionRequestHeader.java:60)"
)

_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)


class EndTransactionProcessor:
    """END_TRANSACTION over the broker's store and settings."""

    __slots__ = ("_broker",)

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker

    def end_transaction(self, request: RemotingCommand) -> RemotingCommand | None:
        header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        if header.commit_or_rollback is None:
            return exception_answer(request, TYPE_MISSING_REMARK)
        if header.commit_or_rollback not in _TYPES:
            return exception_answer(request, TYPE_WRONG_REMARK)
        outcome = end_transaction(self._broker, header, self._broker.settings.transactions)
        if outcome is None:
            return None
        return request.make_response(outcome.code, remark=outcome.remark, ext_fields={})
