"""Consumer and producer groups as 4.9.7's ConsumerManager / ProducerManager keep them."""

from __future__ import annotations

from protocol.heartbeat import ClientSubscription
from server.broker.client_channel import ClientChannelInfo
from server.broker.consumer_groups import CHANNEL_EXPIRED_MS, ConsumerGroups
from server.broker.producer_groups import ProducerGroups
from tests.support.channels import FakeChannel


def member(channel: FakeChannel, client_id: str, now: int = 1_000) -> ClientChannelInfo:
    return ClientChannelInfo(channel, client_id, "JAVA", 407, now)


def sub(topic: str, expression: str = "*", version: int = 1) -> ClientSubscription:
    return ClientSubscription(topic=topic, subString=expression, subVersion=version)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def __call__(self, group: str, channels: list) -> None:
        self.calls.append((group, sorted(c.id for c in channels)))


def register(
    groups: ConsumerGroups, channel: FakeChannel, client_id: str, subs: list, now: int = 1_000
) -> bool:
    return groups.register(
        "G",
        member(channel, client_id, now),
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_FIRST_OFFSET",
        subs,
        notify=True,
    )


def test_a_new_member_and_a_new_topic_are_changes_told_to_every_member() -> None:
    told = Recorder()
    groups = ConsumerGroups(told)
    a, b = FakeChannel(), FakeChannel()
    assert register(groups, a, "A", [sub("T")]) is True
    assert told.calls == [("G", [a.id])]
    assert register(groups, a, "A", [sub("T")]) is False  # the same heartbeat again: no change
    assert register(groups, b, "B", [sub("T")]) is True
    assert told.calls[-1] == ("G", sorted([a.id, b.id]))
    assert groups.get("G").client_ids() == ["A", "B"]  # type: ignore[union-attr]


def test_subscriptions_follow_the_heartbeat_and_only_a_higher_sub_version_replaces_one() -> None:
    groups = ConsumerGroups()
    a = FakeChannel()
    register(groups, a, "A", [sub("T", "TagA", 5), sub("U")])
    assert register(groups, a, "A", [sub("T", "TagB", 4), sub("U")]) is False
    assert groups.subscription("G", "T").subString == "TagA"  # type: ignore[union-attr]
    register(groups, a, "A", [sub("T", "TagB", 6), sub("U")])
    assert groups.subscription("G", "T").subString == "TagB"  # type: ignore[union-attr]
    # A topic left out of a heartbeat is dropped, and that is a change.
    assert register(groups, a, "A", [sub("T", "TagB", 6)]) is True
    assert groups.subscription("G", "U") is None
    assert groups.groups_of_topic("T") == ["G"] and groups.groups_of_topic("U") == []


def test_a_closed_channel_leaves_its_groups_and_the_rest_are_told() -> None:
    told = Recorder()
    groups = ConsumerGroups(told)
    a, b = FakeChannel(), FakeChannel()
    register(groups, a, "A", [sub("T")])
    register(groups, b, "B", [sub("T")])
    told.calls.clear()
    assert groups.channel_closed(a) == ["G"]
    assert told.calls == [("G", [b.id])]
    assert groups.channel_closed(a) == []  # twice: nothing more
    groups.channel_closed(b)
    assert groups.get("G") is None  # the last member gone, the group is forgotten


def test_unregister_tells_the_others_even_when_the_channel_was_not_a_member() -> None:
    told = Recorder()
    groups = ConsumerGroups(told)
    a, stranger = FakeChannel(), FakeChannel()
    register(groups, a, "A", [sub("T")])
    told.calls.clear()
    groups.unregister("G", stranger, notify=True)
    assert told.calls == [("G", [a.id])]
    groups.unregister("G", a, notify=False)
    assert groups.get("G") is None and len(told.calls) == 1


def test_members_silent_past_the_expiry_are_dropped_without_telling_anyone() -> None:
    told = Recorder()
    groups = ConsumerGroups(told)
    old, fresh = FakeChannel(), FakeChannel()
    register(groups, old, "OLD", [sub("T")], now=0)
    register(groups, fresh, "NEW", [sub("T")], now=100_000)
    told.calls.clear()
    assert groups.expire(CHANNEL_EXPIRED_MS) == []  # exactly the limit is not over it
    expired = groups.expire(CHANNEL_EXPIRED_MS + 1)
    assert [info.client_id for info in expired] == ["OLD"]
    assert groups.get("G").client_ids() == ["NEW"]  # type: ignore[union-attr]
    assert told.calls == []


def test_a_heartbeat_refreshes_a_member_so_it_does_not_expire() -> None:
    groups = ConsumerGroups()
    a = FakeChannel()
    register(groups, a, "A", [sub("T")], now=0)
    register(groups, a, "A", [sub("T")], now=100_000)
    assert groups.expire(CHANNEL_EXPIRED_MS + 1) == []


def test_producer_groups_register_expire_and_hand_out_open_channels_in_turn() -> None:
    producers = ProducerGroups()
    a, b = FakeChannel(), FakeChannel()
    producers.register("P", member(a, "A", 0))
    producers.register("P", member(b, "B", 50_000))
    assert [producers.available_channel("P") for _ in range(4)] in ([a, b, a, b], [b, a, b, a])
    a.active = False
    assert {producers.available_channel("P") for _ in range(3)} == {b}
    assert producers.available_channel("nobody") is None
    assert [i.client_id for i in producers.expire(CHANNEL_EXPIRED_MS + 1)] == ["A"]
    assert producers.find_channel("B") is b
    producers.channel_closed(b)
    assert producers.members("P") == [] and "P" not in producers.groups


