"""The real 4.9.7 ``mqadmin`` against ``--brokers 2``: it creates a topic on every master of the
cluster, sees both brokers in the route and the cluster list, and its key lookup fans out over both
brokers (a key stored once in each broker's store is found twice). One JVM for all commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from tests.support import mqadmin_batch
from tests.support.paths import ROCKETMQ_SKIP_REASON

pytestmark = pytest.mark.skipif(not mqadmin_batch.available(), reason=ROCKETMQ_SKIP_REASON)


def test_mqadmin_sees_and_creates_on_the_whole_cluster(tmp_path: Path) -> None:
    with RmqCluster(tmp_path / "stores", brokers=2) as cluster:
        ns = cluster.namesrv_address
        cluster.writer("broker-a").add("MqT", "in a", keys="shared-key")
        cluster.writer("broker-b").add("MqT", "in b", keys="shared-key")
        create, route, clusters, found = mqadmin_batch.run_batch(
            tmp_path / "mqadmin",
            [
                ["updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "MqT", "-r", "2", "-w", "2"],
                ["topicRoute", "-n", ns, "-t", "MqT"],
                ["clusterList", "-n", ns],
                ["queryMsgByKey", "-n", ns, "-t", "MqT", "-k", "shared-key"],
            ],
        )
        addresses = cluster.broker_addresses
    for address in addresses.values():
        assert f"create topic to {address} success." in create
    assert sorted(re.findall(r'"brokerName":"(broker-[ab])"', route.replace(" ", "").replace("\n", ""))) == [
        "broker-a",
        "broker-a",
        "broker-b",
        "broker-b",
    ]  # a BrokerData and a QueueData each
    for name, address in addresses.items():
        assert re.search(rf"DefaultCluster\s+{name}\s+0\s+{re.escape(address)}", clusters), clusters
    # one row per message found: the broker of each store answered
    assert len(re.findall(r"^[0-9A-F]{32}\s", found, re.MULTILINE)) == 2, found
