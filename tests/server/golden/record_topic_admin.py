"""Record what the real 4.9.7 mqadmin prints for its topic commands on the real name server and broker,
with the raw answers it printed them from (issue 32).

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_topic_admin.py

Starts the real name server and broker from a copy of ``../shared/rocketmq-4.9.7-bin`` on a fresh
store (``tests.support.java_scenarios.RealBroker``, about 20 s), then in turn: mqadmin creates topics
(``updateTopic`` by cluster and by broker address, queue counts, perm, unit flags, 24 more topics so
the name server's list is long), the raw GET_ROUTEINFO_BY_TOPIC, GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
GET_BROKER_CLUSTER_INFO and GET_BROKER_RUNTIME_INFO answers are taken with our client, mqadmin prints
``topicRoute`` (both forms), ``topicList`` and ``clusterList`` of that state, deletes a topic and
lists again (the list's raw answer taken once more). Written to ``topic_admin_4.9.7.json`` beside
this script; ``tests/clients/test_topic_admin_golden.py`` feeds the raw answers to our formatters and
compares with mqadmin's text. Both JVMs are stopped by their pids.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from clients.topic_admin import TopicAdmin
from protocol.codes import RequestCode
from protocol.custom_headers import GetRouteInfoRequestHeader
from tests.support import mqadmin_batch
from tests.support.java_scenarios import RealBroker
from tests.support.real_broker import copy_rmq

OUT = Path(__file__).with_name("topic_admin_4.9.7.json")
CREATES = [
    ["updateTopic", "-c", "DefaultCluster", "-t", "Alpha", "-r", "8", "-w", "8"],
    ["updateTopic", "-b", "{broker}", "-t", "Beta", "-r", "2", "-w", "3", "-p", "4"],
    ["updateTopic", "-c", "DefaultCluster", "-t", "Gamma", "-u", "true", "-s", "true"],
    *[
        ["updateTopic", "-c", "DefaultCluster", "-t", f"Topic{i:02d}", "-r", "1", "-w", "1"]
        for i in range(24)
    ],
]
READS = [
    ["topicRoute", "-t", "Alpha"],
    ["topicRoute", "-t", "Beta"],
    ["topicRoute", "-t", "Beta", "-l"],
    ["topicList"],
    ["clusterList"],
]
DELETES = [["deleteTopic", "-c", "DefaultCluster", "-t", "Gamma"], ["topicList"]]


async def raw_answers(namesrv: str, broker: str, *, after_delete: bool = False) -> dict[str, str]:
    async with TopicAdmin(namesrv) as admin:

        async def body(addr: str, code: int, fields: dict[str, str] | None = None) -> str:
            response = await admin.client.invoke(addr, code, fields)
            assert response.code == 0, (code, response.remark)
            return bytes(response.body or b"").decode("utf-8")

        if after_delete:
            return {"topicList": await body(namesrv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)}
        out = {
            f"route {topic}": await body(
                namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext_fields()
            )
            for topic in ("Alpha", "Beta")
        }
        out["topicList"] = await body(namesrv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        out["clusterInfo"] = await body(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
        out["runtimeInfo"] = await body(broker, RequestCode.GET_BROKER_RUNTIME_INFO)
        return out


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="record-topic-admin-") as tmp:
        work = Path(tmp)
        rmq = copy_rmq(work)
        real = RealBroker(SimpleNamespace(rmq=rmq), work / "real")  # type: ignore[arg-type]
        try:
            real.start()
            n = ["-n", real.namesrv]

            def run(commands: list[list[str]]) -> list[str]:
                words = [[w.replace("{broker}", real.broker) for w in cmd] + n for cmd in commands]
                return mqadmin_batch.run_batch(work / "batch", words)

            created = run(CREATES)
            raw = asyncio.run(raw_answers(real.namesrv, real.broker))
            read = run(READS)
            deleted = run(DELETES)
            raw_after = asyncio.run(raw_answers(real.namesrv, real.broker, after_delete=True))
        finally:
            real.stop()
    record = {
        "header": (
            "mqadmin 4.9.7 (MqadminBatch, one JVM) against the real 4.9.7 name server and broker; "
            "'broker' is the broker's address in the outputs; clusterList's last two columns are the "
            "moment's (hours since the earliest message, disk ratio)"
        ),
        "broker": real.broker,
        "namesrv": real.namesrv,
        "steps": [
            {"command": cmd, "stdout": out}
            for cmd, out in zip(CREATES + READS + DELETES, created + read + deleted, strict=True)
        ],
        "raw": raw,
        "rawAfterDelete": raw_after,
    }
    OUT.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
