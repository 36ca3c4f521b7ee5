"""The broker's consume-side state in one place, shared by every front door (``BrokerController``).

Consumer groups, producer groups, subscription-group configs, committed offsets and queue locks are
one broker's, whichever protocol a client speaks: the remoting processors (and the gRPC activities)
all take this object. It holds no sockets: it is driven by calls (a heartbeat, a channel closing, a
``tick`` of the clock) and talks back through the ``Channel``s it was given.

Persistence follows the broker: subscription groups are saved on every change, committed offsets
every ``OFFSET_FLUSH_MS`` (``flushConsumerOffsetInterval``) and at ``close``; both files are the
broker's own, so the real broker opened on the store afterwards resumes every group where it stood.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from protocol.heartbeat import ClientHeartbeat
from server.broker.client_channel import Channel, ClientChannelInfo
from server.broker.consumer_groups import ConsumerGroups, IdsChanged
from server.broker.creation_limits import CreationBudget, CreationLimits
from server.broker.decided_halves import DecidedHalves
from server.broker.offset_moved import offset_moved_record
from server.broker.producer_groups import ProducerGroups
from server.broker.rebalance_locks import RebalanceLocks
from server.broker.transactions import TransactionSettings
from server.broker.writable_store import WritableStore
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.persister import ConfigPersister
from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable, is_system_group
from store.config.topics import PERM_READ, PERM_WRITE, TopicConfig

log = logging.getLogger(__name__)
#: Groups of one heartbeat whose joins get a log line each; the joins past them get one line
#: together, so a heartbeat naming thousands of groups writes no more lines than this and one.
JOIN_LINES_PER_HEARTBEAT = 10

#: ``flushConsumerOffsetInterval``: committed offsets are written this often (ms).
OFFSET_FLUSH_MS = 5_000
#: ``ClientHousekeepingService``: how often silent clients are looked for (ms).
HOUSEKEEPING_MS = 10_000

#: ``MixAll`` prefixes of a group's retry and dead-letter topics.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


@dataclass(slots=True)
class ConsumeSettings:
    """The broker options of the consume side (``BrokerConfig``)."""

    #: ``autoCreateSubscriptionGroup``.
    auto_create_subscription_group: bool = True
    #: ``enablePropertyFilter``: SQL92 subscriptions of remoting consumers are served (the broker's
    #: default is off; ``serve --writable`` and the test kit turn it on unless told otherwise).
    enable_property_filter: bool = True
    #: ``notifyConsumerIdsChangedEnable``: tell a group's members when it changes.
    notify_consumer_ids_changed: bool = True
    #: What clients may make the broker create by themselves (``creation_limits``).
    creation: CreationLimits = field(default_factory=CreationLimits)
    #: ``transactionCheckInterval``, ``transactionTimeOut``, ``transactionCheckMax``,
    #: ``rejectTransactionMessage``.
    transactions: TransactionSettings = field(default_factory=TransactionSettings)


class BrokerController:
    """Consumer and producer groups, group configs, offsets and locks over one writable store."""

    def __init__(
        self,
        store: WritableStore,
        *,
        settings: ConsumeSettings | None = None,
        ids_changed: IdsChanged | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or ConsumeSettings()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        config_dir = store.config.store_path_root_dir / "config"
        self._ids_changed = ids_changed
        self.consumers = ConsumerGroups(self._notify_ids_changed)
        self.producers = ProducerGroups()
        self.groups = SubscriptionGroupTable.load(config_dir / "subscriptionGroup.json")
        self._group_persister = ConfigPersister(self.groups)
        self.offsets = ConsumerOffsetTable.load(config_dir / "consumerOffset.json")
        self.locks = RebalanceLocks()
        #: The half messages END_TRANSACTION already decided (both front doors: one table).
        self.decided_halves = DecidedHalves()
        self._watched: set[int] = set()
        #: What each connection created by itself, against ``settings.creation``.
        self.creation = CreationBudget(self.settings.creation)
        store.topic_budget = self.creation
        self.closed = False

    # -- notifications --------------------------------------------------------------------------

    def set_ids_changed(self, ids_changed: IdsChanged) -> None:
        """Who tells a group's members that it changed (the front door's NOTIFY_CONSUMER_IDS_CHANGED)."""
        self._ids_changed = ids_changed

    def _notify_ids_changed(self, group: str, channels: list[Channel]) -> None:
        if self.settings.notify_consumer_ids_changed and self._ids_changed is not None:
            self._ids_changed(group, channels)

    # -- subscription groups --------------------------------------------------------------------

    def find_group(self, group: str, connection: int | None = None) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: created when missing if auto-creation allows it, within
        what ``connection`` (and the broker) may create (``creation_limits``)."""
        config = self.groups.get(group)
        if config is not None:
            return config
        auto = self.settings.auto_create_subscription_group
        if (auto or is_system_group(group)) and not self.creation.allow(
            "group", group, connection, len(self.groups.groups)
        ):
            return None
        config = self.groups.find(group, auto_create=auto)
        if config is not None:
            self.creation.created(connection)
        return config

    def create_topic_in_send_back(
        self, topic: str, queue_nums: int, sys_flag: int = 0, connection: int | None = None
    ) -> TopicConfig | None:
        """``createTopicInSendMessageBackMethod``: ``topic`` as it is, else created readable and
        writable with ``queue_nums`` queues (saved off the loop: ``store.topic_changes``); None when
        ``creation_limits`` refuse a heartbeat's connection one more topic."""
        existing = self.store.topic_config(topic)
        if existing is not None:
            return existing
        # Only a heartbeat's retry topic is a client's creation (``connection``): a send-back's retry
        # or dead-letter topic holds a message of a group that exists (whose creation was counted).
        if connection is not None and not self.creation.allow(
            "topic", topic, connection, len(self.store.topics.topics)
        ):
            return None
        config = TopicConfig(topic, queue_nums, queue_nums, PERM_READ | PERM_WRITE, topic_sys_flag=sys_flag)
        self.store.topics.put(config, self.clock())
        self.store.topics.save_soon()
        self.creation.created(connection)
        return config

    def create_retry_topic(
        self, group: str, queue_nums: int, sys_flag: int = 0, connection: int | None = None
    ) -> TopicConfig | None:
        """The group's ``%RETRY%`` topic, created if missing (None: ``creation_limits`` refused it)."""
        return self.create_topic_in_send_back(retry_topic(group), queue_nums, sys_flag, connection)

    def may_commit(self, group: str, connection: int | None = None) -> bool:
        """May an offset update of ``group`` be kept? A group the broker knows (its config, or offsets
        already committed) always; an unknown one only with ``autoCreateSubscriptionGroup`` and
        within ``creation_limits`` (it becomes a group of the offset table, kept across restarts)."""
        if self.groups.get(group) is not None or self.offsets.has_group(group):
            return True
        if not self.settings.auto_create_subscription_group:
            return False
        if not self.creation.allow("group", group, connection, self.offsets.group_count()):
            return False
        self.creation.created(connection)
        return True

    # -- clients --------------------------------------------------------------------------------

    def _watch(self, channel: Channel) -> None:
        if channel.id not in self._watched:
            self._watched.add(channel.id)
            channel.on_close(self.channel_closed)

    def heartbeat(self, channel: Channel, heartbeat: ClientHeartbeat, language: str, version: int) -> None:
        """``ClientManageProcessor.heartBeat``: register the client's consumer and producer groups."""
        for _ in self.heartbeat_steps(channel, heartbeat, language, version):
            pass

    def heartbeat_steps(
        self, channel: Channel, heartbeat: ClientHeartbeat, language: str, version: int
    ) -> Iterator[None]:
        """``heartbeat`` one consumer group at a time: it yields after each, so that a caller can let
        other requests run between slices of a heartbeat naming thousands of groups (a 1 MB one
        registered 1,582 new groups and retry topics in 60 ms). The broker, too, handles a heartbeat
        on a pool thread beside other requests, not as one atomic step. Should the connection close
        meanwhile, the rest is not registered (its groups would keep a dead connection)."""
        # the groups and retry topics it creates are saved in one write of each table, after it
        with self._group_persister.held(), self.store.topic_saves_held():
            yield from self._heartbeat(channel, heartbeat, language, version)

    def _heartbeat(
        self, channel: Channel, heartbeat: ClientHeartbeat, language: str, version: int
    ) -> Iterator[None]:
        now = self.clock()
        client_id = heartbeat.clientID or ""
        self._watch(channel)
        unlogged = self.consumers.unlogged_joins
        for i, data in enumerate(heartbeat.consumerDataSet or ()):
            group = data.groupName
            if group is None:
                continue
            config = self.find_group(group, channel.id)
            notify = True
            if config is not None:
                notify = config.notify_consumer_ids_changed_enable
                # ``TopicSysFlag.buildSysFlag(false, true)`` for a unit-mode consumer.
                self.create_retry_topic(group, config.retry_queue_nums, 2 if data.unitMode else 0, channel.id)
            info = ClientChannelInfo(channel, client_id, language, version, now)
            self.consumers.register(
                group,
                info,
                data.consumeType,
                data.messageModel,
                data.consumeFromWhere,
                list(data.subscriptionDataSet or ()),
                notify=notify,
                log_join=i < JOIN_LINES_PER_HEARTBEAT,
            )
            yield
            if not channel.active:
                return
        if (more := self.consumers.unlogged_joins - unlogged) > 0:
            log.info(
                "consumer %s joined %d more groups from %s (one heartbeat; not listed one by one)",
                client_id,
                more,
                channel.client_address,
            )
        for producer in heartbeat.producerDataSet or ():
            if producer.groupName is not None:
                self.producers.register(
                    producer.groupName, ClientChannelInfo(channel, client_id, language, version, now)
                )

    def unregister(self, channel: Channel, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT: the client leaves the named groups."""
        if producer_group is not None:
            self.producers.unregister(producer_group, channel)
        if consumer_group is not None:
            config = self.groups.get(consumer_group)
            notify = True if config is None else config.notify_consumer_ids_changed_enable
            self.consumers.unregister(consumer_group, channel, notify=notify)

    def channel_closed(self, channel: Channel) -> None:
        """The connection closed: the client leaves every group it was in."""
        self._watched.discard(channel.id)
        self.creation.forget(channel.id)
        self.consumers.channel_closed(channel)
        self.producers.channel_closed(channel)

    def expire_silent(self) -> None:
        """``scanNotActiveChannel``: clients silent for 120 s are dropped and their channels closed."""
        now = self.clock()
        for info in self.consumers.expire(now) + self.producers.expire(now):
            info.channel.close()

    # -- offsets --------------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.query(group, topic, queue_id)

    def offset_moved(
        self, group: str | None, topic: str | None, queue_id: int, offset_request: int, offset_new: int
    ) -> None:
        """``generateOffsetMovedEvent``: the OFFSET_MOVED_EVENT record of a PULL_OFFSET_MOVED answer.

        Best effort, as the broker's (it logs a failed put and answers the pull anyway)."""
        store = self.store
        record = offset_moved_record(
            group,
            topic,
            queue_id,
            store.config.broker_name,
            offset_request,
            offset_new,
            broker_host=store.writer.store_host,
            broker_port=store.writer.store_port,
            now=self.clock(),
        )
        try:
            store.put([record])
        except Exception as exc:  # a full disk or a cut store: the pull's answer stands
            log.warning("OFFSET_MOVED_EVENT for %s %s:%d not written: %s", group, topic, queue_id, exc)

    def flush(self) -> None:
        """Write committed offsets if they changed (the broker's periodic persist)."""
        try:
            self.offsets.save()
        except OSError as exc:
            log.error("cannot write %s (retried at the next flush): %s", self.offsets.path, exc)

    def close(self) -> None:
        """Write what is unsaved; the store itself is closed by its owner."""
        if self.closed:
            return
        self.closed = True
        try:
            self.flush()
        finally:
            self._group_persister.close()  # whatever it has not written yet, written now
