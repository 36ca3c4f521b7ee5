"""One held PULL_MESSAGE's wait, and its answer made by the SEND that wakes it.

A pull held by ``PullMessageProcessor._hold`` waits for its queue to grow, its recheck period or its
suspend timeout. It used to wait on the queue's ``asyncio.Event``: a SEND's settle set it, the held
pull's task resumed at the loop's next turn and ran its pass through the Python pull path, and its
answer was written one turn later still, from the task's done callback. Here the wait is a future,
and the pull hands ``StoreChanges.on_queue`` itself as the queue's wake-up: the connection that
stored the message runs it right after writing the SEND's answers (``StoreChanges.run_woken``), and
the wake-up makes the pull's pass there and then - through the compiled request path when it finds
the message (the pass ordinary pulls take, ``RequestPath.answer_woken``), else the Python pass - and
writes the answer on the pull's own connection (``RemotingChannel.write_frame``). The held task
then only ends (``Answered``: nothing more to write).

What stays the task's, as before: the suspend timeout and the recheck period (a timer resolves the
future with None, and the task looks at the queue itself), the connection's end (the task is
cancelled; ``release`` takes the wake-up back from ``StoreChanges``), the peer's EOF or the server's
stop (the wake-up hands the pass back to the task, which answers whatever it finds). A wake-up that
finds nothing new (the queue grew past an entry not readable yet, or a pass still NOT_FOUND) stays
registered and keeps waiting, as the broker's hold does. A pass that raises hands its error to the
task, which the dispatcher answers as any processor failure. Without a connection to write on (a
caller with no ``CURRENT_CHANNEL``) the wake-up only resolves the wait, and the task makes the pass.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from protocol.command import RemotingCommand
from protocol.custom_headers import PullMessageRequestHeader
from server.remoting.channel import RemotingChannel
from server.remoting.reply import Answered
from server.store_changes import StoreChanges


class _Holds(Protocol):
    def ended(self, peer: str) -> bool: ...


class WokenPasses(Protocol):
    """What a wake-up asks of the pull processor (``PullMessageProcessor``)."""

    @property
    def changes(self) -> StoreChanges: ...

    @property
    def holds(self) -> _Holds: ...

    def answer_woken(self, waiting: WokenPull) -> Answered | None: ...


class WokenPull:
    """A held pull's wait (``wait``) and its wake-up (called by ``StoreChanges.run_woken``)."""

    __slots__ = (
        "_future",
        "_processor",
        "_registered",
        "_timer",
        "channel",
        "frame",
        "header",
        "peer",
        "request",
    )

    def __init__(
        self,
        processor: WokenPasses,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        peer: str,
        channel: RemotingChannel | None,
    ) -> None:
        self._processor = processor
        self.request = request
        self.header = header
        self.peer = peer
        #: The pull's connection, written on by the wake-up; None: the task answers.
        self.channel = channel if channel is not None and channel.write_frame is not None else None
        #: The woken pass's request as one JSON frame for the compiled path, made at its first wake.
        self.frame: bytes | None = None
        self._future: asyncio.Future[Answered | None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._registered = False

    def wait(self, timeout: float) -> asyncio.Future[Answered | None]:
        """The next wait: resolved with ``Answered`` (the wake-up answered), or None after
        ``timeout`` seconds or when the task must look itself."""
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        self._timer = loop.call_later(timeout, self._time_up, future)
        if not self._registered:
            self._registered = True
            header = self.header
            self._processor.changes.on_queue(header.topic, header.queue_id, self)
        return future

    def release(self) -> None:
        """The hold ended (answered, timed out, cancelled): no wake-up, no timer left behind."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._registered:
            self._registered = False
            header = self.header
            self._processor.changes.forget(header.topic, header.queue_id, self)

    @staticmethod
    def _time_up(future: asyncio.Future[Answered | None]) -> None:
        if not future.done():
            future.set_result(None)

    def __call__(self) -> None:
        """The queue grew (or a pulse, or the server's stop): answer now if there is something to
        answer, else wait on."""
        self._registered = False
        future = self._future
        if future is None or future.done():
            return
        processor = self._processor
        header = self.header
        if self.channel is None or processor.changes.closed or processor.holds.ended(self.peer):
            self._resolve(future, None)  # the task's own look (its timeout path when ending)
            return
        try:
            answered = processor.answer_woken(self)
        except Exception as exc:  # the task raises it: the dispatcher's answer to a failed processor
            if self._timer is not None:
                self._timer.cancel()
            future.set_exception(exc)
            return
        if answered is None:
            # nothing new to answer with: held on, as the broker's hold keeps a request that finds none
            self._registered = True
            processor.changes.on_queue(header.topic, header.queue_id, self)
            return
        self._resolve(future, answered)

    def _resolve(self, future: asyncio.Future[Answered | None], outcome: Answered | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        future.set_result(outcome)
