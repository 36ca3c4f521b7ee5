"""The official RocketMQ 5 Node.js client's transactional producer against ``serve --writable``.

As ``test_official_transactions.py`` does for the Python client: on a TRANSACTION topic one
transaction is committed, one rolled back and one left undecided. The broker's check-back
(``--transaction-check-interval-ms 500 --transaction-timeout-ms 1000``) sends the producer a
RecoverOrphanedTransactionCommand on its Telemetry stream; the Node client decodes the half message,
asks its TransactionChecker (which answers COMMIT) and sends EndTransaction with SOURCE_SERVER_CHECK.
A 4.x pull of the topic over the remoting port then finds exactly the two committed messages.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics

TOPIC = "NodeTx"


async def pulled_bodies(port: int, until: set[bytes], deadline: float) -> list[bytes]:
    """Every body in the topic's 4 queues, pulled again until ``until`` is among them or ``deadline``."""
    async with QueryAdmin(f"127.0.0.1:{port}") as admin:
        broker_name = (await admin.get_route(TOPIC)).broker_datas[0].broker_name
        while True:
            bodies = []
            for queue in range(4):
                found = await admin.pull(MessageQueue(TOPIC, broker_name, queue), "*", 0, 32)
                bodies += [m.body for m in found.messages]
            if set(bodies) >= until or time.monotonic() > deadline:
                return bodies
            await asyncio.sleep(0.2)


async def test_node_commit_rollback_and_check_back(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "TRANSACTION"})
    proc, port, grpc_port = await start_writable_grpc(
        store, "--transaction-check-interval-ms", "500", "--transaction-timeout-ms", "1000"
    )
    try:
        job = {
            "mode": "transact",
            "endpoints": f"127.0.0.1:{grpc_port}",
            "topic": TOPIC,
            "transactions": [
                {"body": "commit", "key": "k-commit", "decide": "commit"},
                {"body": "rollback", "key": "k-rollback", "decide": "rollback"},
                {"body": "orphan", "key": "k-orphan", "decide": None},
            ],
            "checkWithinMs": 10_000,
            "graceMs": 500,
        }
        report = await run_node_client(job, timeout=25)
        ids = report["ids"]
        # asked about the undecided one only (perhaps more than once), shown as the producer sent it
        assert report["asked"], "no RecoverOrphanedTransactionCommand within 10 s"
        assert {(a["messageId"], a["topic"], a["body"]) for a in report["asked"]} == {
            (ids["orphan"], TOPIC, "orphan")
        }
        bodies = await pulled_bodies(port, {b"commit", b"orphan"}, time.monotonic() + 5)
        # A check-back answered later than the next check pass is asked (and committed) again, as
        # on the broker: which messages arrive is exact, not how often.
        assert set(bodies) == {b"commit", b"orphan"}
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            for name in ("commit", "orphan"):
                found = (await admin.query_by_key(TOPIC, f"k-{name}")).messages
                assert found and {m.properties["UNIQ_KEY"] for m in found} == {ids[name]}
                assert {m.properties["PGROUP"] for m in found} == {TOPIC}
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
