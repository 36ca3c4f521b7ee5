"""``down`` ends a broker's connections as the real broker's do when it stops or is killed.

``golden/broker_close_4.9.7.json`` (``golden/record_broker_close.py``): the real 4.9.7 broker,
stopped by SIGTERM or killed by SIGKILL, ends every client connection with a FIN (the kernel closes
the dead JVM's sockets), and answers nothing more, not even the pull it was holding. Clients tell
the two apart: the Go 4.x client reads a FIN as a plain end of stream and logs nothing, an RST as
an ERROR ("conn error, close connection ... connection reset by peer"). ``down`` used to reset, for
a Java push consumer's sake: that its pulls no longer stall is ``server.namesrv.route_watch``'s doing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from tests.support.broker_close import open_connections, watch

GOLDEN = Path(__file__).parent / "golden" / "broker_close_4.9.7.json"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Probe", queues=4)
        yield made


def test_down_ends_each_connection_with_a_fin_answering_nothing_as_the_real_broker(
    cluster: RmqCluster,
) -> None:
    golden = json.loads(GOLDEN.read_text())
    connections = open_connections(cluster.broker_addresses["broker-a"], "Probe")
    cluster.set_faults("broker-a", down=True)
    seen = watch(connections)
    assert seen == golden["SIGTERM"] == golden["SIGKILL"]
    # broker-b's connections are not touched, and broker-a serves again once cleared
    cluster.clear_faults("broker-a")
    for address in cluster.broker_addresses.values():
        again = open_connections(address, "Probe")
        for sock in again.values():
            sock.close()
