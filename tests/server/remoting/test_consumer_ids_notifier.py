"""NOTIFY_CONSUMER_IDS_CHANGED is gathered per group, so a big group joining costs O(members)."""

from __future__ import annotations

import asyncio

from protocol.codes import RequestCode
from protocol.heartbeat import ClientSubscription
from server.broker.client_channel import ClientChannelInfo
from server.broker.consumer_groups import ConsumerGroups
from server.remoting.write_path import ConsumerIdsNotifier
from tests.support.channels import FakeChannel


def join(groups: ConsumerGroups, channel: FakeChannel, client_id: str) -> None:
    groups.register(
        "G",
        ClientChannelInfo(channel, client_id, "JAVA", 407, 0),
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
        [ClientSubscription(topic="T", subString="*")],
        notify=True,
    )


async def test_ten_thousand_members_joining_at_once_are_each_told_once() -> None:
    notifier = ConsumerIdsNotifier(delay=0.01)
    groups = ConsumerGroups(notifier)
    channels = [FakeChannel(f"10.0.0.1:{i}") for i in range(10_000)]
    for number, channel in enumerate(channels):
        join(groups, channel, f"c{number}")
    await asyncio.sleep(0.1)
    # The broker's rule would be 50,005,000 notifications (each join tells every member so far).
    assert notifier.sent == 10_000
    assert all(len(c.oneway) == 1 for c in channels)
    notice = channels[0].oneway[0]
    assert (notice.code, notice.ext_fields) == (
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        {"consumerGroup": "G"},
    )


async def test_a_later_change_is_told_again_and_a_member_that_left_is_not() -> None:
    notifier = ConsumerIdsNotifier(delay=0.01)
    groups = ConsumerGroups(notifier)
    a, b = FakeChannel(), FakeChannel()
    join(groups, a, "A")
    await asyncio.sleep(0.05)
    join(groups, b, "B")
    groups.channel_closed(a)
    a.active = False
    await asyncio.sleep(0.05)
    assert (len(a.oneway), len(b.oneway)) == (1, 1)
