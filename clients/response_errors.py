"""One exception class per RocketMQ response code, so a caller catches exactly what it can handle.

Every code of RocketMQ 4.9.7's ``ResponseCode`` (``protocol.codes``) except SUCCESS has a class
below, named after Java's constant (``SYSTEM_BUSY`` -> ``SystemBusyError``; ``SYSTEM_ERROR`` is
``MQSystemError`` so as not to hide Python's builtin ``SystemError``). The docstrings say when a
4.9.7 broker or name server answers the code.

A code can come from either side: the server answers it (``MQBrokerError``, with the remark and
the broker's address) or the client decides it (``MQClientError``: 17 when the name server has no
route, 208 when a query's filtered result is empty). The class of a code covers both, so
``except TopicNotExistError`` catches a broker's TOPIC_NOT_EXIST and the client's "no route"
verdict alike, while ``except MQBrokerError`` / ``except MQClientError`` (and the command line's
exit codes, which look at those two) keep meaning what they always did. To do both, each class
has two concrete forms made by ``code_class``: ``broker_error`` raises the form that is also an
``MQBrokerError``, ``client_error`` the one that is also an ``MQClientError`` (build errors with
these two, not by calling a class). A code with no class here (one a later RocketMQ added) gets
the plain base class.

    try:
        await admin.query_by_key("TopicA", "order-42")
    except SystemBusyError:
        ...  # back off and retry
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from clients.errors import MQBrokerError, MQClientError, ResponseCodeError
from protocol.codes import ResponseCode
from protocol.command import RemotingCommand

#: The class of each response code (the one to catch), by code.
CLASS_BY_CODE: dict[int, type[ResponseCodeError]] = {}
_BROKER_FORM: dict[int, type[MQBrokerError]] = {}
_CLIENT_FORM: dict[int, type[MQClientError]] = {}

_Class = TypeVar("_Class", bound=type[ResponseCodeError])


def code_class(code: ResponseCode) -> Callable[[_Class], _Class]:
    """Register the decorated class as the class of ``code`` and make its broker and client forms.

    The forms carry the class's own name, so a traceback names ``SystemBusyError``; they exist only
    so that one raised error is both ``SystemBusyError`` and ``MQBrokerError``.
    """

    def register(cls: _Class) -> _Class:
        if code in CLASS_BY_CODE:
            raise ValueError(f"two classes for response code {code!r}")
        cls.code = code
        CLASS_BY_CODE[code] = cls
        namespace = {"__doc__": cls.__doc__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        # A form is not importable by its name (that is the class of its code), so it pickles as the
        # call that makes it: unpickling imports this module, which makes the forms again.
        _BROKER_FORM[code] = type(
            cls.__name__, (cls, MQBrokerError), {**namespace, "__reduce__": _reduce_broker_form}
        )
        _CLIENT_FORM[code] = type(
            cls.__name__, (cls, MQClientError), {**namespace, "__reduce__": _reduce_client_form}
        )
        return cls

    return register


def _reduce_broker_form(self: MQBrokerError) -> tuple[Any, tuple[int, str | None, str]]:
    return broker_error, (self.code, self.remark, self.addr)


def _reduce_client_form(self: MQClientError) -> tuple[Any, tuple[int, str]]:
    return client_error, (self.code, self.error_message)


def broker_error(code: int, remark: str | None, addr: str) -> MQBrokerError:
    """The server at ``addr`` answered ``code`` (not SUCCESS): the error of that code's class."""
    return _BROKER_FORM.get(code, MQBrokerError)(code, remark, addr)


def client_error(code: int, message: str) -> MQClientError:
    """The client's own verdict ``code``: the error of that code's class."""
    return _CLIENT_FORM.get(code, MQClientError)(code, message)


def expect_success(response: RemotingCommand, addr: str) -> RemotingCommand:
    """``response`` if it is SUCCESS; otherwise raise ``broker_error`` for its code and remark."""
    if response.code != ResponseCode.SUCCESS:
        raise broker_error(response.code, response.remark, addr)
    return response


