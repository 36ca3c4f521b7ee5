"""The errors the client raises, one class per thing that can go wrong, each mapped to an exit code.

They mirror the Java client's split so the command line can say exactly what happened:
``MQClientError`` is ``MQClientException`` (decided on this side: no route, no message, a bad id),
``MQBrokerError`` is ``MQBrokerException`` (the server answered with an error code), and the
transport errors (``ConnectError``, ``RequestTimeoutError``, ``ConnectionClosedError``) are
``RemotingException``'s family. The message text follows Java's ``CODE: n  DESC: ...`` so operators
can grep for what they already know. Both code-carrying families are raised as the class of their
response code (``clients.response_errors``: ``SystemBusyError``, ``NoPermissionError``, ...).
"""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Base of every error raised by the ``clients`` package."""


class TransportError(ClientError):
    """The request could not be delivered or answered (network level)."""

    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"{reason} <{addr}>")
        self.addr = addr
        self.reason = reason


class ConnectError(TransportError):
    """No connection could be made to ``addr`` (refused, unresolvable, connect timeout)."""


class RequestTimeoutError(TransportError):
    """No response arrived within the request's timeout."""


class ConnectionClosedError(TransportError):
    """The connection closed (or sent an undecodable frame) while the request was in flight."""


class UsageError(ClientError):
    """The request cannot be made as asked (no name server given, half an ACL key pair, no id)."""


class InvalidMessageIdError(UsageError):
    """A message id that is not a well-formed offset message id (wrong length, not hex)."""

    def __init__(self, msg_id: str, reason: str) -> None:
        super().__init__(f"invalid message id {msg_id!r}: {reason}")
        self.msg_id = msg_id
        self.reason = reason


class RouteDecodeError(ClientError):
    """A name server's route body is not valid TopicRouteData JSON."""


class ResponseCodeError(ClientError):
    """An error that carries a RocketMQ response code: the base of ``MQClientError``, ``MQBrokerError``
    and of the one class per code in ``clients.response_errors`` (catch ``SystemBusyError``, not
    ``MQBrokerError`` plus a look at ``code``)."""

    code: int


class MQClientError(ResponseCodeError):
    """A client-side verdict with a RocketMQ response code (e.g. 17 no route, 208 no message).

    Build it with ``clients.response_errors.client_error`` to get the class of its code.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {message}")
        self.code = code
        self.error_message = message

    def __reduce__(self) -> tuple[Any, tuple[int, str]]:
        """Pickled as its arguments (the class of a code pickles as ``client_error``: see there)."""
        return type(self), (self.code, self.error_message)


class MQBrokerError(ResponseCodeError):
    """The server answered a request with a non-success code; ``remark`` is its explanation.

    Build it with ``clients.response_errors.broker_error`` to get the class of its code.
    """

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark} BROKER: {addr}")
        self.code = code
        self.remark = remark
        self.addr = addr

    def __reduce__(self) -> tuple[Any, tuple[int, str | None, str]]:
        """Pickled as its arguments (the class of a code pickles as ``broker_error``: see there)."""
        return type(self), (self.code, self.remark, self.addr)
