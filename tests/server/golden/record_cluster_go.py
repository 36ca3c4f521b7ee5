"""Record the real 4.9.7 name server and two real brokers through the Go client's cluster scenario.

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin RMQ_GO_CLIENT_GOPATH=/tmp/gobuild4:/usr/share/gocode \\
        python tests/server/golden/record_cluster_go.py [KEEP_CLIENT_LOG]

The cluster as ``record_cluster.py`` starts it (broker-a and broker-b, each its own store, ``Failover``
with 4 queues on both), then ``tests/server/go/cluster_failover.go`` built against the official Go
4.x client (github.com/apache/rocketmq-client-go/v2 v2.1.2, from the GOPATH
``RMQ_GO_CLIENT_GOPATH`` names; see docs/cluster.md) through ``cluster_go.run_scenario``: broker-a
stopped by SIGTERM (it unregisters) and started again on its store and port. Written to
``cluster_go_4.9.7.json`` beside this script; ``tests/server/test_go_cluster_failover.py`` runs the
same against ``--brokers 2`` and compares. Every process is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_cluster import start_broker, start_two_brokers, stop, wait_registered

from tests.support.cluster_go import GoFailoverProgram, build_program, go_client_gopath, run_scenario
from tests.support.real_broker import copy_rmq

OUT = Path(__file__).with_name("cluster_go_4.9.7.json")
TOPIC = "Failover"


def main() -> None:
    gopath = go_client_gopath()
    if gopath is None:
        raise SystemExit(
            "set RMQ_GO_CLIENT_GOPATH to a GOPATH holding rocketmq-client-go/v2 (docs/cluster.md)"
        )
    with tempfile.TemporaryDirectory(prefix="rmq-cluster-go-golden-") as tmp:
        root = Path(tmp)
        rmq = copy_rmq(root)
        binary = build_program(gopath, root)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            namesrv, ports, brokers = start_two_brokers(rmq, root, procs)

            def take_down() -> None:
                stop(brokers["broker-a"])

            def bring_back() -> None:
                brokers["broker-a"] = start_broker(rmq, root, "broker-a", ports["broker-a"], namesrv)
                procs.append(brokers["broker-a"])
                asyncio.run(wait_registered(namesrv, {"broker-a", "broker-b"}))

            program = GoFailoverProgram(binary, namesrv, TOPIC, root / "go-client.log")
            try:
                record = run_scenario(program, take_down, bring_back)
            finally:
                program.close()
                print("\n".join(program.transcript), file=sys.stderr)
                if len(sys.argv) > 1:  # where to keep the client's own log, to compare by hand
                    shutil.copy(root / "go-client.log", sys.argv[1])
        finally:
            for proc in reversed(procs):
                stop(proc)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
