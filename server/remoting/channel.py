"""A client connection as the broker sees it: ``server.broker.client_channel.Channel`` over remoting.

The broker also sends requests to its clients: NOTIFY_CONSUMER_IDS_CHANGED (oneway) when a group
changes, CHECK_TRANSACTION_STATE (oneway) for an undecided half message, CONSUME_MESSAGE_DIRECTLY and
GET_CONSUMER_RUNNING_INFO (answered) on an operator's behalf, PUSH_REPLY_MESSAGE_TO_CLIENT (answered)
with a request's reply. Its requests carry opaques of its own;
the client's answers come back on the same connection with the response flag and are paired here
(``protocol.opaque_matcher``). Processors reach the channel of the request they serve through
``CURRENT_CHANNEL``, set by the connection around each dispatch as ``CURRENT_PEER`` is.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from protocol.codes import RPC_ONEWAY, LanguageCode, SerializeType
from protocol.command import BROKER_VERSION, RemotingCommand
from protocol.opaque_matcher import OpaqueMatcher

if TYPE_CHECKING:
    from server.broker.client_channel import Channel

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class RemotingChannel:
    """The broker's handle on one remoting connection."""

    __slots__ = (
        "_callbacks",
        "_close",
        "_send",
        "_waiting",
        "active",
        "client_address",
        "heartbeat_at",
        "id",
        "on_heart_beat",
        "write_frame",
    )

    def __init__(
        self, client_address: str, send: Callable[[RemotingCommand], bool], close: Callable[[], None]
    ) -> None:
        self.id = next(_ids)
        self.client_address = client_address
        self.active = True
        #: Loop time of the client's last good HEART_BEAT (-inf: none): a live client's connection is
        #: never closed to make room for another (``server.remoting.refusal``).
        self.heartbeat_at = float("-inf")
        #: Called at each good heartbeat (the connection leaves the connection limit's idle order).
        self.on_heart_beat: Callable[[], None] | None = None
        self._send = send
        self._close = close
        #: Writes one encoded frame on the connection (an answer made outside its read: a held pull
        #: woken by another connection's SEND); False when it takes no writes. None: not offered.
        self.write_frame: Callable[[bytes], bool] | None = None
        self._waiting: OpaqueMatcher[asyncio.Future[RemotingCommand]] = OpaqueMatcher()
        self._callbacks: list[Callable[[Channel], None]] = []

    def __repr__(self) -> str:
        return f"RemotingChannel({self.id}, {self.client_address})"

    @staticmethod
    def request(
        code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """A request from the broker (opaque filled in when it is sent)."""
        return RemotingCommand(
            code=code,
            language=LanguageCode.JAVA,
            version=BROKER_VERSION,
            opaque=0,
            flag=0,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=SerializeType.JSON,
        )

    def send_oneway(self, request: RemotingCommand) -> None:
        if not self.active:
            return
        request.flag |= RPC_ONEWAY
        request.opaque = self._waiting.next_opaque()
        self._send(request)

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if not self.active:
            raise ConnectionError(f"the connection to {self.client_address} is closed")
        opaque = self._waiting.next_opaque()
        request.opaque = opaque
        answer: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting.expect(opaque, answer)
        try:
            if not self._send(request):
                raise ConnectionError(f"the connection to {self.client_address} takes no more writes")
            return await asyncio.wait_for(answer, timeout)
        finally:
            self._waiting.forget(opaque)

    def answered(self, response: RemotingCommand) -> bool:
        """A response frame from the client: True if a request of ours waited for it."""
        waiter = self._waiting.match(response.opaque)
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(response)
        return True

    def heart_beat(self) -> None:
        """The client heart-beat (its HEART_BEAT was answered SUCCESS): it is a live client now."""
        self.heartbeat_at = asyncio.get_running_loop().time()  # the connection's clock
        if self.on_heart_beat is not None:
            self.on_heart_beat()

    def close(self) -> None:
        self._close()

    def on_close(self, callback: Callable[[Channel], None]) -> None:
        if not self.active:
            callback(self)
        else:
            self._callbacks.append(callback)

    def closed(self) -> None:
        """The connection is gone: fail the requests waiting on it, then run the close callbacks."""
        if not self.active:
            return
        self.active = False
        for waiter in self._waiting.drain():
            if not waiter.done():
                waiter.set_exception(ConnectionError(f"the connection to {self.client_address} closed"))
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a close callback of the connection from %s failed", self.client_address)


#: The channel of the request being processed (None outside a connection).
CURRENT_CHANNEL: ContextVar[RemotingChannel | None] = ContextVar("rmq_current_channel", default=None)
