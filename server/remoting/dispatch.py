"""Routing a request to its processor by request code, and turning every failure into an answer.

The Java broker looks the code up in its processor table, answers an unknown code with
REQUEST_CODE_NOT_SUPPORTED, and answers any exception a processor throws with SYSTEM_ERROR carrying
the exception's description. Here a bad header field is answered with a remark naming the field (as
Java's ``RemotingCommandException``), and any other failure with a fixed remark: Python exception
text can carry file paths and internals, so it goes to the log (with its traceback, rate-limited by
``server.burst_log``), never to the client. Either costs one error response, never the connection.
Processors are plain functions (store reads are quick mmap reads, so the common path stays
synchronous and allocation-light); a processor may also be a coroutine function, and then the
connection awaits it while other requests keep flowing.

With access control on (``server.acl.validator``), every request but the name-server codes is checked
before anything else and answered NO_PERMISSION when denied, unknown codes included: the broker's
processor lookup never fails (its AdminBrokerProcessor is the default and answers unknown codes
REQUEST_CODE_NOT_SUPPORTED itself), and its ACL hook runs before that processor (checked against the
real 4.9.7 broker: an unsigned unknown code is refused "No accessKey is configured", a signed one is
REQUEST_CODE_NOT_SUPPORTED). The processors of ``server.acl.record_access.RECORD_CHECKED_CODES``
(VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK) run with the account in ``RECORD_ACCESS``, so they can
check the topic of the record they read, which no header names.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError
from server.acl.record_access import RECORD_ACCESS, RECORD_CHECKED_CODES, RecordAccess
from server.acl.validator import UNCHECKED_CODES, AccessValidator, DeniedError
from server.burst_log import BurstLog
from server.remoting.processors.not_supported import not_supported
from server.remoting.reply import exception_answer
from server.request_stats import RequestStats

log = logging.getLogger(__name__)

#: A synchronous processor answers at once, or returns an awaitable when it hands the work off.
SyncProcessor = Callable[[RemotingCommand], RemotingCommand | Awaitable[RemotingCommand | None] | None]
AsyncProcessor = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]
Processor = SyncProcessor | AsyncProcessor
#: A processor that also needs the peer's address (``/ip:port``, as Java prints a channel's remote
#: address), which the broker puts into some remarks; always a coroutine function.
PeerProcessor = Callable[[RemotingCommand, str], Awaitable[RemotingCommand | None]]


class FastPath(Protocol):
    """A compiled answer to some request codes for a whole read (``server.remoting.request_path``)."""

    codes: frozenset[int]

    def answer(
        self,
        data: bytes | bytearray | memoryview,
        pos: int,
        max_frame_length: int,
        max_header_length: int,
        flush_bytes: int,
        stats: RequestStats | None,
        start: Callable[[Coroutine[Any, Any, RemotingCommand | None]], None],
        peer: tuple[str, int] | None,
    ) -> tuple[bytes | None, int, int]: ...


#: The Java class name a header problem is reported under (``RemotingCommandException``).
_HEADER_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"


#: The Java class name an unexpected failure is reported under.
_RUNTIME_EXCEPTION = "java.lang.RuntimeException"


def header_error_remark(error: HeaderFieldError) -> str:
    """The SYSTEM_ERROR remark for a missing or malformed header field: names the field, like Java."""
    return f"{_HEADER_EXCEPTION}: {error}"


def failure_remark(code: int) -> str:
    """The SYSTEM_ERROR remark for a processor failure: what failed, never the exception's text."""
    return f"{_RUNTIME_EXCEPTION}: the server failed to process request code {code}; the cause is in its log"


