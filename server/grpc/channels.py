"""gRPC clients as the broker's consumer groups see them: one ``Channel`` per client id.

The Proxy (``ClientActivity.registerConsumer``) registers a 5.x consumer in the broker's consumer
manager on each Heartbeat, with a ``GrpcClientChannel`` per client id: SIMPLE_CONSUMER as
CONSUME_ACTIVELY (PUSH_CONSUMER CONSUME_PASSIVELY), CLUSTERING, CONSUME_FROM_LAST_OFFSET, and the
subscriptions of the client's Settings. Doing the same here makes gRPC consumers members of the
groups the remoting side shows (``consumerConnection``, ``consumerProgress``). The channel carries
no remoting requests: a call back to the client (NOTIFY_CONSUMER_IDS_CHANGED, which 5.x clients do
not need) is dropped, an invoke fails as on a closed connection. NotifyClientTermination closes it,
and the broker's housekeeping drops a client silent for 120 s as it drops remoting ones.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from protocol.command import RemotingCommand
from protocol.heartbeat import ClientConsumerData, ClientHeartbeat, ClientSubscription
from protocol.index_key import java_string_hash
from server.broker.client_channel import Channel
from server.broker.controller import BrokerController
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

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._channels: dict[str, GrpcChannel] = {}

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
