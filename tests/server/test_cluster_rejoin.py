"""A broker cleared of ``down`` comes back only once the clients the name server told its routes have
been told ``ANSWERS_TO_SEE_GONE`` times that it is gone (``server.namesrv.route_watch``), as after a
real broker's restart.

Why: the 4.9.7 Java push consumer leaves a pull the broker held on a connection the broker ended
waiting for its 30 s timeout; only its rebalance, once a route poll no longer names the broker,
frees the queue. Back before any poll, the broker had one of its queues stall past
``test_java_cluster_failover``'s wait. Driven here by a raw name-server connection asking routes
when the test says so: what is checked is the order of events, not how long anything takes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from server.faults import Comeback, Faults
from server.namesrv.route_watch import ANSWERS_TO_SEE_GONE, MAX_WAIT_SECONDS
from tests.support.route_poller import RoutePoller


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Rejoin", queues=2)
        yield made


def clear_later(cluster: RmqCluster, broker: str) -> concurrent.futures.Future[Faults]:
    """Start clearing ``broker``'s faults on the cluster's loop; the future is done when it is back."""
    assert cluster.cluster is not None
    return asyncio.run_coroutine_threadsafe(cluster.cluster.set_faults(broker, Faults()), cluster._loop)


def refuses(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_broker_comes_back_after_each_client_was_told_it_is_gone(cluster: RmqCluster) -> None:
    poller = RoutePoller(cluster.namesrv_address)
    try:
        assert poller.poll("Rejoin") == ["broker-a", "broker-b"]
        cluster.set_faults("broker-a", down=True)
        returning = clear_later(cluster, "broker-a")
        for _ in range(ANSWERS_TO_SEE_GONE - 1):
            assert poller.poll("Rejoin") == ["broker-b"]
            cluster.run(asyncio.sleep(0.2))  # the clear had every chance to finish, had it not waited
            assert not returning.done()
            assert cluster.faults("broker-a").down
            assert refuses(cluster.broker_addresses["broker-a"])
        assert poller.poll("Rejoin") == ["broker-b"]  # the last answer it needed
        assert returning.result(10) == Faults()
        assert poller.poll("Rejoin") == ["broker-a", "broker-b"]
        assert not refuses(cluster.broker_addresses["broker-a"])
    finally:
        poller.close()


def test_a_client_gone_or_never_told_is_not_waited_for(cluster: RmqCluster) -> None:
    told = RoutePoller(cluster.namesrv_address)
    never_told = RoutePoller(cluster.namesrv_address)  # connected, asked nothing
    try:
        assert told.poll("Rejoin") == ["broker-a", "broker-b"]
        cluster.set_faults("broker-a", down=True)
        returning = clear_later(cluster, "broker-a")
        cluster.run(asyncio.sleep(0.2))
        assert not returning.done()
        told.close()  # the only client that knew broker-a left: nothing to wait for
        assert returning.result(10) == Faults()
        assert never_told.poll("Rejoin") == ["broker-a", "broker-b"]
    finally:
        told.close()
        never_told.close()


def test_while_down_the_kit_says_how_long_a_clear_would_wait_and_for_whom(cluster: RmqCluster) -> None:
    poller = RoutePoller(cluster.namesrv_address)
    try:
        assert cluster.comeback("broker-a") is None, "not down: nothing to come back from"
        assert poller.poll("Rejoin") == ["broker-a", "broker-b"]
        cluster.set_faults("broker-a", down=True)
        comeback = cluster.comeback("broker-a")
        assert comeback is not None
        host, port = poller.sock.getsockname()[:2]
        peer = f"{host}:{port}"
        assert (comeback.clients, comeback.waiting_for) == (1, (f"{peer} Rejoin",))
        assert 0 < comeback.within_s <= MAX_WAIT_SECONDS
        for _ in range(ANSWERS_TO_SEE_GONE):
            assert poller.poll("Rejoin") == ["broker-b"]
        # every client saw it gone: a clear now brings it back at once
        assert cluster.comeback("broker-a") == Comeback(0.0, 0, ())
        assert cluster.clear_faults("broker-a") == Faults()
        assert cluster.comeback("broker-a") is None
    finally:
        poller.close()