class _NoScan(dict):  # type: ignore[type-arg]
    """A group table that fails a look at every group (what a closing connection must not make)."""

    def _scan(self, *_: object) -> None:
        raise AssertionError("looked at every group")

    items = keys = values = __iter__ = _scan  # type: ignore[assignment]


def _join(groups: ConsumerGroups, name: str, channel: FakeChannel, client_id: str, now: int = 1_000) -> None:
    groups.register(
        name, member(channel, client_id, now), "CONSUME_PASSIVELY", "CLUSTERING", "X", [sub("T")], notify=True
    )


def test_a_closing_connection_leaves_its_own_groups_without_a_look_at_every_group() -> None:
    """2,000 groups: the closing connection's three are left (their members told), the others not
    looked at (at 50,000 groups that look was 250 ms per closed connection, 48 ms for producers)."""
    told = Recorder()
    groups, producers = ConsumerGroups(told), ProducerGroups()
    a, b = FakeChannel(), FakeChannel()
    for i in range(2_000):
        _join(groups, f"G{i}", b, "B")
        producers.register(f"P{i}", member(b, "B"))
    for name in ("G7", "G1500", "Mine"):
        _join(groups, name, a, "A")
    producers.register("P7", member(a, "A"))
    groups.unregister("G7", a, notify=False)  # left before it closes: not left again
    told.calls.clear()
    groups.groups = _NoScan(groups.groups)
    producers.groups = _NoScan(producers.groups)
    assert groups.channel_closed(a) == ["G1500", "Mine"]
    producers.channel_closed(a)
    assert told.calls == [("G1500", [b.id]), ("Mine", [])]
    assert dict.get(groups.groups, "Mine") is None and dict.get(groups.groups, "G1500").client_ids() == ["B"]
    assert [info.client_id for info in dict.__getitem__(producers.groups, "P7").values()] == ["B"]
    assert groups.channel_closed(a) == []  # twice: nothing more
    assert dict.__len__(groups.groups) == 2_000 and dict.__len__(producers.groups) == 2_000


def test_a_member_expired_or_unregistered_is_not_left_again_when_its_connection_closes() -> None:
    told = Recorder()
    groups, producers = ConsumerGroups(told), ProducerGroups()
    a, b = FakeChannel(), FakeChannel()
    _join(groups, "OLD", a, "A", now=0)
    _join(groups, "KEPT", a, "A", now=100_000)
    _join(groups, "OLD", b, "B", now=100_000)
    producers.register("P", member(a, "A", 0))
    producers.register("Q", member(a, "A", 100_000))
    assert [info.client_id for info in groups.expire(CHANNEL_EXPIRED_MS + 1)] == ["A"]
    assert [info.client_id for info in producers.expire(CHANNEL_EXPIRED_MS + 1)] == ["A"]
    told.calls.clear()
    assert groups.channel_closed(a) == ["KEPT"]
    assert told.calls == [("KEPT", [])]
    producers.channel_closed(a)
    assert "Q" not in producers.groups and "P" not in producers.groups
    _join(groups, "OLD", a, "A2", now=200_000)  # the same connection joins again: left at its close
    assert groups.channel_closed(a) == ["OLD"] and groups.get("OLD").client_ids() == ["B"]  # type: ignore[union-attr]


def test_expiry_looks_at_the_silent_members_only() -> None:
    """2,000 live groups and two silent members: the housekeeping's expiry (every 10 s) drops the
    two without a look at every group (98 ms at 50,000 consumer and producer groups); a member
    refreshed since it joined is live whatever its place."""
    groups, producers = ConsumerGroups(), ProducerGroups()
    a, b, c = FakeChannel(), FakeChannel(), FakeChannel()
    _join(groups, "Early", c, "C", now=0)
    producers.register("PEarly", member(c, "C", 0))
    _join(groups, "Silent", a, "A", now=0)
    producers.register("PSilent", member(a, "A", 0))
    for i in range(2_000):
        _join(groups, f"G{i}", b, "B", now=50_000)
        producers.register(f"P{i}", member(b, "B", 50_000))
    _join(groups, "Early", c, "C", now=60_000)  # refreshed: live
    producers.register("PEarly", member(c, "C", 60_000))
    groups.groups = _NoScan(groups.groups)
    producers.groups = _NoScan(producers.groups)
    assert [i.client_id for i in groups.expire(CHANNEL_EXPIRED_MS + 1)] == ["A"]
    assert [i.client_id for i in producers.expire(CHANNEL_EXPIRED_MS + 1)] == ["A"]
    assert dict.get(groups.groups, "Silent") is None and dict.get(producers.groups, "PSilent") is None
    assert groups.expire(CHANNEL_EXPIRED_MS + 1) == [] and producers.expire(CHANNEL_EXPIRED_MS + 1) == []
    dropped = groups.expire(CHANNEL_EXPIRED_MS + 50_001)
    assert len(dropped) == 2_000 and dict.__len__(groups.groups) == 1  # "Early" (60,000) still live
    assert len(producers.expire(CHANNEL_EXPIRED_MS + 60_001)) == 2_001