def no_message_error(what: str = "key") -> MQClientError:
    """Java's ``NO_MESSAGE`` verdict after a query whose filtered result is empty."""
    return client_error(ResponseCode.NO_MESSAGE, f"query message by {what} finished, but no message.")


def no_route_error(topic: str) -> MQClientError:
    """Java's verdict when the name server has no route for ``topic``."""
    return client_error(ResponseCode.TOPIC_NOT_EXIST, f"The topic[{topic}] not matched route info")


# -- RemotingSysResponseCode ----------------------------------------------------------------------


@code_class(ResponseCode.SYSTEM_ERROR)
class MQSystemError(ResponseCodeError):
    """1: the request failed on the server: a missing or malformed header field, an exception in
    the store, a view of an offset that holds no message ("can not find message by the offset").
    The client also decides it: a broker or queue the route does not have."""


@code_class(ResponseCode.SYSTEM_BUSY)
class SystemBusyError(ResponseCodeError):
    """2: the server is overloaded; try again later. A broker's send queue shed by fast failure
    (page cache busy, waited too long) or a processor refusing work; here, a full query pool or a
    connection past the limit."""


@code_class(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
class RequestCodeNotSupportedError(ResponseCodeError):
    """3: the server has no processor for the request code."""


@code_class(ResponseCode.TRANSACTION_FAILED)
class TransactionFailedError(ResponseCodeError):
    """4: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


# -- ResponseCode: sending ------------------------------------------------------------------------


@code_class(ResponseCode.FLUSH_DISK_TIMEOUT)
class FlushDiskTimeoutError(ResponseCodeError):
    """10: a SYNC_FLUSH broker stored the message but its flush to disk timed out."""


@code_class(ResponseCode.SLAVE_NOT_AVAILABLE)
class SlaveNotAvailableError(ResponseCodeError):
    """11: a SYNC_MASTER broker stored the message but no slave is there to copy it."""


@code_class(ResponseCode.FLUSH_SLAVE_TIMEOUT)
class FlushSlaveTimeoutError(ResponseCodeError):
    """12: a SYNC_MASTER broker stored the message but the slave did not confirm it in time."""


@code_class(ResponseCode.MESSAGE_ILLEGAL)
class MessageIllegalError(ResponseCodeError):
    """13: the message is refused as malformed: too large, a topic name too long or invalid,
    properties too long."""


@code_class(ResponseCode.SERVICE_NOT_AVAILABLE)
class ServiceNotAvailableError(ResponseCodeError):
    """14: the broker cannot store now: its disk is full, it is a slave, or its store is shut down."""


@code_class(ResponseCode.VERSION_NOT_SUPPORTED)
class VersionNotSupportedError(ResponseCodeError):
    """15: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.NO_PERMISSION)
class NoPermissionError(ResponseCodeError):
    """16: refused: ACL denied the request (bad signature, unknown key, no right to the topic or
    group), or the broker or topic does not allow it (not writable or readable, a system topic)."""


@code_class(ResponseCode.TOPIC_NOT_EXIST)
class TopicNotExistError(ResponseCodeError):
    """17: the name server has no route for the topic (the client's "not matched route info"), or
    the broker does not know it (a send without auto-creation, a pull, an offset request)."""


