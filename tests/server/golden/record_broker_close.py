"""Record what a client's open connections see when the real 4.9.7 broker stops (SIGTERM) or is
killed (SIGKILL): the model of the ``down`` fault (issue 34).

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_broker_close.py

For each signal: a real name server and broker from a copy of ``../shared/rocketmq-4.9.7-bin``
(``record_cluster.py``'s helpers), topic ``Probe`` with 4 queues, then ``tests/support/broker_close``:
an idle connection, an answered one and one holding a suspended pull; the signal to the broker's
pid; how each connection ended (FIN or RST) and what was answered first. Written to
``broker_close_4.9.7.json`` beside this script; ``tests/server/test_cluster_down_close.py``
compares ours. Every process is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_cluster import start_broker, start_namesrv, stop

from clients.topic_admin import TopicAdmin, TopicSpec
from tests.support.broker_close import open_connections, watch
from tests.support.java_scenarios import free_port_triple
from tests.support.real_broker import copy_rmq

OUT = Path(__file__).with_name("broker_close_4.9.7.json")


async def create_topic(address: str) -> None:
    async with TopicAdmin(address) as admin:
        await admin.create_topic(address, TopicSpec("Probe", 4, 4, 6))


def observe(signal_number: signal.Signals) -> dict[str, dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="rmq-broker-close-") as tmp:
        root = Path(tmp)
        rmq = copy_rmq(root)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            namesrv = start_namesrv(rmq, root, procs)
            port = free_port_triple()
            broker = start_broker(rmq, root, "broker-a", port, namesrv)
            procs.append(broker)
            address = f"127.0.0.1:{port}"
            asyncio.run(create_topic(address))
            connections = open_connections(address, "Probe")
            broker.send_signal(signal_number)  # start-broker.sh execs the JVM: this pid is the broker
            return watch(connections)
        finally:
            for proc in reversed(procs):
                stop(proc)


def main() -> None:
    record = {
        name: observe(number) for name, number in (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL))
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
