"""``tests/server/go/cluster_failover.go`` built against the official Go 4.x client and driven line
by line, as ``cluster_java`` drives ``ClusterFailover.java`` (same lines, plus ``align``).

The Go client (github.com/apache/rocketmq-client-go/v2) is not vendored here and cannot be fetched
through the Go module proxy on every machine: the program is built in GOPATH mode from the GOPATH
that ``RMQ_GO_CLIENT_GOPATH`` names (the client's source under
``src/github.com/apache/rocketmq-client-go/v2`` and its dependencies beside it; see
docs/cluster.md). Without it the tests that use this module skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.cluster_java import LINE_TIMEOUT, FailoverProgram, phase_summary
from tests.support.paths import REPO_ROOT

SOURCE = REPO_ROOT / "tests" / "server" / "go" / "cluster_failover.go"
GOPATH_ENV = "RMQ_GO_CLIENT_GOPATH"
CLIENT_PACKAGE = Path("src") / "github.com" / "apache" / "rocketmq-client-go" / "v2"


def go_client_gopath() -> str | None:
    """The GOPATH ``RMQ_GO_CLIENT_GOPATH`` names when ``go`` is installed and the client is in it."""
    gopath = os.environ.get(GOPATH_ENV)
    if not gopath or shutil.which("go") is None:
        return None
    first = gopath.split(os.pathsep)[0]
    return gopath if (Path(first) / CLIENT_PACKAGE / "producer").is_dir() else None


SKIP_REASON = (
    f"needs `go` and {GOPATH_ENV} naming a GOPATH (GOPATH mode) that holds "
    "github.com/apache/rocketmq-client-go/v2 (v2.1.2) and its dependencies; see docs/cluster.md"
)


def build_program(gopath: str, out: Path) -> Path:
    """``cluster_failover.go`` built in GOPATH mode into ``out``; the binary's path."""
    binary = out / "cluster_failover"
    env = dict(os.environ, GOPATH=gopath, GO111MODULE="off", GOFLAGS="", GOCACHE=str(out / "gocache"))
    subprocess.run(["go", "build", "-o", str(binary), str(SOURCE)], check=True, timeout=300, env=env)
    return binary


class GoFailoverProgram(FailoverProgram):
    """The running Go program; the client's own log (rlog, stderr) goes to ``log``."""

    def __init__(self, binary: Path, namesrv: str, topic: str, log: Path) -> None:
        with open(log, "ab") as err:
            self._start([str(binary), namesrv, topic], err)

    def align(self, seconds: int) -> None:
        """Wait until the client's next route poll (every 30 s, fixed in v2.1.2) is ``seconds`` behind."""
        self._say(f"align {seconds}")
        self._until(lambda line: line == "ALIGNED", 30 + seconds + LINE_TIMEOUT)


_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")


def go_phase_summary(results: list[dict]) -> dict[str, object]:
    """``phase_summary`` plus the distinct errors, addresses masked (what the producer said of a
    broker that stopped answering), and where each send went in order (``error`` for a failed one):
    the client's round robin over the route's queues makes it the same on both clusters."""
    summary = phase_summary(results)
    summary["order"] = [r.get("broker", "error") for r in results]
    summary["errorKinds"] = sorted({_ADDRESS.sub("<address>", r["error"]) for r in results if "error" in r})
    return summary


def run_scenario(
    program: GoFailoverProgram, take_down: Callable[[], None], bring_back: Callable[[], None]
) -> dict:
    """The scenario both clusters go through, with how broker-a fails and comes back given.

    16 sends, all received (the push consumer pulls from both brokers); broker-a taken down; 16
    sends at once (``downEarly``: the producer still holds the route naming broker-a, its next poll
    is 25 s or more away); 16 sends after the next poll (``down``), all received; broker-a back; 16
    sends after the next poll (``after``); every SEND_OK message awaited (the push consumer
    rebalances every 20 s, fixed in the client).
    """
    record: dict[str, object] = {"before": go_phase_summary(program.send(16, "before"))}
    record["beforeMissing"] = program.wait_received("before", 20)
    take_down()
    record["downEarly"] = go_phase_summary(program.send(16, "downEarly"))
    program.align(2)
    record["down"] = go_phase_summary(program.send(16, "down"))
    record["downMissing"] = program.wait_received("down", 30)
    bring_back()
    program.align(2)
    record["after"] = go_phase_summary(program.send(16, "after"))
    record["missing"] = program.finish(60)["missing"]
    return record


def comparable(record: dict) -> dict:
    """``record`` as two runs of the scenario can be compared: the ``after`` phase's order becomes
    the count of sends per broker. rocketmq-client-go v2.1.2 orders a route's queues with an
    in-place ``sort.Slice`` whose comparator looks at indices (it reverses the list), once or twice
    depending on which of its timers first notices broker-a's return (an on-demand lookup by the
    push consumer, or the route poll): the round robin then starts on either broker, on the real
    cluster as on ours. 16 sends over 8 queues still give each broker 8."""
    out = dict(record)
    after = dict(out["after"])
    order = after.pop("order")
    after["sendsPerBroker"] = {name: order.count(name) for name in sorted(set(order))}
    out["after"] = after
    return out