@code_class(ResponseCode.TOPIC_EXIST_ALREADY)
class TopicExistAlreadyError(ResponseCodeError):
    """18: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


# -- ResponseCode: pulling and querying -----------------------------------------------------------


@code_class(ResponseCode.PULL_NOT_FOUND)
class PullNotFoundError(ResponseCodeError):
    """19: no new message at the pulled offset (``QueryAdmin.pull`` reports it as NO_NEW_MSG)."""


@code_class(ResponseCode.PULL_RETRY_IMMEDIATELY)
class PullRetryImmediatelyError(ResponseCodeError):
    """20: the pulled range held no message the filter kept (``pull``: NO_MATCHED_MSG)."""


@code_class(ResponseCode.PULL_OFFSET_MOVED)
class PullOffsetMovedError(ResponseCodeError):
    """21: the pulled offset is outside the queue (``pull``: OFFSET_ILLEGAL)."""


@code_class(ResponseCode.QUERY_NOT_FOUND)
class QueryNotFoundError(ResponseCodeError):
    """22: a key query found nothing in the index, or a group has no committed offset."""


@code_class(ResponseCode.SUBSCRIPTION_PARSE_FAILED)
class SubscriptionParseFailedError(ResponseCodeError):
    """23: the pull's or heartbeat's subscription expression does not parse."""


@code_class(ResponseCode.SUBSCRIPTION_NOT_EXIST)
class SubscriptionNotExistError(ResponseCodeError):
    """24: the broker holds no subscription of the pulling group for the topic."""


@code_class(ResponseCode.SUBSCRIPTION_NOT_LATEST)
class SubscriptionNotLatestError(ResponseCodeError):
    """25: the pull names an older subscription version than the broker holds."""


@code_class(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
class SubscriptionGroupNotExistError(ResponseCodeError):
    """26: the consumer group does not exist and the broker does not create groups."""


@code_class(ResponseCode.FILTER_DATA_NOT_EXIST)
class FilterDataNotExistError(ResponseCodeError):
    """27: the broker has no filter data (SQL92 or class filter) for the pulling group."""


@code_class(ResponseCode.FILTER_DATA_NOT_LATEST)
class FilterDataNotLatestError(ResponseCodeError):
    """28: the pull names older filter data than the broker holds."""


# -- ResponseCode: transactions, units, consumers, ACL admin, flow control -------------------------


@code_class(ResponseCode.TRANSACTION_SHOULD_COMMIT)
class TransactionShouldCommitError(ResponseCodeError):
    """200: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.TRANSACTION_SHOULD_ROLLBACK)
class TransactionShouldRollbackError(ResponseCodeError):
    """201: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.TRANSACTION_STATE_UNKNOW)
class TransactionStateUnknownError(ResponseCodeError):
    """202 (Java's ``TRANSACTION_STATE_UNKNOW``): no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.TRANSACTION_STATE_GROUP_WRONG)
class TransactionStateGroupWrongError(ResponseCodeError):
    """203: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.NO_BUYER_ID)
class NoBuyerIdError(ResponseCodeError):
    """204: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.NOT_IN_CURRENT_UNIT)
class NotInCurrentUnitError(ResponseCodeError):
    """205: defined by RocketMQ; no 4.9.7 broker or name server sends it."""


@code_class(ResponseCode.CONSUMER_NOT_ONLINE)
class ConsumerNotOnlineError(ResponseCodeError):
    """206: an admin request about a consumer client that is not connected to the broker."""


@code_class(ResponseCode.CONSUME_MSG_TIMEOUT)
class ConsumeMsgTimeoutError(ResponseCodeError):
    """207: the consumer did not answer a direct-consume request (``consumeMessageDirectly``) in time."""


@code_class(ResponseCode.NO_MESSAGE)
class NoMessageError(ResponseCodeError):
    """208: the client's verdict after a query whose filtered result is empty (no server sends it)."""


@code_class(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
class UpdateAndCreateAclConfigFailedError(ResponseCodeError):
    """209: the broker could not create or update an ACL account."""


@code_class(ResponseCode.DELETE_ACL_CONFIG_FAILED)
class DeleteAclConfigFailedError(ResponseCodeError):
    """210: the broker could not delete an ACL account."""


@code_class(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)
class UpdateGlobalWhiteAddrsConfigFailedError(ResponseCodeError):
    """211: the broker could not update the ACL's global white list."""


@code_class(ResponseCode.FLOW_CONTROL)
class FlowControlError(ResponseCodeError):
    """215: defined by RocketMQ 4.9.7 (later releases send it when throttling); 4.9.7 does not."""
