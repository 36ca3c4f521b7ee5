"""Consumer groups as heartbeats describe them: members, subscriptions, model (``ConsumerManager``).

Each HEART_BEAT registers the client's consumer groups on the channel it came over. A group's
membership changes when a channel joins it, leaves it (UNREGISTER_CLIENT, the channel closing, or
no heartbeat for ``CHANNEL_EXPIRED_MS``) or when its set of subscribed topics changes; on a change
every member is told (``ids_changed``, which the front door turns into NOTIFY_CONSUMER_IDS_CHANGED)
so that each client rebalances the group's queues at once instead of at its next 20 s rebalance.
A group with no member left is forgotten. The rules are 4.9.7's ``ConsumerManager`` and
``ConsumerGroupInfo``:

- a member is new when its channel is; a known channel keeps its entry (a different client id on it
  replaces the entry but is not a change);
- a subscription is replaced only by a higher ``subVersion``; a topic missing from a heartbeat is
  dropped from the group (clients send all of a group's subscriptions in every heartbeat);
- a group's consume type, message model and consume-from-where are those of its last heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.heartbeat import ClientSubscription
from server.broker.client_channel import Channel, ClientChannelInfo
from server.broker.group_members import MemberIndex

log = logging.getLogger(__name__)

#: ``ConsumerManager.CHANNEL_EXPIRED_TIMEOUT``: a member silent this long is dropped (ms).
CHANNEL_EXPIRED_MS = 120_000

CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"


@dataclass(slots=True)
class ConsumerGroup:
    """``ConsumerGroupInfo``: one group's members and what it subscribes."""

    name: str
    consume_type: str | None
    message_model: str | None
    consume_from_where: str | None
    #: topic -> the subscription the group's members last declared.
    subscriptions: dict[str, ClientSubscription] = field(default_factory=dict)
    #: channel id -> member, in the order they joined.
    members: dict[int, ClientChannelInfo] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.members.values()]

    def channels(self) -> list[Channel]:
        return [info.channel for info in self.members.values()]

    def find_member(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.members.values():
            if info.client_id == client_id:
                return info
        return None

    def update_member(
        self, info: ClientChannelInfo, consume_type: str | None, model: str | None, where: str | None
    ) -> bool:
        """Register or refresh ``info``; True when its channel is new to the group."""
        self.consume_type, self.message_model, self.consume_from_where = consume_type, model, where
        old = self.members.get(info.channel.id)
        changed = old is None
        if old is None or old.client_id != info.client_id:
            self.members[info.channel.id] = info
        else:
            old.last_update_ms = info.last_update_ms
        self.last_update_ms = info.last_update_ms
        return changed

    def update_subscriptions(self, subscriptions: list[ClientSubscription], now_ms: int) -> bool:
        """Take a heartbeat's subscriptions; True when a topic was added or dropped."""
        changed = False
        topics = set()
        for sub in subscriptions:
            topic = sub.topic
            if topic is None:
                continue
            topics.add(topic)
            old = self.subscriptions.get(topic)
            if old is None:
                self.subscriptions[topic] = sub
                changed = True
            elif sub.subVersion > old.subVersion:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in topics]:
            del self.subscriptions[topic]
            changed = True
        self.last_update_ms = now_ms
        return changed


#: Called with a group and its members when its membership or subscribed topics changed.
IdsChanged = Callable[[str, list[Channel]], None]


class ConsumerGroups:
    """Every consumer group with a live member (``ConsumerManager``)."""

    def __init__(self, ids_changed: IdsChanged | None = None) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        #: Each member's groups by connection, and the members in refresh order (closing and expiry
        #: without a look at every group).
        self._index = MemberIndex()
        self._ids_changed = ids_changed or (lambda group, channels: None)
        #: Joins registered with ``log_join=False``: the caller logs them as one count.
        self.unlogged_joins = 0

    def get(self, group: str) -> ConsumerGroup | None:
        return self.groups.get(group)

    def subscription(self, group: str, topic: str) -> ClientSubscription | None:
        info = self.groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def find_member(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.groups.get(group)
        return None if info is None else info.find_member(client_id)

    def register(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: str | None,
        message_model: str | None,
        consume_from_where: str | None,
        subscriptions: list[ClientSubscription],
        *,
        notify: bool,
        log_join: bool = True,
    ) -> bool:
        """A heartbeat's consumer group: True when membership or topics changed (members told).

        ``log_join``: a join is logged on a line of its own; else it is counted in ``unlogged_joins``."""
        consumer_group = self.groups.get(group)
        if consumer_group is None:
            consumer_group = self.groups[group] = ConsumerGroup(
                group, consume_type, message_model, consume_from_where
            )
        joined = consumer_group.update_member(info, consume_type, message_model, consume_from_where)
        self._index.refreshed(group, info.channel.id, consumer_group.members[info.channel.id], joined=joined)
        resubscribed = consumer_group.update_subscriptions(subscriptions, info.last_update_ms)
        if joined and not log_join:
            self.unlogged_joins += 1
        elif joined:
            log.info(
                "consumer %s joined group %s from %s", info.client_id, group, info.channel.client_address
            )
        if (joined or resubscribed) and notify:
            self._ids_changed(group, consumer_group.channels())
        return joined or resubscribed

    def unregister(self, group: str, channel: Channel, *, notify: bool) -> None:
        """UNREGISTER_CLIENT: ``channel`` leaves ``group``; the rest are told (even if it was not in it,
        as the broker tells them)."""
        consumer_group = self.groups.get(group)
        if consumer_group is None:
            return
        if consumer_group.members.pop(channel.id, None) is not None:
            self._index.left(channel.id, group)
        if not consumer_group.members:
            del self.groups[group]
        if notify:
            self._ids_changed(group, consumer_group.channels())

    def channel_closed(self, channel: Channel) -> list[str]:
        """The channel closed: it leaves every group it was in; their other members are told."""
        left = []
        for name in self._index.closed(channel.id):
            consumer_group = self.groups.get(name)
            if consumer_group is None or consumer_group.members.pop(channel.id, None) is None:
                continue
            left.append(name)
            if not consumer_group.members:
                del self.groups[name]
            self._ids_changed(name, consumer_group.channels())
        return left

    def expire(self, now_ms: int) -> list[ClientChannelInfo]:
        """``scanNotActiveChannel``: drop members silent over ``CHANNEL_EXPIRED_MS`` and return them
        (the caller closes their channels); groups left empty are forgotten, nobody is told. Only
        the members refreshed longest ago are looked at, up to the first one still live."""
        expired = []
        for name, channel_id, info in self._index.silent(now_ms, CHANNEL_EXPIRED_MS):
            consumer_group = self.groups.get(name)
            if consumer_group is None or consumer_group.members.get(channel_id) is not info:
                continue
            del consumer_group.members[channel_id]
            self._index.left(channel_id, name)
            expired.append(info)
            log.warning(
                "consumer %s of group %s sent no heartbeat for %d s: dropped",
                info.client_id,
                name,
                CHANNEL_EXPIRED_MS // 1000,
            )
            if not consumer_group.members:
                del self.groups[name]
        return expired

    def groups_of_topic(self, topic: str) -> list[str]:
        """``queryTopicConsumeByWho``: the groups subscribing ``topic``."""
        return [name for name, g in self.groups.items() if topic in g.subscriptions]
