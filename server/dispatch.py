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

With access control on (``server.acl``), a request for a known code is checked before its processor
runs and answered NO_PERMISSION when denied, the way the broker's ACL hook runs after its processor
lookup and before the processor.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError
from server.acl import UNCHECKED_CODES, AccessValidator
from server.burst_log import BurstLog
from server.processors.not_supported import not_supported
from server.reply import system_error

log = logging.getLogger(__name__)

#: A synchronous processor answers at once, or returns an awaitable when it hands the work off.
SyncProcessor = Callable[[RemotingCommand], RemotingCommand | Awaitable[RemotingCommand | None] | None]
AsyncProcessor = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]
Processor = SyncProcessor | AsyncProcessor

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

    __slots__ = ("_access", "_async", "_denials", "_failures", "_field_errors", "_sync")

    def __init__(self, access: AccessValidator | None = None) -> None:
        self._sync: dict[int, SyncProcessor] = {}
        self._async: dict[int, AsyncProcessor] = {}
        self._access = access
        self._denials = BurstLog(log)
        self._field_errors = BurstLog(log, level=logging.INFO)
        self._failures = BurstLog(log, level=logging.ERROR)

    def register(self, code: int, processor: Processor) -> None:
        """Route ``code`` to ``processor`` (a coroutine function is awaited, anything else is called)."""
        self._sync.pop(code, None)
        self._async.pop(code, None)
        if inspect.iscoroutinefunction(processor):
            self._async[code] = processor
        else:
            self._sync[code] = processor  # type: ignore[assignment]

    def codes(self) -> set[int]:
        """Every request code with a processor."""
        return set(self._sync) | set(self._async)

    def dispatch(
        self, request: RemotingCommand, remote_host: str | None = None
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The response now, or a coroutine that produces it; None means 'send nothing'.

        ``remote_host`` is the peer's IP address, which the access check (when on) matches against
        its whitelists.
        """
        code = request.code
        processor = self._sync.get(code)
        async_processor = self._async.get(code) if processor is None else None
        if processor is None and async_processor is None:
            return not_supported(request)
        if self._access is not None and code not in UNCHECKED_CODES:
            remark = self._access.denial(request, remote_host)
            if remark is not None:
                self._denials.event(
                    "access denied (NO_PERMISSION): %s, code %d, from %s", remark, code, remote_host
                )
                return request.make_response(ResponseCode.NO_PERMISSION, remark=remark)
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
        assert async_processor is not None
        return self._guarded(async_processor(request), request)

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
            return system_error(request, header_error_remark(exc))
        self._failures.event(
            "processor for request code %d failed: %s (answered SYSTEM_ERROR)",
            request.code,
            type(exc).__name__,
            exc_info=exc,
        )
        return system_error(request, failure_remark(request.code))
