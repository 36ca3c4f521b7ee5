"""The official Go 4.x producer and push consumer (github.com/apache/rocketmq-client-go/v2 v2.1.2)
against ``--brokers 2`` while broker-a fails, compared with the real 4.9.7 name server and two real
brokers through the same program (``golden/cluster_go_4.9.7.json``, ``golden/record_cluster_go.py``).

Runs only where ``RMQ_GO_CLIENT_GOPATH`` names a GOPATH the client builds in (the Go module proxy is
not reachable everywhere, so the client is laid out by hand: docs/cluster.md); CI skips it. Slow by
the client's own clock: it polls routes every 30 s and rebalances every 20 s, both fixed in v2.1.2,
so the scenario waits for two polls (70-100 s; each step bounded, see ``cluster_go``). It runs
twice: against the test kit's ``RmqCluster`` (faults from Python) and against ``rmq-query serve
--writable --brokers 2`` as a user runs it (faults over the HTTP API).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from clients.topic_admin import TopicAdmin, TopicSpec
from tests.support.cluster_go import (
    SKIP_REASON,
    GoFailoverProgram,
    build_program,
    comparable,
    go_client_gopath,
    run_scenario,
)
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import PROCESS_TIMEOUT, free_port_block

GOLDEN = Path(__file__).parent / "golden" / "cluster_go_4.9.7.json"
GOPATH = go_client_gopath()

pytestmark = pytest.mark.skipif(GOPATH is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert GOPATH is not None
    return build_program(GOPATH, tmp_path_factory.mktemp("go-cluster"))


@dataclass
class Target:
    """A two-broker cluster of ours: its name server, and how broker-a fails and comes back."""

    namesrv: str
    take_down: Callable[[], object]
    bring_back: Callable[[], object]


def _kit(tmp_path: Path) -> Iterator[Target]:
    with RmqCluster(tmp_path / "stores", brokers=2) as made:
        made.create_topic("Failover", queues=4)
        yield Target(
            made.namesrv_address,
            lambda: made.set_faults("broker-a", down=True),
            lambda: made.clear_faults("broker-a"),
        )


def _http_fault(base: str, method: str, body: object = None) -> None:
    with urllib.request.urlopen(base + "api/csrf-token", timeout=5) as answer:
        token = json.load(answer)["csrfToken"]
    request = urllib.request.Request(
        base + "api/brokers/broker-a/faults",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json", "X-RMQ-CSRF-Token": token},
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200


async def _create_topic(namesrv: str) -> None:
    async with TopicAdmin(namesrv) as admin:
        for address in (await admin.cluster_info()).master_addrs("DefaultCluster") or []:
            await admin.create_topic(address, TopicSpec("Failover", 4, 4, 6))


def _serve(tmp_path: Path) -> Iterator[Target]:
    """``rmq-query serve --writable --brokers 2`` as a user runs it, faults over its HTTP API."""
    http = free_port_block((0,))
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(tmp_path / "s"),
             "--brokers", "2", "--port", "0", "--http", str(http)],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        namesrv = proc.stdout.readline().strip().removeprefix("NAMESRV_ADDR=")
        assert [proc.stdout.readline().split("=")[1] for _ in range(2)] == ["broker-a", "broker-b"]
        asyncio.run(_create_topic(namesrv))
        base = f"http://127.0.0.1:{http}/"
        yield Target(
            namesrv, lambda: _http_fault(base, "POST", {"down": True}), lambda: _http_fault(base, "DELETE")
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(PROCESS_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(params=["kit", "serve"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """The test kit's ``RmqCluster`` with its Python faults, or ``serve --brokers 2`` with HTTP's."""
    yield from (_kit if request.param == "kit" else _serve)(tmp_path)


def test_go_clients_carry_on_with_the_other_broker_as_with_the_real_cluster(
    target: Target, binary: Path, tmp_path: Path
) -> None:
    golden = json.loads(GOLDEN.read_text())
    log = tmp_path / "go-client.log"
    program = GoFailoverProgram(binary, target.namesrv, "Failover", log)
    cleared_at: list[int] = []

    def bring_back() -> None:
        target.bring_back()
        cleared_at.append(log.stat().st_size)  # what the client logged before the broker was back

    try:
        got = run_scenario(program, target.take_down, bring_back)
    finally:
        program.close()
    # what the scenario must show, written out (the golden file says the same of the real cluster)
    both = ["broker-a", "broker-b"]
    for phase, brokers in (("before", both), ("down", ["broker-b"]), ("after", both)):
        summary = dict(got[phase])  # type: ignore[call-overload]
        del summary["order"]
        assert summary == {"brokers": brokers, "errors": 0, "sent": 16, "errorKinds": []}, phase
    assert got["missing"] == []
    # A stopped or killed broker's connections end with a FIN, which the client takes quietly; an
    # RST it logs as an ERROR ("connection reset by peer"). ``down`` ends them with a FIN now
    # (test_cluster_down_close.py). While the broker is down the client logs ERRORs of its own
    # (its consumer list asked of the broker: "connection refused"); once it is back, none.
    with open(log, "rb") as logged:
        logged.seek(cleared_at[0])
        errors = [line for line in logged.read().decode(errors="replace").splitlines() if " ERROR " in line]
    assert errors == [], "the Go client logged errors after broker-a was back"
    assert comparable(got)["after"]["sendsPerBroker"] == {"broker-a": 8, "broker-b": 8}
    for part, expected in comparable(golden).items():
        assert comparable(got)[part] == expected, part
