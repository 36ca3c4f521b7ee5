"""``apache.rocketmq.v2.MessagingService``: the calls a 5.x Proxy answers, over this broker.

Served: QueryRoute (the topic's queues on this server's gRPC endpoint), Heartbeat, Telemetry (the
client's Settings kept by client id and answered with the Proxy's, ``client_settings``),
NotifyClientTermination and SendMessage (``conversion`` then ``sending``; read-only serving answers
FORBIDDEN "no writable queue", the Proxy's answer when no queue takes writes). With ``--writable``
the SimpleConsumer calls too (QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue: ``receiving``, over the remoting port's consume side), the offset
calls (UpdateOffset, GetOffset, QueryOffset: ``offsets``) and transactions (a TRANSACTION
SendMessage, EndTransaction, and the check-back written on a producer's Telemetry stream:
``transactions``, ``channels``); read-only serving answers them NOT_IMPLEMENTED, having no
committed offsets to keep nor a broker to decide half messages. Every other call is
answered with NOT_IMPLEMENTED in its response's status, a server stream with one response carrying
it, as the Proxy answers what its version does not serve: never a dropped stream.

Like the Proxy (``GrpcMessagingApplication.validateContext``), every call needs the
``x-mq-client-id`` metadata (CLIENT_ID_REQUIRED). A refused input is answered with the Proxy's
status code and message (``validation``); a failure of ours with INTERNAL_SERVER_ERROR and a fixed
message (never exception text), logged once per burst. Telemetry follows the Proxy in ending the
stream with gRPC's INVALID_ARGUMENT for Settings without publishing or subscription, or with a bad
topic or group, which the clients read as a failed settings sync.

With ``serve --acl`` every call is checked first, as the Proxy's interceptor does (``access``): the
5.x client's signature (UNAUTHORIZED) and the plain ACL's permissions on the call's topics and
group (FORBIDDEN); each Settings command of a Telemetry stream is checked as a request of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from server.acl.config import Account
from server.burst_log import BurstLog
from server.grpc import client_settings
from server.grpc.access import GrpcAccess, required, settings_required
from server.grpc.channels import GrpcClients, TelemetryChannel
from server.grpc.client_settings import SubscriptionDefaults
from server.grpc.conversion import SendLimits, check_message_type, group_queue, to_broker_message
from server.grpc.message_bytes import delivery_timestamp_response
from server.grpc.offsets import GrpcOffsets
from server.grpc.receiving import GrpcConsumers
from server.grpc.route import PERM_WRITE, broker, message_queues
from server.grpc.sending import GrpcWriter
from server.grpc.topics import GrpcTopics
from server.grpc.transactions import GrpcTransactions
from server.grpc.v2 import ClientType, Code, definition, service, service_grpc
from server.grpc.validation import GrpcStatusError, validate_consumer_group, validate_topic

log = logging.getLogger(__name__)

#: Client settings kept at once (by client id); the least recently updated goes first past it.
MAX_CLIENTS = 10_000

CLIENT_ID_KEY = "x-mq-client-id"
#: The client's SDK version (``x-mq-client-version``): which status codes it knows.
CLIENT_VERSION_KEY = "x-mq-client-version"
#: The client's ``LanguageCode`` name (``x-mq-language``), recorded with its group membership.
LANGUAGE_KEY = "x-mq-language"
#: NOT_IMPLEMENTED's message for what needs the writable consume side.
WRITABLE_ONLY = "{} are served with serve --writable only"
#: Commands waiting to go out on one Telemetry stream; a check-back past it is dropped.
TELEMETRY_OUTBOX = 256


class _Abort:
    """The Telemetry stream ends with gRPC's INVALID_ARGUMENT and this message."""

    def __init__(self, message: str) -> None:
        self.message = message


#: The Telemetry stream's reader is done: the stream ends.
_END = object()


def status(code: int, message: str | None = None) -> definition.Status:
    """``ResponseBuilder.buildStatus``: the code and a message, the code's name when none."""
    return definition.Status(code=code, message=message if message is not None else Code.Name(code))


OK = status(Code.OK)


