"""What every gRPC call passes before its message is read: the caller's signature, then room for it.

grpcio hands a unary handler a message it has already read whole (up to the 16 MiB the port
accepts). So every handler is served here as a request-streaming one, which grpcio starts before
reading anything, and the message is read by this wrapper only once the call is let in:

1. With ``serve --acl``, the caller is authenticated from the metadata, as the Proxy's interceptor
   does before it parses a request: a missing or bad signature is answered UNAUTHORIZED in the
   response's status, exactly as the service would answer it, without a byte of the message read.
   (The permissions, which name the request's topic, are checked by the service once it is read.)
2. The call is given room for its message in the ``RequestBudget`` (per connection and in total),
   waiting its turn briefly; none is RESOURCE_EXHAUSTED, the status grpc itself answers past its
   bounds, and the message is never read.
3. The message is read, within ``read_timeout`` of the call's start (a client trickling its bytes
   would keep its room; DEADLINE_EXCEEDED), or until the budget wants the room back for calls
   waiting (after 1 s of reading: RESOURCE_EXHAUSTED), counted at its size, decoded (one that does
   not decode is INVALID_ARGUMENT, never a traceback) and handed to the service's handler; its
   bytes are held until the call ends.

A request stream (Telemetry) holds each command's bytes from its read until the next is asked for;
a command over 64 KiB that does not fit ends the stream with RESOURCE_EXHAUSTED (a smaller one, such
as the client's Settings, is counted and never refused). Its commands are read as they come, so
they are counted after the read rather than given room before it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from server.grpc.access import GrpcAccess
from server.grpc.request_budget import Hold, RequestBudget
from server.grpc.service import parse_peer, status
from server.grpc.v2 import service
from server.grpc.validation import GrpcStatusError

_METHODS = service.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name
NO_ROOM = "too many gRPC request bytes in flight, retry later"
TOO_SLOW = "the request message did not arrive in time"
EVICTED = "the request message was too slow to arrive while other calls waited, retry later"
#: A stream's command this small (a client's Settings, a few KiB) is counted but never refused: the
#: budget full of large SENDs must not end the clients' Telemetry streams.
SMALL_COMMAND = 64 * 1024


def response_type(method: str) -> type | None:
    """The response message class of ``/apache.rocketmq.v2.MessagingService/<name>``."""
    descriptor = _METHODS.get(method.rpartition("/")[2])
    return getattr(service, descriptor.output_type.name) if descriptor is not None else None


class Admission(grpc.aio.ServerInterceptor):
    """The interceptor ``server.grpc.server`` installs in front of ``MessagingService``."""

    def __init__(
        self,
        budget: RequestBudget,
        access: GrpcAccess | None,
        read_timeout: float,
        peer_of: Callable[[tuple[str, int]], tuple[str, int]] | None = None,
    ) -> None:
        self.budget = budget
        self.access = access
        #: The client behind the address grpcio sees: the TLS relay's connections all come from
        #: loopback, so an address rule of the ACL is checked against the relay's ``peer_of``.
        self.peer_of = peer_of or (lambda address: address)
        #: Seconds from a call's start to its whole message; 0 = no deadline.
        self.read_timeout = read_timeout
        #: Calls refused by authentication before their message was read (for tests and reports).
        self.unauthenticated = 0
        #: MessagingService method name -> calls received (``/metrics``' ``rmq_query_grpc_requests``);
        #: counted here, where every call passes before anything of it is read.
        self.calls: dict[str, int] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        answer = response_type(handler_call_details.method)
        if handler is None or answer is None:
            return handler
        name = handler_call_details.method.rpartition("/")[2]
        self.calls[name] = self.calls.get(name, 0) + 1
        decode = handler.request_deserializer
        if handler.request_streaming:
            inner = handler.stream_stream or handler.stream_unary
            streamed = self._streamed(inner, decode, answer, handler.response_streaming)
            return _handler(handler, streamed)
        inner = handler.unary_stream or handler.unary_unary
        return _handler(handler, self._unary(inner, decode, answer, handler.response_streaming))

    # -- the checks before a message is read ------------------------------------------------------

    def _refusal(self, context: Any, answer: type) -> Any | None:
        """With ``--acl``: the response a caller without a valid signature gets, else None."""
        if self.access is None:
            return None
        metadata = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
        try:
            self.access.authenticate(metadata, self.peer_of(parse_peer(context.peer() or ""))[0])
        except GrpcStatusError as refused:
            self.unauthenticated += 1
            return answer(status=status(refused.code, refused.message))
        return None

    async def _read_one(self, context: Any, hold: Hold, decode: Any) -> Any:
        """The call's message, read within the deadline unless its room is wanted first (the budget's
        ``evicted``: RESOURCE_EXHAUSTED), counted and decoded.

        Read with ``context.read()``, not the request iterator: grpcio's iterator is an async
        generator whose suspended frame keeps the last message it yielded, in a reference cycle that
        only the garbage collector breaks; 15 MiB messages stayed alive for dozens of calls."""
        read = asyncio.ensure_future(context.read())
        read.add_done_callback(_retrieved)
        waited: tuple[asyncio.Future[Any], ...] = (read,) if hold.evicted is None else (read, hold.evicted)
        try:
            await asyncio.wait(waited, timeout=self.read_timeout or None, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not read.done():
                read.cancel()
        if not read.done() or read.cancelled():
            if hold.evicted is not None and hold.evicted.done():
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, EVICTED)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, TOO_SLOW)
        raw = read.result()
        if raw is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call carried no request message")
        self.budget.settle(hold, len(raw))
        return await _decoded(raw, decode, context)

    # -- the wrapped handlers ---------------------------------------------------------------------

    def _unary(self, inner: Any, decode: Any, answer: type, streaming: bool) -> Any:
        admission = self

        async def admitted(requests: AsyncIterator[bytes], context: Any) -> tuple[Hold, Any]:
            hold = await admission.budget.admit(context.peer() or "")
            if hold is None:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, NO_ROOM)
            try:
                return hold, await admission._read_one(context, hold, decode)
            except BaseException:
                admission.budget.release(hold)
                raise

        if not streaming:

            async def unary(requests: AsyncIterator[bytes], context: Any) -> Any:
                refusal = admission._refusal(context, answer)
                if refusal is not None:
                    return refusal
                hold, request = await admitted(requests, context)
                try:
                    return await inner(request, context)
                finally:
                    admission.budget.release(hold)

            return unary

        async def answers(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[Any]:
            refusal = admission._refusal(context, answer)
            if refusal is not None:
                yield refusal
                return
            hold, request = await admitted(requests, context)
            try:
                async for item in inner(request, context):
                    yield item
            finally:
                admission.budget.release(hold)

        return answers

    def _streamed(self, inner: Any, decode: Any, answer: type, streaming: bool) -> Any:
        admission = self

        async def counted(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[Any]:
            connection = context.peer() or ""
            hold: Hold | None = None
            try:
                async for raw in requests:
                    if hold is not None:
                        admission.budget.release(hold)
                    hold = admission.budget.take(connection, len(raw), always=len(raw) <= SMALL_COMMAND)
                    if hold is None:
                        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, NO_ROOM)
                    yield await _decoded(raw, decode, context)
            finally:
                if hold is not None:
                    admission.budget.release(hold)

        if streaming:

            async def both(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[Any]:
                refusal = admission._refusal(context, answer)
                if refusal is not None:
                    yield refusal
                    return
                async for item in inner(counted(requests, context), context):
                    yield item

            return both

        async def one(requests: AsyncIterator[bytes], context: Any) -> Any:
            refusal = admission._refusal(context, answer)
            if refusal is not None:
                return refusal
            return await inner(counted(requests, context), context)

        return one


def _retrieved(read: asyncio.Future[Any]) -> None:
    """A read given up on may still fail (the call ended): its exception is not an error to log."""
    if not read.cancelled():
        read.exception()


async def _decoded(raw: bytes, decode: Any, context: Any) -> Any:
    """The request ``raw`` decodes to; INVALID_ARGUMENT when it is not the call's message."""
    if decode is None:
        return raw
    try:
        return decode(raw)
    except DecodeError:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the request message does not decode")


def serialized(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A response serializer that sends a response already serialized (``bytes``: a receive's
    messages, ``message_bytes``) as it is, and serializes any other."""

    def serializer(response: Any) -> bytes:
        return response if response.__class__ is bytes else serialize(response)

    return serializer


def _handler(original: grpc.RpcMethodHandler, behaviour: Any) -> grpc.RpcMethodHandler:
    """``original`` served by ``behaviour``, request-streaming and undecoded (it decodes); a response
    may be given already serialized (``serialized``)."""
    serialize = original.response_serializer
    if serialize is not None:
        serialize = serialized(serialize)
    if original.response_streaming:
        assert inspect.isasyncgenfunction(behaviour)
        return grpc.stream_stream_rpc_method_handler(behaviour, None, serialize)
    return grpc.stream_unary_rpc_method_handler(behaviour, None, serialize)
