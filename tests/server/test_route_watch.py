"""``RouteWatch``: a broker comes back once every client told its routes was told, three times, that
it is gone (``ANSWERS_TO_SEE_GONE``).

Sans-IO but for the wait, which a fake clock and explicit answers drive: nothing here depends on
how fast the machine is.
"""

from __future__ import annotations

import asyncio
import tracemalloc

from server.namesrv.route_watch import ANSWERS_TO_SEE_GONE, MAX_TOPICS_PER_PEER, RouteWatch

BOTH = ("broker-a", "broker-b")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_answers_without_the_broker_per_topic_each_client_was_told() -> None:
    watch = RouteWatch(Clock())
    watch.answered("c1:1", "T", BOTH)
    watch.answered("c1:1", "U", ["broker-b"])  # never named broker-a: not waited for
    watch.answered("c2:2", "T", BOTH)
    watch.broker_left("broker-a")
    assert watch.waiting_for("broker-a") == [("c1:1", "T"), ("c2:2", "T")]
    for _ in range(ANSWERS_TO_SEE_GONE - 1):
        watch.answered("c1:1", "T", ["broker-b"])
        watch.answered("c1:1", "U", ["broker-b"])  # another topic's answers do not count for T
    assert watch.waiting_for("broker-a") == [("c1:1", "T"), ("c2:2", "T")]
    watch.answered("c1:1", "T", [])  # the topic unknown now: gone all the same
    assert watch.waiting_for("broker-a") == [("c2:2", "T")]
    for _ in range(ANSWERS_TO_SEE_GONE):
        watch.answered("c2:2", "T", ["broker-b"])
    assert watch.waiting_for("broker-a") == []


def test_a_closed_connection_is_not_waited_for() -> None:
    watch = RouteWatch(Clock())
    watch.answered("c1:1", "T", BOTH)
    watch.broker_left("broker-a")
    watch.forget("c1:1")
    assert watch.waiting_for("broker-a") == []


def test_seen_gone_waits_for_the_answers_then_for_no_one() -> None:
    async def scenario() -> list[object]:
        watch = RouteWatch(Clock())
        watch.answered("c1:1", "T", BOTH)
        watch.broker_left("broker-a")
        waiting = asyncio.ensure_future(watch.seen_gone("broker-a", max_wait=60))
        steps: list[object] = []
        for _ in range(ANSWERS_TO_SEE_GONE):
            await asyncio.sleep(0)
            steps.append(waiting.done())
            watch.answered("c1:1", "T", ["broker-b"])
        steps.append(await asyncio.wait_for(waiting, 5))
        watch.broker_back("broker-a")
        steps.append(await watch.seen_gone("broker-a"))  # not gone: nothing to wait for
        return steps

    assert asyncio.run(scenario()) == [False] * ANSWERS_TO_SEE_GONE + [True, True]


def test_seen_gone_gives_up_max_wait_after_the_broker_left() -> None:
    async def scenario() -> tuple[bool, bool]:
        clock = Clock()
        watch = RouteWatch(clock)
        watch.answered("c1:1", "T", BOTH)
        watch.broker_left("broker-a")
        clock.now += 3.0  # down for 3 s already: 2 s of the 5 left
        waiting = asyncio.ensure_future(watch.seen_gone("broker-a", max_wait=5.0))
        await asyncio.sleep(0)
        before = waiting.done()
        clock.now += 2.0
        watch.answered("c9:9", "T", BOTH)  # any change looks at the clock again
        watch.forget("c9:9")
        return before, await asyncio.wait_for(waiting, 5)

    assert asyncio.run(scenario()) == (False, False)


def test_back_within_is_the_clears_bound_from_now() -> None:
    clock = Clock()
    watch = RouteWatch(clock)
    assert watch.back_within("broker-a") is None, "it did not leave"
    watch.answered("c1:1", "T", BOTH)
    watch.broker_left("broker-a")
    assert watch.back_within("broker-a", max_wait=10.0) == 10.0
    clock.now += 4.0
    assert watch.back_within("broker-a", max_wait=10.0) == 6.0
    clock.now += 7.0
    assert watch.back_within("broker-a", max_wait=10.0) == 0.0, "past the bound: a clear waits no more"
    clock.now -= 7.0
    watch.forget("c1:1")
    assert watch.back_within("broker-a", max_wait=10.0) == 0.0, "no one left to wait for"
    watch.broker_back("broker-a")
    assert watch.back_within("broker-a") is None


def test_answers_for_unknown_topics_keep_nothing() -> None:
    """Made-up topic names asked on one connection do not pile up (100,000 of them held 32 MB)."""
    watch = RouteWatch(Clock())
    watch.answered("c1:1", "T", BOTH)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(20_000):
            watch.answered("c1:1", f"no-such-topic-{i}", ())
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024
    assert watch.watched() == 1
    watch.broker_left("broker-a")
    assert watch.waiting_for("broker-a") == [("c1:1", "T")]


def test_a_connection_watches_the_topics_it_asked_last_up_to_the_bound() -> None:
    watch = RouteWatch(Clock())
    for i in range(MAX_TOPICS_PER_PEER + 5):
        watch.answered("c1:1", f"T{i}", BOTH)
    watch.answered("c1:1", "T0", BOTH)  # asked again: among the last asked now
    watch.answered("c2:2", "T1", BOTH)
    assert watch.watched() == MAX_TOPICS_PER_PEER + 1
    watch.broker_left("broker-a")
    waited = watch.waiting_for("broker-a")
    mine = {topic for peer, topic in waited if peer == "c1:1"}
    assert len(mine) == MAX_TOPICS_PER_PEER
    assert "T0" in mine and not {"T1", "T2", "T3", "T4", "T5"} & mine
    assert ("c2:2", "T1") in waited


def test_who_is_waited_for_follows_each_topics_last_answer() -> None:
    """A topic whose last answer stopped naming the broker, or named no broker, is not waited for; a
    connection closed while the broker is away drops only its own entries."""
    watch = RouteWatch(Clock())
    watch.answered("c1:1", "T", BOTH)
    watch.answered("c1:1", "T", ["broker-b"])  # broker-a no longer holds T
    watch.answered("c1:1", "U", BOTH)
    watch.answered("c1:1", "V", BOTH)
    watch.answered("c1:1", "V", [])  # V unknown now
    watch.answered("c2:2", "T", ["broker-a"])
    watch.answered("c3:3", "T", ["broker-a"])
    watch.forget("c3:3")
    watch.broker_left("broker-a")
    watch.broker_left("broker-b")
    assert watch.waiting_for("broker-a") == [("c1:1", "U"), ("c2:2", "T")]
    assert watch.waiting_for("broker-b") == [("c1:1", "T"), ("c1:1", "U")]
    watch.forget("c2:2")
    assert watch.waiting_for("broker-a") == [("c1:1", "U")]
    assert watch.waiting_for("broker-b") == [("c1:1", "T"), ("c1:1", "U")]
    for _ in range(ANSWERS_TO_SEE_GONE):
        watch.answered("c1:1", "U", [])
    assert watch.waiting_for("broker-a") == [] and watch.waiting_for("broker-b") == [("c1:1", "T")]
    watch.forget("c1:1")
    assert watch.watched() == 0 and watch.waiting_for("broker-b") == []
