"""The official 4.9.7 Java producer and push consumer against ``--brokers 2`` while broker-a fails,
compared with the real 4.9.7 name server and two real brokers through the same scenario.

Sends spread over both brokers; with broker-a ``down`` the producer's sends go to broker-b (its
retry skips the broker that failed, then the polled route no longer names broker-a) and the push
consumer keeps receiving; once the fault is cleared broker-a takes sends again; every message the
producer was told SEND_OK is received. ``golden/cluster_4.9.7.json`` is the real cluster through
the same program (``golden/record_cluster.py``: broker-a stopped by SIGTERM and started again),
with the name server's answers (route, cluster table, topic list) before and while broker-a is
down: ours must match them, addresses masked. Bounded: each step of the program has 20 s, the waits
for deliveries 10 and 15 s.

broker-a goes down only once it holds the push consumer's pull of each of its queues (the four of
``Failover`` and the group's retry queue): the 4.9.7 client leaves such a pull, on a connection the
broker ended, to its 30 s timeout, so the consumer must see broker-a gone and rebalance before it is
back (``server.namesrv.route_watch``). Without that wait the scenario met this case by chance (2 CI
runs of ~10 failed; the consumer's first pulls, answered "subscription not latest", often sat out
their 3 s retry delay through the whole outage).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from tests.support.cluster_java import FailoverProgram, cluster_snapshot, compile_program, phase_summary
from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_SKIP_REASON

GOLDEN = Path(__file__).parent / "golden" / "cluster_4.9.7.json"

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)


@pytest.fixture(scope="module")
def class_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_program(tmp_path_factory.mktemp("java-cluster"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Failover", queues=4)
        yield made


def without_acting_master(value: object) -> object:
    """Our route and cluster JSON carry ``enableActingMaster`` (for the Rust client,
    ``server.remoting.route``); the 4.9.7 name server's do not."""
    if isinstance(value, list):
        return [without_acting_master(v) for v in value]
    if isinstance(value, dict):
        return {k: without_acting_master(v) for k, v in value.items() if k != "enableActingMaster"}
    return value


#: The pulls broker-a holds for the push consumer once it has settled: one per queue of
#: ``Failover`` and one on the group's retry queue.
HELD_ON_BROKER_A = 5


def wait_held(cluster: RmqCluster, broker: str, count: int, timeout: float = 15.0) -> None:
    """Until ``broker`` holds ``count`` long-polling pulls (bounded)."""
    assert cluster.cluster is not None
    holds = cluster.cluster.broker(broker).server.held_pulls
    deadline = time.monotonic() + timeout
    while holds.held < count:
        assert time.monotonic() < deadline, f"{broker} holds {holds.held} pulls, not {count}"
        time.sleep(0.05)


def snapshot(cluster: RmqCluster) -> object:
    return without_acting_master(cluster.run(cluster_snapshot(cluster.namesrv_address, "Failover")))


def test_java_clients_carry_on_with_the_other_broker_as_with_the_real_cluster(
    cluster: RmqCluster, class_path: str, tmp_path: Path
) -> None:
    golden = json.loads(GOLDEN.read_text())
    got: dict[str, object] = {"initial": snapshot(cluster)}
    program = FailoverProgram(class_path, cluster.namesrv_address, "Failover", tmp_path / "logs")
    try:
        got["before"] = phase_summary(program.send(16, "before"))
        wait_held(cluster, "broker-a", HELD_ON_BROKER_A)
        cluster.set_faults("broker-a", down=True)
        got["downSnapshot"] = snapshot(cluster)
        got["down"] = phase_summary(program.send(16, "down"))
        got["downMissing"] = program.wait_received("down", 10)
        cluster.clear_faults("broker-a")
        time.sleep(2.5)  # the clients poll routes every second
        got["after"] = phase_summary(program.send(16, "after"))
        got["missing"] = program.finish(15)["missing"]
    finally:
        program.close()
    # what the scenario must show, written out (the golden file says the same of the real cluster)
    assert got["before"] == {"brokers": ["broker-a", "broker-b"], "errors": 0, "sent": 16}
    assert got["down"] == {"brokers": ["broker-b"], "errors": 0, "sent": 16}
    assert got["downMissing"] == []
    assert got["after"] == {"brokers": ["broker-a", "broker-b"], "errors": 0, "sent": 16}
    assert got["missing"] == []
    for part in golden:
        assert got[part] == golden[part], part
