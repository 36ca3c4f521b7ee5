"""The official RocketMQ 5 Python client's transactional producer against ``serve --writable``.

Three transactions on a TRANSACTION topic: one committed, one rolled back, and one left undecided, which
the broker's check-back (``--transaction-check-interval-ms 500 --transaction-timeout-ms 1000``) asks
the producer about with a RecoverOrphanedTransactionCommand on its Telemetry stream; the client's
TransactionChecker answers COMMIT and the client sends EndTransaction (SOURCE_SERVER_CHECK). A 4.x
pull of the topic (the remoting port) then finds the two committed messages and never the rolled
back one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT

rocketmq = pytest.importorskip("rocketmq")
from rocketmq.grpc_protocol import TransactionResolution  # noqa: E402

TOPIC = "GrpcTx"


class Checker(rocketmq.TransactionChecker):  # type: ignore[misc]
    """Commits whatever the server asks about, remembering what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, bytes]] = []
        self.called = threading.Event()

    def check(self, message: object) -> int:
        self.asked.append((message.message_id, message.topic, message.body))  # type: ignore[attr-defined]
        self.called.set()
        return TransactionResolution.COMMIT


def message(body: bytes, key: str) -> object:
    msg = rocketmq.Message()
    msg.topic = TOPIC
    msg.body = body
    msg.keys = key
    return msg


def run_transactions(grpc_port: int, checker: Checker) -> dict[str, str]:
    """Commit one, roll back one, leave one to the check-back (waited for); their message ids."""
    config = rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )
    producer = rocketmq.Producer(config, (TOPIC,), checker)
    producer.startup()
    try:
        ids = {}
        for name, decide in (("commit", "commit"), ("rollback", "rollback"), ("orphan", None)):
            transaction = producer.begin_transaction()
            receipt = producer.send(message(name.encode(), f"k-{name}"), transaction)
            ids[name] = receipt.message_id
            if decide is not None:
                getattr(transaction, decide)()
        assert checker.called.wait(30), "no RecoverOrphanedTransactionCommand within 30 s"
        time.sleep(0.5)  # the checker's EndTransaction goes out on the client's own executor
        return ids
    finally:
        producer.shutdown()


async def pulled_bodies(port: int, until: set[bytes], deadline: float) -> list[bytes]:
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


async def test_commit_rollback_and_check_back_over_grpc(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: "TRANSACTION"})
    proc, port, grpc_port = await start_writable_grpc(
        store, "--transaction-check-interval-ms", "500", "--transaction-timeout-ms", "1000"
    )
    try:
        checker = Checker()
        ids = await asyncio.wait_for(asyncio.to_thread(run_transactions, grpc_port, checker), 90)
        # asked about the undecided one only, shown as the producer sent it
        assert {asked[0] for asked in checker.asked} == {ids["orphan"]}
        assert checker.asked[0][1:] == (TOPIC, b"orphan")
        bodies = await pulled_bodies(port, {b"commit", b"orphan"}, time.monotonic() + 15)
        # A check-back answered later than the next check pass is asked (and committed) again, as
        # on the broker: which messages arrive is exact, not how often.
        assert set(bodies) == {b"commit", b"orphan"}
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            (committed,) = (await admin.query_by_key(TOPIC, "k-commit")).messages
            assert committed.properties["UNIQ_KEY"] == ids["commit"]
            assert committed.properties["PGROUP"] == TOPIC
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
