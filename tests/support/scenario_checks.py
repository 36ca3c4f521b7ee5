"""What counts as a pass for each issue 19 scenario, given what the real 4.9.7 broker gave.

``check(row, observed, golden)`` asserts an observation of ``Scenarios.java`` (run id normalized
away) against the same row of ``tests/server/golden/java_scenarios_4.9.7.json``: exactly where the
real broker is deterministic (counts, orders, reconsume times, topics, properties), within ranges
drawn from the broker's rules where it is timing (delay level 2 is 5 s, retry level 3 is 10 s, a
transaction is checked only after 6 s). The recording script runs the same checks on what the real
broker gave, so a golden file the checks would reject is never written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obs = dict[str, Any]

#: The scenario program's own bound on a wait (``java_scenarios.WAIT_SECONDS``), in ms.
WAIT_MS = 40_000


def _no_error(obs: Obs) -> None:
    assert "error" not in obs, obs["error"]


def _same(obs: Obs, golden: Obs, *keys: str) -> None:
    for key in keys:
        assert obs.get(key) == golden[key], f"{key}: {obs.get(key)!r}, the real broker: {golden[key]!r}"


def push(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "sendStatuses", "received", "distinct", "allWithinWait")


def _consumed_all(half: Any, golden: Obs) -> None:
    assert isinstance(half, dict), half
    for key in ("received", "distinct", "allWithinWait", "bodies"):
        assert half.get(key) == golden[key], f"{key}: {half.get(key)!r}, the real broker: {golden[key]!r}"


def committed(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    if "first" in golden and "first" in obs:
        _consumed_all(obs["first"], golden["first"])
    if "second" in golden and "second" in obs:
        _consumed_all(obs["second"], golden["second"])
        assert obs["second"]["oldRedelivered"] == golden["second"]["oldRedelivered"] == 0
    assert ("first" in obs) == ("first" in golden) and ("second" in obs) == ("second" in golden)


def retry(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    fixed = ("reconsumeTimes", "topic", "queueTopic", "sameMsgId", "retryTopicProperty", "body")
    seen = [{k: d[k] for k in fixed} for d in obs["deliveries"]]
    assert seen == [{k: d[k] for k in fixed} for d in golden["deliveries"]]
    # Delay level 3 (10 s), plus up to one route refresh (30 s) when the client first saw no retry topic.
    assert 9_000 <= obs["redeliveryDelayMs"] <= WAIT_MS


def dlq(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(
        obs, golden, "deliveryReconsumeTimes", "deliveriesAfterWait", "dlqTopic", "dlqMessages", "dlqMessage"
    )
    _same(obs, golden, "dlqRoute")


def orderly(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "received", "sequences")


def delay(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "sendStatus", "received")
    # Stored in the topic 5 s after it was born (level 2), and so delivered no sooner.
    assert 4_500 <= obs["storedAfterBornMs"][0] <= 7_000, obs["storedAfterBornMs"]
    assert 4_500 <= obs["deliveredAfterMs"][0] <= 20_000, obs["deliveredAfterMs"]


def transaction(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "sends", "committedAndCheckedWithinWait")
    assert sorted(obs["received"]) == sorted(golden["received"]) == ["commit", "unknown"]
    # Only the UNKNOW message is checked back, once or more, never before the broker's 6 s timeout.
    assert sorted(obs["checks"]) == sorted(golden["checks"]) == ["unknown"]
    assert obs["checks"]["unknown"] and obs["checks"]["unknown"][0] >= 5_000
    assert obs["unknownDeliveredAtMs"] >= obs["checks"]["unknown"][0]


def sendkinds(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "batchStatus", "asyncOk", "asyncFailed", "received", "distinct", "distinctByKind")


def tags(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "received", "byTag")


def broadcast(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "sendStatuses", "consumers")


def litepull(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "sendStatuses", "received", "distinct")


def trace(obs: Obs, golden: Obs) -> None:
    _no_error(obs)
    _same(obs, golden, "received", "traceTypes", "traceGroups", "tracesWithinWait", "mqadminTraceRows")


def consumer_progress(obs: Obs, golden: Obs) -> None:
    """Row 13, first half: ``consumerProgress`` of a group that consumed 10 and shut down."""
    committed({"first": obs["first"]}, {"first": golden["first"]})
    _same(obs, golden, "consumerProgress")


def update_topic(obs: Obs, golden: Obs) -> None:
    """Row 13, second half: ``updateTopic -r 8 -w 8`` then ``topicRoute`` shows 8 queues."""
    _same(obs, golden, "updateTopicSuccess", "topicRoute")


def admin(obs: Obs, golden: Obs) -> None:
    consumer_progress(obs, golden)
    update_topic(obs, golden)


CHECKS: dict[str, Callable[[Obs, Obs], None]] = {
    "push": push,
    "committed": committed,
    "retry": retry,
    "dlq": dlq,
    "orderly": orderly,
    "delay": delay,
    "transaction": transaction,
    "sendkinds": sendkinds,
    "tags": tags,
    "broadcast": broadcast,
    "litepull": litepull,
    "trace": trace,
    "admin": admin,
}


def check(row: str, observed: Obs, golden: Obs) -> None:
    """Asserts ``observed`` passes ``row`` as the real broker's ``golden`` observation did."""
    CHECKS[row](observed, golden)
