"""The official 4.9.7 Java producer and push consumer against ``--brokers 2`` while broker-a fails.

Sends spread over both brokers; with broker-a ``down`` the producer's sends go to broker-b (its
retry skips the broker that failed, then the polled route no longer names broker-a) and the push
consumer keeps receiving; once the fault is cleared broker-a takes sends again; every message the
producer was told SEND_OK is received. Bounded: each step of the program has 20 s, the wait for
deliveries 15 s.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from tests.support.cluster_java import FailoverProgram, compile_program
from tests.support.sql_filter_java import RMQ_BIN

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not RMQ_BIN.is_dir(),
    reason="needs a JDK and ../shared/rocketmq-4.9.7-bin",
)


@pytest.fixture(scope="module")
def class_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_program(tmp_path_factory.mktemp("java-cluster"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Failover", queues=4)
        yield made


def test_java_clients_carry_on_with_the_other_broker_and_lose_nothing(
    cluster: RmqCluster, class_path: str, tmp_path: Path
) -> None:
    program = FailoverProgram(class_path, cluster.namesrv_address, "Failover", tmp_path / "logs")
    try:
        before = program.send(16, "before")
        assert [r for r in before if "error" in r] == []
        assert {r["broker"] for r in before} == {"broker-a", "broker-b"}

        cluster.set_faults("broker-a", down=True)
        during = program.send(16, "down")
        assert [r for r in during if "error" in r] == []
        assert {r["broker"] for r in during} == {"broker-b"}
        # the push consumer keeps receiving from broker-b while broker-a is down
        assert program.wait_received("down", 10) == []

        cluster.clear_faults("broker-a")
        time.sleep(2.5)  # the clients poll routes every second
        after = program.send(16, "after")
        assert [r for r in after if "error" in r] == []
        assert "broker-a" in {r["broker"] for r in after}

        outcome = program.finish(15)
        assert outcome["missing"] == []
        assert outcome["received"] >= 48
    finally:
        program.close()
