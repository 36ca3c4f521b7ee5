"""Producer groups as heartbeats describe them (``ProducerManager``).

The broker needs to know a producer group's live connections for one thing above all: asking a
producer of the group whether a half (transactional) message it left undecided should be committed
(CHECK_TRANSACTION_STATE). The rules are 4.9.7's: a heartbeat registers or refreshes the client on
its channel, UNREGISTER_CLIENT or the channel closing removes it, a member silent for
``CHANNEL_EXPIRED_MS`` is dropped (its channel closed by the caller), an empty group is forgotten,
and the channel asked is picked round-robin among the group's open ones.

The second use is REQUEST-REPLY: a reply is pushed to the connection of the client named by its
``REPLY_TO_CLIENT`` (``findChannel``). As the broker's ``clientChannelTable``, that is one channel per
client id: the one of the client's latest new registration (a client on a second connection takes
it over). The broker forgets the client id as soon as the client leaves any one group, even while it
is still registered in another (one of a client's two producers shut down: replies to the other are
then refused until it reconnects); here the id stays routed while the client has a group on a live
registration, falling back to its other connection when the one it was mapped to goes.
"""

from __future__ import annotations

import itertools
import logging

from server.broker.client_channel import Channel, ClientChannelInfo
from server.broker.consumer_groups import CHANNEL_EXPIRED_MS
from server.broker.group_members import MemberIndex

log = logging.getLogger(__name__)


class ProducerGroups:
    """Every producer group with a live member."""

    def __init__(self) -> None:
        #: group -> channel id -> member, in the order they joined.
        self.groups: dict[str, dict[int, ClientChannelInfo]] = {}
        #: client id -> the channel its latest new registration came on (``clientChannelTable``).
        self.clients: dict[str, Channel] = {}
        #: client id -> channel id -> (channel, how many groups it is registered in there).
        self._registrations: dict[str, dict[int, tuple[Channel, int]]] = {}
        #: Each member's groups by connection, and the members in refresh order (closing and expiry
        #: without a look at every group).
        self._index = MemberIndex()
        self._turn = itertools.count()

    def register(self, group: str, info: ClientChannelInfo) -> None:
        members = self.groups.setdefault(group, {})
        old = members.get(info.channel.id)
        self._index.refreshed(group, info.channel.id, info if old is None else old, joined=old is None)
        if old is None:
            members[info.channel.id] = info
            self.clients[info.client_id] = info.channel
            on = self._registrations.setdefault(info.client_id, {})
            _, count = on.get(info.channel.id, (info.channel, 0))
            on[info.channel.id] = (info.channel, count + 1)
            log.info(
                "producer %s joined group %s from %s", info.client_id, group, info.channel.client_address
            )
        else:
            old.last_update_ms = info.last_update_ms

    def unregister(self, group: str, channel: Channel) -> None:
        members = self.groups.get(group)
        if members is None:
            return
        info = members.pop(channel.id, None)
        if info is not None:
            self._forget_client(info)
            self._index.left(channel.id, group)
        if not members:
            del self.groups[group]

    def _forget_client(self, info: ClientChannelInfo) -> None:
        """One registration of ``info``'s client is gone: its id routes to a channel it is still
        registered on (the latest), or nowhere. O(1) but for a client on many connections."""
        on = self._registrations.get(info.client_id)
        if on is None or info.channel.id not in on:
            return
        channel, count = on[info.channel.id]
        if count > 1:
            on[info.channel.id] = (channel, count - 1)
            return
        del on[info.channel.id]
        if not on:
            del self._registrations[info.client_id]
            self.clients.pop(info.client_id, None)
        elif self.clients.get(info.client_id) is channel:
            self.clients[info.client_id] = next(reversed(on.values()))[0]

    def channel_closed(self, channel: Channel) -> None:
        for group in self._index.groups_of(channel.id):
            self.unregister(group, channel)

    def expire(self, now_ms: int) -> list[ClientChannelInfo]:
        """Drop members silent over ``CHANNEL_EXPIRED_MS`` and return them (the caller closes them):
        the members refreshed longest ago, up to the first one still live."""
        expired = []
        for group, channel_id, info in self._index.silent(now_ms, CHANNEL_EXPIRED_MS):
            members = self.groups.get(group)
            if members is None or members.get(channel_id) is not info:
                continue
            del members[channel_id]
            self._forget_client(info)
            self._index.left(channel_id, group)
            expired.append(info)
            if not members:
                del self.groups[group]
        return expired

    def members(self, group: str) -> list[ClientChannelInfo]:
        return list(self.groups.get(group, {}).values())

    def available_channel(self, group: str) -> Channel | None:
        """``getAvailableChannel``: an open channel of the group, taken in turn; None if none is open."""
        channels = [info.channel for info in self.groups.get(group, {}).values() if info.channel.active]
        if not channels:
            return None
        return channels[next(self._turn) % len(channels)]

    def find_channel(self, client_id: str) -> Channel | None:
        """``findChannel``: the connection of the client with this id, None if it has none."""
        return self.clients.get(client_id)
