"""``serve --writable``: the SEND processors, the topic-table routes, the delivery timer, the consume side.

Registered on top of the read-only dispatcher, so everything a read-only server answers stays as it
is; SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and the route lookups change hands, and so do
the consume side's codes (heartbeats, offsets, pulls, queue locks, send-backs into the retry and
dead-letter topics), which here are served by a ``BrokerController`` that registers clients and
keeps their groups' offsets.
Transactions: END_TRANSACTION commits or rolls back a half message, and the check-back asks a
producer about those left undecided, every ``transactionCheckInterval``, in its own background task.
Scheduled (delay-level) messages are delivered by a timer on the event loop when they fall due; it
is armed when the server starts (for messages pending across a restart) and after every delayed SEND.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from protocol.codes import RequestCode
from server.broker.client_channel import Channel
from server.broker.controller import HOUSEKEEPING_MS, OFFSET_FLUSH_MS, BrokerController, ConsumeSettings
from server.broker.transaction_check import TransactionChecker
from server.broker.transactions import CheckBack
from server.broker.writable_store import WritableStore
from server.remoting.channel import RemotingChannel
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.client_manage import ClientManageProcessor
from server.remoting.processors.client_relay import ClientRelayProcessor
from server.remoting.processors.consume_stats import ConsumeStatsProcessor
from server.remoting.processors.consumer_manage import ConsumerOffsetProcessor
from server.remoting.processors.consumer_send_back import ConsumerSendBackProcessor
from server.remoting.processors.end_transaction import EndTransactionProcessor
from server.remoting.processors.group_admin import GroupAdminProcessor
from server.remoting.processors.name_server import NameServerProcessor
from server.remoting.processors.pull_message import PullMessageProcessor
from server.remoting.processors.rebalance_lock import RebalanceLockProcessor
from server.remoting.processors.reply_message import REPLY_CODES, ReplyMessageProcessor
from server.remoting.processors.send_message import SEND_CODES, SendMessageProcessor
from server.remoting.processors.topic_admin import TopicAdminProcessor
from server.remoting.processors.write_routes import WritableRoutes
from server.remoting.request_path import RequestPath

if TYPE_CHECKING:
    from server.app import QueryServer

log = logging.getLogger(__name__)

#: Half messages the check-back handles before it lets the event loop serve others.
CHECK_STEPS_PER_TURN = 16


class DeliveryTimer:
    """Runs ``WritableStore.deliver_due`` on the event loop when the next scheduled message is due."""

    def __init__(self, store: WritableStore) -> None:
        self._store = store
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None

    def arm(self) -> None:
        due = self._store.next_delivery()
        if due is None or (
            self._armed_for is not None and self._armed_for <= due and self._handle is not None
        ):
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, (due - time.time() * 1000) / 1000)
        self._armed_for = due
        self._handle = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        if self._store.closed:
            return  # nothing more is delivered, and re-arming for a due message would spin
        try:
            delivered = self._store.deliver_due()
        except Exception:
            log.exception("delivering scheduled messages failed")
        else:
            if delivered:
                log.debug("delivered %d scheduled message(s)", len(delivered))
        self.arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class WritePath:
    """A ``QueryServer(configure=...)`` hook: the write path and the consume side over ``store``.

    ``broker`` is the consume side's state (groups, offsets, locks), built with the hook so that
    whoever starts the server can reach it.
    """

    def __init__(
        self,
        store: WritableStore,
        *,
        region: str = "DefaultRegion",
        trace_on: bool = True,
        consume: ConsumeSettings | None = None,
        timer: DeliveryTimer | None = None,
    ) -> None:
        self.store = store
        self.region = region
        self.trace_on = trace_on
        #: The delivery timer to arm; another front door (the gRPC port's SendMessage) may share it.
        self.timer = timer
        self.notifier = ConsumerIdsNotifier()
        self.broker = BrokerController(store, settings=consume, ids_changed=self.notifier)
        self.checker = TransactionChecker(self.broker, self.broker.settings.transactions, send_check_back)
        #: The SEND processor, once registered: the HTTP port's resend goes through it
        #: (``server.http.resend``), so a resent copy is stored as a producer's SEND of it.
        self.sends: SendMessageProcessor | None = None
        #: The reply processor (SEND_REPLY_MESSAGE and _V2), once registered.
        self.replies: ReplyMessageProcessor | None = None
        #: The topic-table routes, once registered: what this broker registers with a name server
        #: of its own cluster (``server.namesrv``).
        self.routes: WritableRoutes | None = None

    def __call__(self, server: QueryServer) -> None:
        dispatcher, identity = server.dispatcher, server.identity
        assert dispatcher is not None and identity is not None
        store = self.store
        # The store host of new records (and so their offset msg ids) is the address clients are
        # routed to, as a broker's is brokerIP1:listenPort: a tool given such an id dials it.
        host, _, port = identity.address.rpartition(":")
        store.set_store_address(host, int(port))
        if self.timer is None:
            self.timer = DeliveryTimer(store)
        timer = self.timer
        sends = SendMessageProcessor(
            store,
            cluster=identity.cluster,
            max_message_size=store.config.max_message_size,
            region=self.region,
            trace_on=self.trace_on,
            on_scheduled=timer.arm,
            broker=self.broker,
            reject_transactions=self.broker.settings.transactions.reject_transaction_message,
            broker_ip=host,
        )
        self.sends = sends
        for code in SEND_CODES:
            dispatcher.register(code, sends.process)
        # A request's reply: pushed to the requester's connection and stored in the reply topic.
        replies = ReplyMessageProcessor(
            store,
            self.broker,
            cluster=identity.cluster,
            store_host=(host, int(port)),
            region=self.region,
            trace_on=self.trace_on,
            store_replies=store.config.store_reply_message_enable,
            on_scheduled=timer.arm,
        )
        self.replies = replies
        for code in REPLY_CODES:
            dispatcher.register(code, replies.process)
        routes = WritableRoutes(store, identity, NameServerProcessor(store.reader, identity))
        self.routes = routes
        dispatcher.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, routes.get_route_info_by_topic)
        dispatcher.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, routes.get_all_topic_list)
        self._register_consume_side(server, dispatcher, timer)
        # Scheduled messages the store found pending when it opened (``delayOffset.json`` behind the
        # schedule queues) are due whether or not a new delayed SEND ever comes: the broker's
        # ScheduleMessageService starts its timers at start-up, so does this one.
        timer.arm()

    def _register_consume_side(
        self, server: QueryServer, dispatcher: Dispatcher, timer: DeliveryTimer
    ) -> None:
        broker = self.broker
        # A SEND wakes the pulls held on the queues it added to, at once.
        self.store.arrived = server.changes.notify_queue
        clients = ClientManageProcessor(broker)
        dispatcher.register(RequestCode.HEART_BEAT, clients.heart_beat)
        dispatcher.register(RequestCode.UNREGISTER_CLIENT, clients.unregister_client)
        dispatcher.register(RequestCode.CHECK_CLIENT_CONFIG, clients.check_client_config)
        dispatcher.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, clients.query_topic_consume_by_who)
        offsets = ConsumerOffsetProcessor(broker)
        dispatcher.register(RequestCode.QUERY_CONSUMER_OFFSET, offsets.query_consumer_offset)
        dispatcher.register(RequestCode.UPDATE_CONSUMER_OFFSET, offsets.update_consumer_offset)
        dispatcher.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, offsets.get_consumer_list_by_group)
        pulls = PullMessageProcessor(
            self.store.reader, server.changes, server.pull_stats, holds=server.held_pulls, broker=broker
        )
        dispatcher.register(RequestCode.PULL_MESSAGE, pulls.process)
        fast = dispatcher.fast_path
        if isinstance(fast, RequestPath):
            # Its plain pulls (messages found for a known group) answered by the compiled path too.
            fast.answer_pulls(pulls, self.store.reader, self.store.config)
            if self.sends is not None:
                # And its plain SENDs: the frame and the answer there, the checks and the put here.
                fast.answer_sends(self.sends)
        locks = RebalanceLockProcessor(broker)
        dispatcher.register(RequestCode.LOCK_BATCH_MQ, locks.lock_batch_mq)
        dispatcher.register(RequestCode.UNLOCK_BATCH_MQ, locks.unlock_batch_mq)
        send_back = ConsumerSendBackProcessor(broker, on_scheduled=timer.arm)
        dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, send_back.consumer_send_msg_back)
        self._register_admin(dispatcher)
        transactions = EndTransactionProcessor(broker)
        dispatcher.register(RequestCode.END_TRANSACTION, transactions.end_transaction)
        server.run_in_background(self._housekeeping)
        server.run_in_background(self._check_transactions)

    async def _check_transactions(self) -> None:
        """``TransactionalMessageCheckService``: a pass over the half queues every check interval,
        a few messages per turn of the event loop; a failed pass is logged and the next one runs."""
        interval = self.broker.settings.transactions.check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.store.closed or self.store.not_writable is not None:
                continue
            try:
                for steps, _ in enumerate(self.checker.check(), 1):
                    if steps % CHECK_STEPS_PER_TURN == 0:
                        await asyncio.sleep(0)
                        if self.store.closed:
                            break
            except Exception:
                log.exception("the transaction check-back failed (it runs again in %.3f s)", interval)

    def _register_admin(self, dispatcher: Dispatcher) -> None:
        """``AdminBrokerProcessor``'s topic, group, progress and relay requests (mqadmin's)."""
        broker = self.broker
        topics = TopicAdminProcessor(broker)
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_TOPIC, topics.update_and_create_topic)
        dispatcher.register(RequestCode.DELETE_TOPIC_IN_BROKER, topics.delete_topic_in_broker)
        dispatcher.register(RequestCode.GET_ALL_TOPIC_CONFIG, topics.get_all_topic_config)
        dispatcher.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, topics.delete_topic_in_namesrv)
        groups = GroupAdminProcessor(broker)
        dispatcher.register(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, groups.update_and_create_subscription_group
        )
        dispatcher.register(
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, groups.get_all_subscription_group_config
        )
        dispatcher.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, groups.delete_subscription_group)
        stats = ConsumeStatsProcessor(broker)
        dispatcher.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, stats.get_consumer_connection_list)
        dispatcher.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, stats.get_producer_connection_list)
        dispatcher.register(RequestCode.GET_CONSUME_STATS, stats.get_consume_stats)
        relay = ClientRelayProcessor(broker)
        dispatcher.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, relay.invoke_broker_to_reset_offset)
        dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, relay.get_consumer_running_info)
        dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, relay.consume_message_directly)

    async def _housekeeping(self) -> None:
        """The broker's periodic work: offsets saved every 5 s, silent clients dropped every 10 s;
        offsets saved once more when the server stops.

        The stop cancels the wait for a periodic save, not the save, which goes on in its thread:
        the last save waits for it to end rather than writing the same file at the same time
        (two saves at once had one log ``cannot write ... consumerOffset.json.tmp``)."""
        broker = self.broker
        loop = asyncio.get_running_loop()
        next_expiry = loop.time() + HOUSEKEEPING_MS / 1000
        flushing: asyncio.Future[None] | None = None
        try:
            while True:
                await asyncio.sleep(OFFSET_FLUSH_MS / 1000)
                if broker.offsets.dirty:
                    flushing = loop.run_in_executor(None, broker.flush)
                    await asyncio.shield(flushing)
                    flushing = None
                if loop.time() >= next_expiry:
                    next_expiry = loop.time() + HOUSEKEEPING_MS / 1000
                    broker.expire_silent()
        finally:
            try:
                if flushing is not None:
                    await asyncio.wait([flushing])
            finally:
                broker.close()


#: How long changes of one group are gathered before its members are told (seconds).
NOTIFY_DELAY = 0.05


class ConsumerIdsNotifier:
    """``Broker2Client.notifyConsumerIdsChanged``: a oneway NOTIFY_CONSUMER_IDS_CHANGED to each member.

    The broker tells every member on every change, so a group of n members that all join costs n²
    notifications: 10,000 members joining would queue 10^8 frames and stall the loop. Here the
    changes of one group within ``NOTIFY_DELAY`` are told once, to whoever is a member then: every
    member still hears of every change after it happened (it rebalances from the group as it is),
    in O(members) per burst of changes.
    """

    def __init__(self, delay: float = NOTIFY_DELAY) -> None:
        self.delay = delay
        self._pending: dict[str, list[Channel]] = {}
        #: Notifications sent (a counter, for tests and reports).
        self.sent = 0

    @property
    def waiting(self) -> int:
        """Groups whose change is not told yet (it will be within ``delay``)."""
        return len(self._pending)

    def __call__(self, group: str, channels: list[Channel]) -> None:
        first = group not in self._pending
        self._pending[group] = channels
        if first:
            asyncio.get_running_loop().call_later(self.delay, self._fire, group)

    def _fire(self, group: str) -> None:
        channels = self._pending.pop(group, [])
        for channel in channels:
            if channel.active:
                channel.send_oneway(
                    RemotingChannel.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
                )
                self.sent += 1


def send_check_back(channel: Channel, check: CheckBack) -> None:
    """``Broker2Client.checkProducerTransactionState``: a oneway CHECK_TRANSACTION_STATE."""
    channel.send_oneway(
        RemotingChannel.request(RequestCode.CHECK_TRANSACTION_STATE, check.ext_fields, check.body)
    )


def write_path(
    store: WritableStore,
    *,
    region: str = "DefaultRegion",
    trace_on: bool = True,
    consume: ConsumeSettings | None = None,
    timer: DeliveryTimer | None = None,
) -> WritePath:
    """A ``QueryServer(configure=...)`` hook registering the write path over ``store``.

    ``timer``: the delivery timer to arm, when another front door (the gRPC port's SendMessage)
    shares it; by default one of its own."""
    return WritePath(store, region=region, trace_on=trace_on, consume=consume, timer=timer)
