"""The kit's consuming: ``RmqClient.receive``, ``RmqConsumer`` and the ``rmq_consumer`` fixture.

They receive through the server's consume side (heartbeat, committed offsets, pulls), so what a test
took is committed: the next receive of the group continues after it, also after the server closed
a consumer the test left open and was started again on the same store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clients.testkit.server import RmqClient, RmqConsumer, RmqServer, kit_store_config


def bodies(messages: list) -> list[bytes]:
    return [m.body for m in messages]


def test_the_fixture_receives_what_the_test_sent(
    rmq_client: RmqClient, rmq_consumer: Callable[..., RmqConsumer]
) -> None:
    audit = rmq_consumer("Events", group="audit")
    alerts = rmq_consumer("Events", group="alerts", tags="alert")
    for i in range(6):
        rmq_client.send("Events", f"event {i}", tags="alert" if i % 3 == 0 else "info", queue_id=i % 2)
    assert sorted(bodies(audit.receive(6, timeout=10))) == [f"event {i}".encode() for i in range(6)]
    assert sorted(bodies(alerts.receive(2, timeout=10))) == [b"event 0", b"event 3"]
    with pytest.raises(
        TimeoutError, match=r"received 0 of 1 messages within 0.3s from Events \(tags alert\)"
    ):
        alerts.receive(1, timeout=0.3)


def test_receive_continues_and_times_out_naming_what_came(rmq_client: RmqClient) -> None:
    for i in range(3):
        rmq_client.send("Jobs", f"job {i}", keys=f"job-{i}", queue_id=0)
    assert bodies(rmq_client.receive("Jobs", 1)) == [b"job 0"]
    started = time.monotonic()
    with pytest.raises(TimeoutError) as caught:
        rmq_client.receive("Jobs", 3, timeout=0.5)
    assert time.monotonic() - started < 5
    assert str(caught.value).startswith("received 2 of 3 messages within 0.5s from Jobs (tags *)")
    assert "keys=job-1" in str(caught.value) and "keys=job-2" in str(caught.value)
    # What came before the timeout was not consumed: the group still gets it.
    assert bodies(rmq_client.receive("Jobs", 2)) == [b"job 1", b"job 2"]
    # Another group starts from the first offset.
    assert bodies(rmq_client.receive("Jobs", 3, group="replay")) == [b"job 0", b"job 1", b"job 2"]


def test_a_consumer_left_open_is_committed_when_the_server_closes(tmp_path: Path) -> None:
    config = kit_store_config(tmp_path / "store")
    server = RmqServer(config)
    try:
        client = RmqClient(server)
        for i in range(4):
            client.send("Left", f"m{i}", queue_id=1)
        consumer = RmqConsumer(server, "Left", group="g-left")
        assert bodies(consumer.receive(2, timeout=10)) == [b"m0", b"m1"]
    finally:
        server.close()  # the consumer is still open: the server closes it first
    server = RmqServer(config)
    try:
        assert bodies(RmqClient(server).receive("Left", 2, group="g-left")) == [b"m2", b"m3"]
    finally:
        server.close()