class Dispatcher:
    """A table from request code to processor, with the broker's fallback and error answers."""

    __slots__ = (
        "_access",
        "_async",
        "_denials",
        "_failures",
        "_field_errors",
        "_peer",
        "_sync",
        "fast_path",
        "stats",
    )

    def __init__(self, access: AccessValidator | None = None, stats: RequestStats | None = None) -> None:
        #: Requests counted and timed by code for ``/metrics``; None counts nothing.
        self.stats = stats
        self._sync: dict[int, SyncProcessor] = {}
        self._async: dict[int, AsyncProcessor] = {}
        self._peer: dict[int, PeerProcessor] = {}
        self._access = access
        self._denials = BurstLog(log)
        self._field_errors = BurstLog(log, level=logging.INFO)
        self._failures = BurstLog(log, level=logging.ERROR)
        #: The compiled request path (``server.remoting.request_path``) that connections try first
        #: on each read, or None. Only ever set without access control: it checks no request.
        self.fast_path: FastPath | None = None

    @property
    def checks_access(self) -> bool:
        """Whether every request is checked against the access rules first (``server.acl``)."""
        return self._access is not None

    def register(self, code: int, processor: Processor) -> None:
        """Route ``code`` to ``processor`` (a coroutine function is awaited, anything else is called).

        A compiled request path answering ``code`` is dropped: it answers as the processor it
        replaces, not as the new one.
        """
        self._drop_fast_path(code)
        self._sync.pop(code, None)
        self._async.pop(code, None)
        self._peer.pop(code, None)
        if inspect.iscoroutinefunction(processor):
            self._async[code] = processor
        else:
            self._sync[code] = processor  # type: ignore[assignment]

    def register_with_peer(self, code: int, processor: PeerProcessor) -> None:
        """Route ``code`` to a coroutine function called with the request and the peer's address."""
        self._drop_fast_path(code)
        self._sync.pop(code, None)
        self._async.pop(code, None)
        self._peer[code] = processor

    def _drop_fast_path(self, code: int) -> None:
        fast = self.fast_path
        if fast is not None and code in fast.codes:
            self.fast_path = None

    def codes(self) -> set[int]:
        """Every request code with a processor."""
        return set(self._sync) | set(self._async) | set(self._peer)

    def dispatch(
        self, request: RemotingCommand, remote_host: str | None = None, peer: str | None = None
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The response now, or a coroutine that produces it; None means 'send nothing'.

        ``remote_host`` is the peer's IP address, which the access check (when on) matches against
        its whitelists; ``peer`` its ``ip:port`` (for the processors that name it in a remark).
        With ``stats`` set, the answer is counted and timed (a coroutine's when it completes).
        """
        stats = self.stats
        if stats is None:
            return self._dispatch(request, remote_host, peer)
        started = time.perf_counter()
        result = self._dispatch(request, remote_host, peer)
        if result is None or type(result) is RemotingCommand:
            stats.observe(
                request.code, None if result is None else result.code, time.perf_counter() - started
            )
            return result
        return self._timed(result, request.code, started, stats)  # type: ignore[arg-type]

    @staticmethod
    async def _timed(
        pending: Coroutine[Any, Any, RemotingCommand | None], code: int, started: float, stats: RequestStats
    ) -> RemotingCommand | None:
        response = await pending
        stats.observe(code, None if response is None else response.code, time.perf_counter() - started)
        return response

    def _dispatch(
        self, request: RemotingCommand, remote_host: str | None, peer: str | None
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        code = request.code
        # The broker's ACL hook runs before any processor, its default (AdminBrokerProcessor,
        # which answers unknown codes) included: an unknown code is checked too.
        if self._access is not None and code not in UNCHECKED_CODES:
            try:
                account = self._access.validate(request, remote_host)
            except DeniedError as denied:
                remark = str(denied)
                self._denials.event(
                    "access denied (NO_PERMISSION): %s, code %d, from %s", remark, code, remote_host
                )
                return request.make_response(ResponseCode.NO_PERMISSION, remark=remark)
            except Exception as exc:  # a check that fails refuses nothing silently: one answer, as Java
                return self._failure(request, exc)
            if account is not None and code in RECORD_CHECKED_CODES:
                access = RecordAccess(account)
                token = RECORD_ACCESS.set(access)
                try:
                    result = self._process(request, code, remote_host, peer)
                finally:
                    RECORD_ACCESS.reset(token)
                if result is None or type(result) is RemotingCommand:
                    return result
                # A coroutine runs later, in the awaiting task's context: it gets the check itself.
                return _with_record_access(result, access)  # type: ignore[arg-type]
        return self._process(request, code, remote_host, peer)

    def _process(
        self, request: RemotingCommand, code: int, remote_host: str | None, peer: str | None
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        processor = self._sync.get(code)
        async_processor = self._async.get(code) if processor is None else None
        peer_processor = self._peer.get(code) if processor is None and async_processor is None else None
        if processor is None and async_processor is None and peer_processor is None:
            return not_supported(request)
        if processor is not None:
            try:
                result = processor(request)
            except Exception as exc:  # every processor failure becomes an answer, as in the broker
                return self._failure(request, exc)
            if result is None or type(result) is RemotingCommand:
                return result
            # A synchronous processor that decided to finish the work elsewhere (a key query handed
            # to the query pool) returns an awaitable instead of an answer.
            return self._guarded(result, request)
        if peer_processor is not None:
            address = java_remote_address(peer or remote_host or "")
            return self._guarded(peer_processor(request, address), request)
        assert async_processor is not None
        return self._guarded(async_processor(request), request)

    def finish(
        self, request: RemotingCommand, outcome: object, started: float
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None]:
        """The end of ``dispatch`` for a processor the compiled request path called itself
        (``server.remoting.request_path``): ``outcome`` is its answer, the awaitable it handed the work
        to, or the exception it raised; ``started`` the ``time.perf_counter()`` before the call
        (for ``stats``). Answered, guarded and counted as ``dispatch`` does."""
        if isinstance(outcome, Exception):
            outcome = self._failure(request, outcome)
        stats = self.stats
        if type(outcome) is RemotingCommand:
            if stats is not None:
                stats.observe(request.code, outcome.code, time.perf_counter() - started)
            return outcome
        pending = self._guarded(outcome, request)  # type: ignore[arg-type]
        return pending if stats is None else self._timed(pending, request.code, started, stats)

    async def _guarded(
        self, pending: Awaitable[RemotingCommand | None], request: RemotingCommand
    ) -> RemotingCommand | None:
        try:
            return await pending
        except Exception as exc:
            return self._failure(request, exc)

    def _failure(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, HeaderFieldError):
            self._field_errors.event("request code %d: %s (answered SYSTEM_ERROR)", request.code, exc)
            return exception_answer(request, header_error_remark(exc))
        self._failures.event(
            "processor for request code %d failed: %s (answered SYSTEM_ERROR)",
            request.code,
            type(exc).__name__,
            exc_info=exc,
        )
        return exception_answer(request, failure_remark(request.code))


async def _with_record_access(
    pending: Coroutine[Any, Any, RemotingCommand | None], access: RecordAccess
) -> RemotingCommand | None:
    """``pending`` awaited with ``RECORD_ACCESS`` set, so a coroutine processor checks records too."""
    token = RECORD_ACCESS.set(access)
    try:
        return await pending
    finally:
        RECORD_ACCESS.reset(token)


def java_remote_address(peer: str) -> str:
    """``channel.remoteAddress().toString()`` for an ``ip:port`` peer: ``/1.2.3.4:5``, IPv6 as
    ``/[0:0:0:0:0:0:0:1]:5`` (Java's uncompressed groups)."""
    host, sep, port = peer.rpartition(":")
    if not sep or ":" not in host:
        return f"/{peer}"
    try:
        packed = ipaddress.IPv6Address(host.strip("[]")).packed
    except ValueError:
        return f"/{peer}"
    groups = ":".join(f"{int.from_bytes(packed[i : i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"/[{groups}]:{port}"
