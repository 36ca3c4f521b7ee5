"""Producer groups as heartbeats describe them (``ProducerManager``).

The broker needs to know a producer group's live connections for one thing above all: asking a
producer of the group whether a half (transactional) message it left undecided should be committed
(CHECK_TRANSACTION_STATE). The rules are 4.9.7's: a heartbeat registers or refreshes the client on
its channel, UNREGISTER_CLIENT or the channel closing removes it, a member silent for
``CHANNEL_EXPIRED_MS`` is dropped (its channel closed by the caller), an empty group is forgotten,
and the channel asked is picked round-robin among the group's open ones.
"""

from __future__ import annotations

import itertools
import logging

from server.broker.client_channel import Channel, ClientChannelInfo
from server.broker.consumer_groups import CHANNEL_EXPIRED_MS

log = logging.getLogger(__name__)


class ProducerGroups:
    """Every producer group with a live member."""

    def __init__(self) -> None:
        #: group -> channel id -> member, in the order they joined.
        self.groups: dict[str, dict[int, ClientChannelInfo]] = {}
        self._turn = itertools.count()

    def register(self, group: str, info: ClientChannelInfo) -> None:
        members = self.groups.setdefault(group, {})
        old = members.get(info.channel.id)
        if old is None:
            members[info.channel.id] = info
            log.info(
                "producer %s joined group %s from %s", info.client_id, group, info.channel.client_address
            )
        else:
            old.last_update_ms = info.last_update_ms

    def unregister(self, group: str, channel: Channel) -> None:
        members = self.groups.get(group)
        if members is None:
            return
        members.pop(channel.id, None)
        if not members:
            del self.groups[group]

    def channel_closed(self, channel: Channel) -> None:
        for group in list(self.groups):
            self.unregister(group, channel)

    def expire(self, now_ms: int) -> list[ClientChannelInfo]:
        """Drop members silent over ``CHANNEL_EXPIRED_MS`` and return them (the caller closes them)."""
        expired = []
        for group, members in list(self.groups.items()):
            for channel_id, info in list(members.items()):
                if now_ms - info.last_update_ms > CHANNEL_EXPIRED_MS:
                    del members[channel_id]
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
        for members in self.groups.values():
            for info in members.values():
                if info.client_id == client_id:
                    return info.channel
        return None
