"""gRPC clients as the broker's consumer groups see them: one ``Channel`` per client id.

The Proxy (``ClientActivity.registerConsumer``) registers a 5.x consumer in the broker's consumer
manager on each Heartbeat, with a ``GrpcClientChannel`` per client id: SIMPLE_CONSUMER as
CONSUME_ACTIVELY (PUSH_CONSUMER CONSUME_PASSIVELY), CLUSTERING, CONSUME_FROM_LAST_OFFSET, and the
subscriptions of the client's Settings. Doing the same here makes gRPC consumers members of the
groups the remoting side shows (``consumerConnection``, ``consumerProgress``). The channel carries
no remoting requests: a call back to the client (NOTIFY_CONSUMER_IDS_CHANGED, which 5.x clients do
not need) is dropped, an invoke fails as on a closed connection. NotifyClientTermination closes it,
and the broker's housekeeping drops a client silent for 120 s as it drops remoting ones.

A producer is registered the Proxy's way too (``ClientActivity.registerProducer``): when its
Telemetry stream brings publishing Settings, in the producer group of each of its topics (the Proxy
uses the topic as the producer group), refreshed by each Heartbeat. Its channel
(``TelemetryChannel``) is that stream: open while the stream is, so the broker's check-back
(``available_channel``) only picks producers it can reach, and a CHECK_TRANSACTION_STATE sent on it
is written to the stream as a ``RecoverOrphanedTransactionCommand`` (``transactions``), dropped when
the stream's bounded outbox is full (the next check asks again).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from protocol.custom_headers import CheckTransactionStateRequestHeader
from protocol.errors import ProtocolError
from protocol.heartbeat import ClientConsumerData, ClientHeartbeat, ClientProducerData, ClientSubscription
from protocol.index_key import java_string_hash
from protocol.message import decode_message
from server.broker.client_channel import Channel
from server.broker.controller import BrokerController
from server.grpc.transactions import GrpcTransactions
from server.grpc.v2 import ClientType, definition

log = logging.getLogger(__name__)

#: Negative ids: the remoting channels count up from 1, and tables key by id across both.
_ids = itertools.count(1)

#: ``MQVersion.Version.V5_1_4.ordinal()``: what the Proxy records for a client whose version it
#: cannot parse (``MQVersion.CURRENT_VERSION``).
CURRENT_VERSION = 441


class GrpcChannel:
    """One gRPC client (by client id) as a broker ``Channel``."""

    def __init__(self, client_id: str, client_address: str) -> None:
        self.id = -next(_ids)
        self.client_id = client_id
        self.client_address = client_address
        self.active = True
        self._callbacks: list[Callable[[Channel], None]] = []

    def send_oneway(self, request: RemotingCommand) -> None:
        """Nothing to send it over: 5.x clients learn of group changes by QueryAssignment."""

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        raise ConnectionError(f"the gRPC client {self.client_id} takes no remoting requests")

    def close(self) -> None:
        if not self.active:
            return
        self.active = False
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a close callback of gRPC client %s failed", self.client_id)

    def on_close(self, callback: Callable[[Channel], None]) -> None:
        if not self.active:
            callback(self)
        else:
            self._callbacks.append(callback)


class TelemetryChannel(GrpcChannel):
    """A producer's Telemetry stream as a broker ``Channel`` (``GrpcClientChannel``)."""

    def __init__(
        self,
        client_id: str,
        client_address: str,
        outbox: asyncio.Queue[Any],
        transactions: GrpcTransactions,
    ) -> None:
        super().__init__(client_id, client_address)
        self._outbox = outbox
        self._transactions = transactions
        #: Check-backs written to the stream, and dropped (a full outbox or an undecodable body).
        self.written = 0
        self.dropped = 0

    def send_oneway(self, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE becomes a ``RecoverOrphanedTransactionCommand``; the other calls
        back (consumer ids changed, running info) mean nothing to a 5.x producer."""
        if not self.active or request.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields or {})
            message = decode_message(request.body or b"")
        except (ProtocolError, ValueError) as exc:
            log.error("a check-back for gRPC client %s cannot be shown to it: %s", self.client_id, exc)
            self.dropped += 1
            return
        command, forget = self._transactions.recover_command(header, message)
        try:
            self._outbox.put_nowait(command)
        except asyncio.QueueFull:
            forget()
            self.dropped += 1
            log.warning("the Telemetry stream of %s is full: check-back dropped", self.client_id)
            return
        self.written += 1


def subscription_of(entry: definition.SubscriptionEntry) -> ClientSubscription:
    """``ClientActivity.buildSubscriptionDataSet``: ``FilterAPI.build`` of one entry."""
    expression = entry.expression.expression or "*"
    if entry.expression.type == definition.FilterType.SQL:
        return ClientSubscription(topic=entry.topic.name, subString=expression, expressionType="SQL92")
    tags = [] if expression == "*" else [t.strip() for t in expression.split("||") if t.strip()]
    return ClientSubscription(
        topic=entry.topic.name,
        subString=expression,
        tagsSet=tags,
        codeSet=[java_string_hash(t) for t in tags],
        expressionType="TAG",
    )


class GrpcClients:
    """The channels of the gRPC clients that said they consume, by client id."""

    def __init__(self, broker: BrokerController, transactions: GrpcTransactions | None = None) -> None:
        self.broker = broker
        self.transactions = transactions
        self._channels: dict[str, GrpcChannel] = {}
        #: Producers by client id: the channel of their open Telemetry stream.
        self._producers: dict[str, TelemetryChannel] = {}

    # -- producers ------------------------------------------------------------------------------

    def producer_stream(
        self,
        client_id: str,
        peer: str,
        settings: definition.Settings,
        language: str,
        outbox: asyncio.Queue[Any],
    ) -> TelemetryChannel | None:
        """Publishing Settings arrived on a Telemetry stream: the producer's channel is that stream
        (a stream replacing an older one of the same client takes over), registered in the group
        of each topic. None when transactions are not served (nothing would call back)."""
        if self.transactions is None:
            return None
        channel = self._producers.get(client_id)
        if channel is None or not channel.active or channel._outbox is not outbox:
            if channel is not None:
                channel.close()
            channel = self._producers[client_id] = TelemetryChannel(
                client_id, peer, outbox, self.transactions
            )
            channel.on_close(lambda _: self._forget_producer(client_id, channel))
        self._register_producer(channel, settings, language)
        return channel

    def producer_heartbeat(self, client_id: str, settings: definition.Settings, language: str) -> None:
        """A producer's Heartbeat keeps its registration fresh (the broker drops silent ones)."""
        channel = self._producers.get(client_id)
        if channel is not None and channel.active:
            self._register_producer(channel, settings, language)

    def _register_producer(
        self, channel: TelemetryChannel, settings: definition.Settings, language: str
    ) -> None:
        groups = [ClientProducerData(groupName=t.name) for t in settings.publishing.topics]
        self.broker.heartbeat(
            channel,
            ClientHeartbeat(clientID=channel.client_id, producerDataSet=groups),
            language,
            CURRENT_VERSION,
        )

    def _forget_producer(self, client_id: str, channel: TelemetryChannel) -> None:
        if self._producers.get(client_id) is channel:
            del self._producers[client_id]

    def producer(self, client_id: str) -> TelemetryChannel | None:
        return self._producers.get(client_id)

    # -- consumers ------------------------------------------------------------------------------

    def heartbeat(
        self, client_id: str, peer: str, group: str, settings: definition.Settings, language: str
    ) -> None:
        channel = self._channels.get(client_id)
        if channel is None or not channel.active:
            channel = self._channels[client_id] = GrpcChannel(client_id, peer)
            channel.on_close(lambda _: self._forget(client_id, channel))
        consume_type = (
            "CONSUME_PASSIVELY" if settings.client_type == ClientType.PUSH_CONSUMER else "CONSUME_ACTIVELY"
        )
        data = ClientConsumerData(
            groupName=group,
            consumeType=consume_type,
            messageModel="CLUSTERING",
            consumeFromWhere="CONSUME_FROM_LAST_OFFSET",
            subscriptionDataSet=[subscription_of(e) for e in settings.subscription.subscriptions],
        )
        self.broker.heartbeat(
            channel, ClientHeartbeat(clientID=client_id, consumerDataSet=[data]), language, CURRENT_VERSION
        )

    def _forget(self, client_id: str, channel: GrpcChannel) -> None:
        if self._channels.get(client_id) is channel:
            del self._channels[client_id]

    def terminated(self, client_id: str) -> None:
        """NotifyClientTermination: the client leaves every group."""
        channel = self._channels.pop(client_id, None)
        if channel is not None:
            channel.close()
        producer = self._producers.pop(client_id, None)
        if producer is not None:
            producer.close()
