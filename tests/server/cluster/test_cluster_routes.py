"""``--brokers N``: the name server's answers merged over the brokers, as a real cluster's.

Expected values are written from the cluster's own shape (two brokers, the queue counts the test
asks for), never read back from the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.producer import Producer
from clients.testkit.cluster import RmqCluster
from clients.topic_admin import TopicAdmin


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        yield made


def route(cluster: RmqCluster, topic: str) -> dict | None:
    async def ask() -> bytes | None:
        async with TopicAdmin(cluster.namesrv_address) as admin:
            return await admin.route_body(topic)

    body = cluster.run(ask())
    return None if body is None else json.loads(body)


def cluster_table(cluster: RmqCluster) -> dict:
    async def ask() -> object:
        async with TopicAdmin(cluster.namesrv_address) as admin:
            return await admin.cluster_info()

    info = cluster.run(ask())
    return {"brokers": info.brokers, "clusters": info.clusters}  # type: ignore[attr-defined]


def topic_list(cluster: RmqCluster) -> list[str]:
    async def ask() -> list[str]:
        async with TopicAdmin(cluster.namesrv_address) as admin:
            return await admin.topic_list()

    return cluster.run(ask())


def test_two_brokers_each_on_its_own_store_and_ports(cluster: RmqCluster, tmp_path: Path) -> None:
    addresses = cluster.broker_addresses
    assert sorted(addresses) == ["broker-a", "broker-b"]
    ports = {int(a.rpartition(":")[2]) for a in addresses.values()}
    assert len(ports | {int(cluster.namesrv_address.rpartition(":")[2])}) == 3
    assert (tmp_path / "stores" / "broker-a" / "commitlog").is_dir()
    assert (tmp_path / "stores" / "broker-b" / "commitlog").is_dir()
    table = cluster_table(cluster)
    assert sorted(table["clusters"]["DefaultCluster"]) == ["broker-a", "broker-b"]
    for name, address in addresses.items():
        assert table["brokers"][name] == ("DefaultCluster", {0: address})


def test_a_topic_created_on_the_cluster_has_queues_on_every_broker(cluster: RmqCluster) -> None:
    cluster.create_topic("Spread", queues=3)
    got = route(cluster, "Spread")
    assert got is not None
    assert sorted(
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in got["queueDatas"]
    ) == [
        ("broker-a", 3, 3, 6),
        ("broker-b", 3, 3, 6),
    ]
    assert {b["brokerName"]: b["brokerAddrs"]["0"] for b in got["brokerDatas"]} == cluster.broker_addresses
    listed = topic_list(cluster)
    assert "Spread" in listed
    # each broker registers its own name and the cluster's as topics, as 4.9.7 brokers do
    assert {"broker-a", "broker-b", "DefaultCluster", "TBW102"} <= set(listed)


def test_an_auto_created_topic_is_routed_to_the_broker_that_created_it(cluster: RmqCluster) -> None:
    assert route(cluster, "Auto") is None

    async def send() -> str:
        producer = Producer(cluster.namesrv_address)
        try:
            result = await producer.send("Auto", b"first")
            assert result is not None
            return result.broker_addr
        finally:
            await producer.close()

    address = cluster.run(send())
    (creator,) = [name for name, a in cluster.broker_addresses.items() if a == address]
    got = route(cluster, "Auto")
    assert got is not None
    assert [q["brokerName"] for q in got["queueDatas"]] == [creator]
    assert [b["brokerAddrs"]["0"] for b in got["brokerDatas"]] == [address]


def test_down_drops_the_brokers_routes_and_clearing_brings_them_back(cluster: RmqCluster) -> None:
    cluster.create_topic("Both", queues=2)
    cluster.run(_create_on(cluster, "OnlyA", "broker-a"))
    assert route(cluster, "OnlyA") is not None
    cluster.set_faults("broker-a", down=True)
    both = route(cluster, "Both")
    assert both is not None and [q["brokerName"] for q in both["queueDatas"]] == ["broker-b"]
    assert route(cluster, "OnlyA") is None  # no broker holding it is registered: TOPIC_NOT_EXIST
    assert cluster_table(cluster)["clusters"] == {"DefaultCluster": ["broker-b"]}
    assert "OnlyA" not in topic_list(cluster)
    with pytest.raises(ConnectionRefusedError):
        cluster.run(_connect(cluster.broker_addresses["broker-a"]))
    assert cluster.faults("broker-a").down
    cluster.clear_faults("broker-a")
    assert not cluster.faults("broker-a").down
    again = route(cluster, "Both")
    assert again is not None and sorted(q["brokerName"] for q in again["queueDatas"]) == [
        "broker-a",
        "broker-b",
    ]
    assert route(cluster, "OnlyA") is not None
    cluster.run(_connect(cluster.broker_addresses["broker-a"]))  # listening again, same port


async def _create_on(cluster: RmqCluster, topic: str, broker: str) -> None:
    from clients.topic_admin import TopicSpec

    async with TopicAdmin(cluster.namesrv_address) as admin:
        await admin.create_topic(cluster.broker_addresses[broker], TopicSpec(topic, 2, 2, 6))


async def _connect(address: str) -> None:
    import asyncio

    host, _, port = address.rpartition(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.close()
    await writer.wait_closed()