def parse_peer(peer: str) -> tuple[str, int]:
    """grpc's ``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` as (host, port); ("127.0.0.1", 0) else."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return "127.0.0.1", 0
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if port.isdigit() and host else ("127.0.0.1", 0)


class MessagingService(service_grpc.MessagingServiceServicer):
    """The servicer registered on the gRPC server (``server.grpc.server``)."""

    def __init__(
        self,
        topics: GrpcTopics,
        *,
        broker_name: str,
        endpoint: Callable[[], tuple[str, int]],
        writer: GrpcWriter | None = None,
        max_body_size: int = SendLimits().max_body_size,
        access: GrpcAccess | None = None,
        clock: Callable[[], int] | None = None,
        consumers: GrpcConsumers | None = None,
    ) -> None:
        self.topics = topics
        self.broker_name = broker_name
        #: The (host, port) clients dial for this gRPC port (advertised host, bound port).
        self._endpoint = endpoint
        self.writer = writer
        self.limits = SendLimits(max_body_size=writer.max_message_size if writer else max_body_size)
        #: ``serve --acl``: signatures and permissions checked on every call (``access``).
        self.access = access
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.settings: OrderedDict[str, definition.Settings] = OrderedDict()
        self._round_robin = itertools.count()
        self._failures = BurstLog(log)
        #: The SimpleConsumer calls (``receiving``); None when serving read-only.
        self.consumers = consumers
        #: The Proxy's transaction data and EndTransaction (``transactions``); writable only.
        self.transactions = (
            GrpcTransactions(consumers.broker, clock=self._clock) if consumers is not None else None
        )
        #: Consumers and producers as members of the broker's groups (``channels``).
        self.clients = GrpcClients(consumers.broker, self.transactions) if consumers is not None else None
        #: The client behind the address grpcio sees (the TLS relay's ``peer_of``; itself without one).
        self.peer_of: Callable[[tuple[str, int]], tuple[str, int]] = lambda address: address

    # -- the common frame of every call ----------------------------------------------------------

    def _peer(self, context: Any) -> tuple[str, int]:
        """The calling client's (host, port), through the relay when there is one."""
        return self.peer_of(parse_peer(context.peer() or ""))

    @staticmethod
    def _metadata(context: Any, name: str) -> str:
        for key, value in context.invocation_metadata() or ():
            if key == name:
                return str(value)
        return ""

    @classmethod
    def _client_id(cls, context: Any) -> str:
        return cls._metadata(context, CLIENT_ID_KEY)

    def _authenticate(self, context: Any) -> Account | None:
        """With ``--acl``: the caller's account (None: allowed everything), or UNAUTHORIZED."""
        if self.access is None:
            return None
        metadata = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
        return self.access.authenticate(metadata, self._peer(context)[0])

    def _context_check(self, context: Any, request: Any = None) -> str:
        """The client id, or the status the Proxy answers before looking at the request: its
        interceptor's access check (UNAUTHORIZED, FORBIDDEN for ``request``'s resources) first."""
        if self.access is not None:
            self.access.authorize(self._authenticate(context), required(request))
        client_id = self._client_id(context)
        if not client_id.strip():
            raise GrpcStatusError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
        return client_id

    async def _unary(
        self, response_type: type, context: Any, handler: Callable[[str], Any], request: Any = None
    ) -> Any:
        try:
            client_id = self._context_check(context, request)
            return handler(client_id)
        except GrpcStatusError as refused:
            return response_type(status=status(refused.code, refused.message))
        except Exception as exc:
            self._failures.event("a gRPC %s failed", response_type.__name__, exc_info=exc)
            return response_type(status=status(Code.INTERNAL_SERVER_ERROR, "internal server error"))

    # -- routes -------------------------------------------------------------------------------------

    async def QueryRoute(
        self, request: service.QueryRouteRequest, context: Any
    ) -> service.QueryRouteResponse:
        return await self._unary(
            service.QueryRouteResponse, context, lambda _: self._query_route(request), request
        )

    def _query_route(self, request: service.QueryRouteRequest) -> service.QueryRouteResponse:
        name = request.topic.name
        validate_topic(name)
        config = self.topics.get(name)
        if config is None:
            raise GrpcStatusError(
                Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {name}"
            )
        host, port = self._endpoint()
        # The Proxy answers the host the client dialed with its own gRPC port (useEndpointPortFromRequest
        # off); a client that named no address gets the advertised host.
        if request.endpoints.addresses:
            host = request.endpoints.addresses[0].host
        queues = message_queues(request.topic, config, broker(self.broker_name, host, port))
        return service.QueryRouteResponse(status=OK, message_queues=queues)

    # -- clients ------------------------------------------------------------------------------------

    def _keep_settings(self, client_id: str, settings: definition.Settings) -> None:
        self.settings[client_id] = settings
        self.settings.move_to_end(client_id)
        while len(self.settings) > MAX_CLIENTS:
            self.settings.popitem(last=False)

    def _answered_settings(self, raw: definition.Settings) -> definition.Settings:
        if raw.HasField("publishing"):
            return client_settings.producer_settings(raw, self.limits.max_body_size)
        return client_settings.consumer_settings(raw, self._group_defaults(raw.subscription.group.name))

    def _group_defaults(self, group: str) -> SubscriptionDefaults | None:
        """The group's ``SubscriptionGroupConfig`` as the Proxy merges it into a consumer's settings."""
        if self.consumers is None:
            return None
        config = self.consumers.broker.find_group(group)
        if config is None:
            return None
        return SubscriptionDefaults(
            consume_orderly=config.consume_message_orderly, retry_max_times=config.retry_max_times
        )

    async def Heartbeat(self, request: service.HeartbeatRequest, context: Any) -> service.HeartbeatResponse:
        peer = self._peer(context)
        language = self._metadata(context, LANGUAGE_KEY) or "JAVA"
        return await self._unary(
            service.HeartbeatResponse,
            context,
            lambda cid: self._heartbeat(cid, request, f"{peer[0]}:{peer[1]}", language),
            request,
        )

    def _heartbeat(
        self, client_id: str, request: service.HeartbeatRequest, peer: str = "", language: str = "JAVA"
    ) -> service.HeartbeatResponse:
        settings = self.settings.get(client_id)
        if settings is None:
            raise GrpcStatusError(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"
            )
        kind = settings.client_type
        if kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            validate_consumer_group(request.group.name)
            if self.clients is not None:
                # A member of the group as the Proxy registers it (its config auto-created).
                self.clients.heartbeat(client_id, peer, request.group.name, settings, language)
        elif kind == ClientType.PRODUCER:
            if self.clients is not None:
                self.clients.producer_heartbeat(client_id, settings, language)
        else:
            raise GrpcStatusError(Code.UNRECOGNIZED_CLIENT_TYPE, ClientType.Name(kind))
        return service.HeartbeatResponse(status=OK)

    async def NotifyClientTermination(
        self, request: service.NotifyClientTerminationRequest, context: Any
    ) -> service.NotifyClientTerminationResponse:
        return await self._unary(
            service.NotifyClientTerminationResponse,
            context,
            lambda cid: self._terminated(cid, request),
            request,
        )

    def _terminated(
        self, client_id: str, request: service.NotifyClientTerminationRequest
    ) -> service.NotifyClientTerminationResponse:
        settings = self.settings.pop(client_id, None)
        if self.clients is not None:
            self.clients.terminated(client_id)
        if settings is None:
            raise GrpcStatusError(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"
            )
        kind = settings.client_type
        if kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            validate_consumer_group(request.group.name)
        elif kind != ClientType.PRODUCER:
            raise GrpcStatusError(Code.UNRECOGNIZED_CLIENT_TYPE, ClientType.Name(kind))
        return service.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(
        self, request_iterator: AsyncIterator[service.TelemetryCommand], context: Any
    ) -> AsyncIterator[service.TelemetryCommand]:
        """The client's Settings in, the Proxy's Settings out, for as long as the client keeps it open;
        a producer's check-backs are written to it too (``channels.TelemetryChannel``).

        Reading runs in a task of its own, putting its answers in the stream's outbox, so that what
        the broker writes meanwhile goes out without waiting for the client's next command."""
        try:
            account = self._authenticate(context)
            client_id = self._context_check(context)
        except GrpcStatusError as refused:
            yield service.TelemetryCommand(status=status(refused.code, refused.message))
            return
        peer = self._peer(context)
        language = self._metadata(context, LANGUAGE_KEY) or "JAVA"
        outbox: asyncio.Queue[Any] = asyncio.Queue(maxsize=TELEMETRY_OUTBOX)
        channels: list[TelemetryChannel] = []
        reader = asyncio.ensure_future(
            self._read_telemetry(
                request_iterator, account, client_id, f"{peer[0]}:{peer[1]}", language, outbox, channels
            )
        )
        try:
            while True:
                item = await outbox.get()
                if item is _END:
                    return
                if isinstance(item, _Abort):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, item.message)
                yield item
        finally:
            reader.cancel()
            for channel in channels:
                channel.close()

    async def _read_telemetry(
        self,
        request_iterator: AsyncIterator[service.TelemetryCommand],
        account: Account | None,
        client_id: str,
        peer: str,
        language: str,
        outbox: asyncio.Queue[Any],
        channels: list[TelemetryChannel],
    ) -> None:
        try:
            async for command in request_iterator:
                if command.WhichOneof("command") != "settings":
                    continue  # thread stack traces and verify results answer nothing we asked
                if self.access is not None:
                    try:
                        # the interceptor checks each command of the stream, as each unary request
                        self.access.authorize(account, settings_required(command.settings))
                    except GrpcStatusError as refused:
                        await outbox.put(
                            service.TelemetryCommand(status=status(refused.code, refused.message))
                        )
                        break
                answer = self._telemetry_settings(client_id, command.settings)
                if isinstance(answer, _Abort):
                    await outbox.put(answer)
                    return
                if command.settings.HasField("publishing") and self.clients is not None:
                    channel = self.clients.producer_stream(
                        client_id, peer, self.settings[client_id], language, outbox
                    )
                    if channel is not None and channel not in channels:
                        channels.append(channel)
                await outbox.put(answer)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client went away mid-read: the stream just ends
            log.debug("the Telemetry stream of %s ended: %s", client_id, exc)
        await outbox.put(_END)

    def _telemetry_settings(
        self, client_id: str, settings: definition.Settings
    ) -> service.TelemetryCommand | _Abort:
        """``processAndWriteClientSettings``: the answer, or the INVALID_ARGUMENT ending the stream."""
        try:
            pubsub = settings.WhichOneof("pub_sub")
            if pubsub == "publishing":
                for topic in settings.publishing.topics:
                    validate_topic(topic.name)
            elif pubsub == "subscription":
                validate_consumer_group(settings.subscription.group.name)
            else:
                return _Abort("there is no publishing or subscription data in settings")
        except GrpcStatusError as refused:
            return _Abort(f"process client telemetryCommand failed. {refused.message}")
        raw = settings
        if pubsub == "subscription":
            raw = client_settings.consumer_settings(
                settings, self._group_defaults(settings.subscription.group.name)
            )
        self._keep_settings(client_id, raw)
        return service.TelemetryCommand(status=OK, settings=self._answered_settings(raw))

    # -- sending ------------------------------------------------------------------------------------

    async def SendMessage(
        self, request: service.SendMessageRequest, context: Any
    ) -> service.SendMessageResponse:
        born = self._peer(context)
        return await self._unary(
            service.SendMessageResponse, context, lambda _: self._send(request, born), request
        )

    def _send(
        self, request: service.SendMessageRequest, born: tuple[str, int]
    ) -> service.SendMessageResponse:
        if not request.messages:
            raise GrpcStatusError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0]
        validate_topic(first.topic.name)
        now = self._clock()
        delays = self.writer.delay_levels if self.writer is not None else {1: 1000}
        converted = []
        for message in request.messages:
            if message.topic != first.topic:
                raise GrpcStatusError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            converted.append(
                to_broker_message(
                    message, peer_host=f"{born[0]}:{born[1]}", now_ms=now, delays=delays, limits=self.limits
                )
            )
        topic = first.topic.name
        config = self.topics.get(topic)
        if config is None:
            raise GrpcStatusError(
                Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}"
            )
        check_message_type(config.message_type, converted[0].message_type)
        writable_queues = config.write_queue_nums if config.perm & PERM_WRITE else 0
        if self.writer is None or writable_queues <= 0:
            raise GrpcStatusError(Code.FORBIDDEN, "no writable queue")
        half = converted[0].message_type == "TRANSACTION"
        if half and self.transactions is None:
            # EndTransaction and the check-back need the broker's consume side.
            raise GrpcStatusError(Code.NOT_IMPLEMENTED, WRITABLE_ONLY.format("transactions"))
        group = converted[0].message_group if len(converted) == 1 else None
        queue_id = group_queue(group, writable_queues) if group else next(self._round_robin) % writable_queues
        stored = self.writer.send(converted, queue_id, born)
        if half and self.transactions is not None:
            # ``fillTransactionData``: the producer group is the topic
            for m, s in zip(converted, stored, strict=True):
                self.transactions.add(topic, m.message_id, s.queue_offset, s.commit_log_offset)
        # The broker answers every SEND with the message's UNIQ_KEY as its transaction id.
        entries = [
            service.SendResultEntry(
                status=OK, message_id=m.message_id, transaction_id=m.message_id, offset=s.queue_offset
            )
            for m, s in zip(converted, stored, strict=True)
        ]
        return service.SendMessageResponse(status=OK, entries=entries)

    # -- consuming (SimpleConsumer) ----------------------------------------------------------------

    def _consumers(self) -> GrpcConsumers:
        if self.consumers is None:
            # Receipt handles and committed offsets need the writable consume side.
            raise GrpcStatusError(Code.NOT_IMPLEMENTED, "consuming is served with serve --writable only")
        return self.consumers

    async def QueryAssignment(
        self, request: service.QueryAssignmentRequest, context: Any
    ) -> service.QueryAssignmentResponse:
        def answer(client_id: str) -> service.QueryAssignmentResponse:
            host, port = self._endpoint()
            if request.endpoints.addresses:
                host = request.endpoints.addresses[0].host
            settings = self.settings.get(client_id)
            fifo = settings is not None and settings.subscription.fifo
            return self._consumers().query_assignment(request, broker(self.broker_name, host, port), fifo)

        return await self._unary(service.QueryAssignmentResponse, context, answer, request)

    async def ReceiveMessage(
        self, request: service.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[service.ReceiveMessageResponse]:
        try:
            client_id = self._context_check(context, request)
            consumers = self._consumers()
            remaining = context.time_remaining()
            responses = consumers.receive(
                request,
                self.settings.get(client_id),
                None if remaining is None else int(remaining * 1000),
                client_id=client_id,
                client_version=self._metadata(context, CLIENT_VERSION_KEY),
            )
            async for response in responses:
                yield response
        except GrpcStatusError as refused:
            yield service.ReceiveMessageResponse(status=status(refused.code, refused.message))
        except Exception as exc:
            self._failures.event("a gRPC ReceiveMessage failed", exc_info=exc)
            yield service.ReceiveMessageResponse(
                status=status(Code.INTERNAL_SERVER_ERROR, "internal server error")
            )
        # ``ReceiveMessageResponseStreamWriter.onComplete`` (Proxy 5.3): every stream ends with the
        # time of delivery, which the clients stamp on the messages they got.
        yield delivery_timestamp_response(self._clock())

    async def AckMessage(
        self, request: service.AckMessageRequest, context: Any
    ) -> service.AckMessageResponse | bytes:
        # the answer comes serialized (``ack_bytes``), a refusal as a message: grpcio's serializer
        # (``admission.serialized``) sends either
        return await self._unary(
            service.AckMessageResponse, context, lambda _: self._consumers().ack(request), request
        )

    async def ChangeInvisibleDuration(
        self, request: service.ChangeInvisibleDurationRequest, context: Any
    ) -> service.ChangeInvisibleDurationResponse:
        return await self._unary(
            service.ChangeInvisibleDurationResponse,
            context,
            lambda _: self._consumers().change_invisible(request),
            request,
        )

    async def ForwardMessageToDeadLetterQueue(
        self, request: service.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> service.ForwardMessageToDeadLetterQueueResponse:
        return await self._unary(
            service.ForwardMessageToDeadLetterQueueResponse,
            context,
            lambda _: self._consumers().forward_to_dead_letter(request),
            request,
        )

    # -- what this half does not serve ----------------------------------------------------------------

    async def _not_implemented(self, response_type: type, context: Any, call: str) -> Any:
        def refuse(_: str) -> Any:
            raise GrpcStatusError(Code.NOT_IMPLEMENTED, f"{call} is not served by this server yet")

        return await self._unary(response_type, context, refuse)

    async def UpdateOffset(
        self, request: service.UpdateOffsetRequest, context: Any
    ) -> service.UpdateOffsetResponse:
        return await self._unary(
            service.UpdateOffsetResponse, context, lambda _: self._offsets().update(request), request
        )

    async def GetOffset(self, request: service.GetOffsetRequest, context: Any) -> service.GetOffsetResponse:
        return await self._unary(
            service.GetOffsetResponse, context, lambda _: self._offsets().get(request), request
        )

    async def QueryOffset(
        self, request: service.QueryOffsetRequest, context: Any
    ) -> service.QueryOffsetResponse:
        return await self._unary(
            service.QueryOffsetResponse, context, lambda _: self._offsets().query(request), request
        )

    def _offsets(self) -> GrpcOffsets:
        if self.consumers is None:
            raise GrpcStatusError(
                Code.NOT_IMPLEMENTED, "consumer offsets are served with serve --writable only"
            )
        return GrpcOffsets(self.consumers.broker, self.topics)

    async def EndTransaction(
        self, request: service.EndTransactionRequest, context: Any
    ) -> service.EndTransactionResponse:
        def end(_: str) -> service.EndTransactionResponse:
            if self.transactions is None:
                raise GrpcStatusError(
                    Code.NOT_IMPLEMENTED, "transactions are served with serve --writable only"
                )
            return self.transactions.end(request)

        return await self._unary(service.EndTransactionResponse, context, end, request)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        return await self._not_implemented(service.RecallMessageResponse, context, "RecallMessage")

    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:
        return await self._not_implemented(
            service.SyncLiteSubscriptionResponse, context, "SyncLiteSubscription"
        )

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield await self._not_implemented(service.PullMessageResponse, context, "PullMessage")
