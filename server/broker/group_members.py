"""The two indexes a group table keeps over its members (``ConsumerGroups``, ``ProducerGroups``).

Which groups a connection is a member of, so that a closing connection leaves its own groups
without a look at every group (at 50,000 groups that look held the loop 48-250 ms per connection
closed); and the members least recently refreshed first, so that the housekeeping's expiry looks
at the silent ones only and stops at the first live one (a look at every member of 50,000 groups
held the loop ~50 ms every 10 s). Both tables follow the same rules over them; the groups
themselves, and what a member is, stay theirs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from server.broker.client_channel import ClientChannelInfo


class MemberIndex:
    """(group, channel id) memberships, by channel and in refresh order."""

    def __init__(self) -> None:
        #: channel id -> the groups it is a member of, in the order it joined them.
        self._of_channel: dict[int, dict[str, None]] = {}
        #: (group, channel id) -> member, least recently refreshed first.
        self._by_refresh: OrderedDict[tuple[str, int], ClientChannelInfo] = OrderedDict()

    def refreshed(self, group: str, channel_id: int, member: ClientChannelInfo, *, joined: bool) -> None:
        """A heartbeat of ``member`` in ``group`` (``joined``: its first there): refreshed last."""
        if joined:
            self._of_channel.setdefault(channel_id, {})[group] = None
        key = (group, channel_id)
        self._by_refresh[key] = member
        self._by_refresh.move_to_end(key)

    def left(self, channel_id: int, group: str) -> None:
        """The channel is no longer a member of ``group``."""
        self._by_refresh.pop((group, channel_id), None)
        of_channel = self._of_channel.get(channel_id)
        if of_channel is not None:
            of_channel.pop(group, None)
            if not of_channel:
                del self._of_channel[channel_id]

    def groups_of(self, channel_id: int) -> list[str]:
        """The groups the channel is a member of, in the order it joined them."""
        return list(self._of_channel.get(channel_id, ()))

    def closed(self, channel_id: int) -> list[str]:
        """The channel closed: its memberships are forgotten; the groups it was in, as joined."""
        groups = list(self._of_channel.pop(channel_id, ()))
        for group in groups:
            self._by_refresh.pop((group, channel_id), None)
        return groups

    def silent(self, now_ms: int, expired_ms: int) -> Iterator[tuple[str, int, ClientChannelInfo]]:
        """(group, channel id, member) of each member not refreshed for over ``expired_ms``, least
        recently refreshed first, each taken out of the refresh order as it is given; stops at the
        first one still live. The caller checks the member is still the group's (``left`` as it
        drops it)."""
        by_refresh = self._by_refresh
        while by_refresh:
            key = next(iter(by_refresh))
            member = by_refresh[key]
            if now_ms - member.last_update_ms <= expired_ms:
                return
            del by_refresh[key]
            yield key[0], key[1], member
