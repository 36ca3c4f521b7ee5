"""Record the real 4.9.7 name server and two real brokers through the cluster scenario (issue 34).

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_cluster.py

Starts the real name server and brokers broker-a and broker-b (each its own store and
``broker.conf``) from a copy of ``../shared/rocketmq-4.9.7-bin``, creates ``Failover`` with 4 queues
on every master of DefaultCluster, takes the name server's answers (route, cluster table, topic
list; addresses masked), then runs ``tests/server/java/ClusterFailover.java``: 16 sends, broker-a
stopped (SIGTERM: it unregisters), the answers again, 16 sends, the push consumer awaited, broker-a
started again on its store and port, 16 sends, every SEND_OK message awaited. Written to
``cluster_4.9.7.json`` beside this script; ``tests/server/test_java_cluster_failover.py`` runs the
same against ``--brokers 2`` and compares. Every JVM is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from clients.topic_admin import TopicAdmin, TopicSpec
from tests.support.cluster_java import FailoverProgram, cluster_snapshot, compile_program, phase_summary
from tests.support.java_scenarios import _wait_for, free_port_triple
from tests.support.real_broker import copy_rmq

OUT = Path(__file__).with_name("cluster_4.9.7.json")
TOPIC = "Failover"


def start_namesrv(rmq: Path, root: Path, procs: list[subprocess.Popen[bytes]]) -> str:
    """Start the real name server on a free port; its process goes into ``procs`` before the wait
    for its boot (so a caller's cleanup stops it either way). Returns its address."""
    port = free_port_triple()
    log = root / "namesrv.out"
    env = dict(os.environ, RMQ_NAMESRV_DIR=str(root / "namesrv"))
    with open(log, "wb") as out:
        procs.append(
            subprocess.Popen(
                [str(rmq / "bin" / "start-namesrv.sh"), str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    _wait_for(log, "The Name Server boot success")
    return f"127.0.0.1:{port}"


def start_broker(rmq: Path, root: Path, name: str, port: int, namesrv: str) -> subprocess.Popen[bytes]:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "broker.conf").write_text(f"brokerName={name}\n")
    log = root / name / f"broker-{time.monotonic_ns()}.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(rmq / "bin" / "start-broker.sh"), str(root / name / "store"), str(port), namesrv],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    _wait_for(log, "boot success")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_registered(namesrv: str, names: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        async with TopicAdmin(namesrv) as admin:
            info = await admin.cluster_info()
        if set(info.brokers) == names:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"brokers {names} not registered in time")


async def create_topic(namesrv: str) -> None:
    async with TopicAdmin(namesrv) as admin:
        for address in (await admin.cluster_info()).master_addrs("DefaultCluster") or []:
            await admin.create_topic(address, TopicSpec(TOPIC, 4, 4, 6))


def start_two_brokers(
    rmq: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> tuple[str, dict[str, int], dict[str, subprocess.Popen[bytes]]]:
    """The real name server and broker-a, broker-b registered with it, the scenario's topic created
    on both (their processes go into ``procs``): the name server's address, each broker's port and
    process."""
    namesrv = start_namesrv(rmq, root, procs)
    ports = {"broker-a": free_port_triple(), "broker-b": free_port_triple()}
    brokers = {name: start_broker(rmq, root, name, port, namesrv) for name, port in ports.items()}
    procs.extend(brokers.values())
    asyncio.run(wait_registered(namesrv, {"broker-a", "broker-b"}))
    asyncio.run(create_topic(namesrv))
    time.sleep(1)
    return namesrv, ports, brokers


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rmq-cluster-golden-") as tmp:
        root = Path(tmp)
        rmq = copy_rmq(root)
        class_path = compile_program(root / "java")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            namesrv, ports, brokers = start_two_brokers(rmq, root, procs)
            record: dict[str, object] = {"initial": asyncio.run(cluster_snapshot(namesrv, TOPIC))}
            program = FailoverProgram(class_path, namesrv, TOPIC, root / "client-logs")
            try:
                record["before"] = phase_summary(program.send(16, "before"))
                stop(brokers["broker-a"])
                record["downSnapshot"] = asyncio.run(cluster_snapshot(namesrv, TOPIC))
                record["down"] = phase_summary(program.send(16, "down"))
                record["downMissing"] = program.wait_received("down", 10)
                brokers["broker-a"] = start_broker(rmq, root, "broker-a", ports["broker-a"], namesrv)
                procs.append(brokers["broker-a"])
                asyncio.run(wait_registered(namesrv, {"broker-a", "broker-b"}))
                time.sleep(2.5)
                record["after"] = phase_summary(program.send(16, "after"))
                outcome = program.finish(15)
                record["missing"] = outcome["missing"]
            finally:
                program.close()
        finally:
            for proc in reversed(procs):
                stop(proc)
    OUT.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
