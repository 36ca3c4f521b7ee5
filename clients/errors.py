"""The errors the client raises, one class per thing that can go wrong, each mapped to an exit code.

They mirror the Java client's split so the command line can say exactly what happened:
``MQClientError`` is ``MQClientException`` (decided on this side: no route, no message, a bad id),
``MQBrokerError`` is ``MQBrokerException`` (the server answered with an error code), and the
transport errors (``ConnectError``, ``RequestTimeoutError``, ``ConnectionClosedError``) are
``RemotingException``'s family. The message text follows Java's ``CODE: n  DESC: ...`` so operators
can grep for what they already know.
"""

from __future__ import annotations

from protocol.codes import ResponseCode


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


class MQClientError(ClientError):
    """A client-side verdict with a RocketMQ response code (e.g. 17 no route, 208 no message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {message}")
        self.code = code
        self.error_message = message


class MQBrokerError(ClientError):
    """The server answered a request with a non-success code; ``remark`` is its explanation."""

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark} BROKER: {addr}")
        self.code = code
        self.remark = remark
        self.addr = addr


def no_message_error(what: str = "key") -> MQClientError:
    """Java's ``NO_MESSAGE`` verdict after a query whose filtered result is empty."""
    return MQClientError(ResponseCode.NO_MESSAGE, f"query message by {what} finished, but no message.")


def no_route_error(topic: str) -> MQClientError:
    """Java's verdict when the name server has no route for ``topic``."""
    return MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"The topic[{topic}] not matched route info")
