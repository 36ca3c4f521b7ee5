"""The official Go 4.x producer and push consumer (github.com/apache/rocketmq-client-go/v2 v2.1.2)
against ``--brokers 2`` while broker-a fails, compared with the real 4.9.7 name server and two real
brokers through the same program (``golden/cluster_go_4.9.7.json``, ``golden/record_cluster_go.py``).

Runs only where ``RMQ_GO_CLIENT_GOPATH`` names a GOPATH the client builds in (the Go module proxy is
not reachable everywhere, so the client is laid out by hand: docs/cluster.md); CI skips it. Slow by
the client's own clock: it polls routes every 30 s and rebalances every 20 s, both fixed in v2.1.2,
so the scenario waits for two polls (about 70 s in all; each step bounded, see ``cluster_go``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from tests.support.cluster_go import (
    SKIP_REASON,
    GoFailoverProgram,
    build_program,
    comparable,
    go_client_gopath,
    run_scenario,
)

GOLDEN = Path(__file__).parent / "golden" / "cluster_go_4.9.7.json"
GOPATH = go_client_gopath()

pytestmark = pytest.mark.skipif(GOPATH is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert GOPATH is not None
    return build_program(GOPATH, tmp_path_factory.mktemp("go-cluster"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Failover", queues=4)
        yield made


def test_go_clients_carry_on_with_the_other_broker_as_with_the_real_cluster(
    cluster: RmqCluster, binary: Path, tmp_path: Path
) -> None:
    golden = json.loads(GOLDEN.read_text())
    log = tmp_path / "go-client.log"
    program = GoFailoverProgram(binary, cluster.namesrv_address, "Failover", log)
    try:
        got = run_scenario(
            program,
            lambda: cluster.set_faults("broker-a", down=True),
            lambda: cluster.clear_faults("broker-a"),
        )
    finally:
        program.close()
    # what the scenario must show, written out (the golden file says the same of the real cluster)
    both = ["broker-a", "broker-b"]
    for phase, brokers in (("before", both), ("down", ["broker-b"]), ("after", both)):
        summary = dict(got[phase])  # type: ignore[call-overload]
        del summary["order"]
        assert summary == {"brokers": brokers, "errors": 0, "sent": 16, "errorKinds": []}, phase
    assert got["missing"] == []
    # a stopped or killed broker's connections end with a FIN, which the client takes quietly; an
    # RST it logs as an ERROR (golden/broker_close_4.9.7.json, test_cluster_down_close.py)
    assert "connection reset by peer" not in log.read_text()
    assert comparable(got)["after"]["sendsPerBroker"] == {"broker-a": 8, "broker-b": 8}
    for part, expected in comparable(golden).items():
        assert comparable(got)[part] == expected, part
