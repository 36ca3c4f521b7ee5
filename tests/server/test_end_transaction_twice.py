"""Issue 31 item 6: a second END_TRANSACTION for a decided half message never stores a second copy.

The real 4.9.7 broker, recorded by ``golden/record_end_transaction_twice.py``
(``golden/end_transaction_twice_4.9.7.json``), checks each END_TRANSACTION against the half message
only (``checkPrepareMessage``), never against the op queue: a commit sent twice writes the message
twice, a rollback after a commit is SUCCESS "not set any response code" and a commit after a
rollback writes the rolled-back message (the topic ends with three messages). Here a half message is
decided once (``server.broker.decided_halves``): the same decision again gets the broker's answer and
writes nothing; a different one is SYSTEM_ERROR naming the first. The replay runs the recorder's own
script (``tests/support/end_transaction_twice.py``) against ``serve --writable`` in process and
compares answer by answer; the steps where we differ on purpose are in ``DIFFERENT``. A restart
forgets the kinds of decisions but not that they were made: they are read back from the op queue.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.app import QueryServer, ServerSettings
from server.broker.decided_halves import Decision
from server.broker.end_transaction import already_decided_remark
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.end_transaction_twice import PGROUP, TOPIC, play
from tests.support.harness import RawClient

MAX_OFFSET_STEP = "real messages written to the topic (max offset of queue 0)"
GOLDEN = Path(__file__).parent / "golden"
RECORDING = json.loads((GOLDEN / "end_transaction_twice_4.9.7.json").read_text(encoding="utf-8"))

#: step -> our answer (code, remark, ext fields) where it differs from the broker's on purpose.
DIFFERENT: dict[str, tuple[int, str | None, dict[str, str]]] = {
    "A: rollback after commit": (ResponseCode.SYSTEM_ERROR, already_decided_remark(Decision.COMMIT), {}),
    "B: commit after rollback": (ResponseCode.SYSTEM_ERROR, already_decided_remark(Decision.ROLLBACK), {}),
    # The broker's three: A twice and B after its rollback. Ours: A once.
    "real messages written to the topic (max offset of queue 0)": (
        ResponseCode.SUCCESS,
        None,
        {"offset": "1"},
    ),
}

Started = Callable[[Path], Any]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Path], Any]]:
    running: list[tuple[QueryServer, WritableStore]] = []

    async def start(root: Path) -> tuple[QueryServer, WritableStore]:
        store = WritableStore(StoreConfig.for_store(root))
        srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
        await srv.start()
        running.append((srv, store))
        return srv, store

    yield start
    for srv, store in running:
        if not store.closed:
            await srv.stop()
            store.close()


def test_the_recording_shows_the_broker_storing_twice() -> None:
    answers = {s["step"]: s["answer"] for s in RECORDING["steps"]}
    assert answers["A: commit again"]["code"] == 0
    assert answers["A: rollback after commit"]["remark"] == "not set any response code"
    assert answers["real messages written to the topic (max offset of queue 0)"]["extFields"] == {
        "offset": "3"
    }


async def test_the_recorded_sequence_against_our_server(tmp_path: Path, serve: Started) -> None:
    srv, _ = await serve(tmp_path / "store")
    steps = await play(srv.port)
    assert [s["step"] for s in steps] == [s["step"] for s in RECORDING["steps"]]
    for ours, broker in zip(steps, RECORDING["steps"], strict=True):
        got = ours["answer"]
        if ours["step"] in DIFFERENT:
            assert (got["code"], got["remark"], got["extFields"]) == DIFFERENT[ours["step"]], ours["step"]
        else:
            assert got == broker["answer"], ours["step"]


def half_send(unique: str) -> RemotingCommand:
    properties = f"UNIQ_KEY\x01{unique}\x02WAIT\x01true\x02TRAN_MSG\x01true\x02PGROUP\x01{PGROUP}\x02"
    fields = {
        "producerGroup": PGROUP,
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "4",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": properties,
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    return RawClient.request(RequestCode.SEND_MESSAGE, fields, b"half")


def end_tx(sent: dict[str, str], kind: int) -> RemotingCommand:
    fields = {
        "producerGroup": PGROUP,
        "tranStateTableOffset": sent["queueOffset"],
        "commitLogOffset": str(int(sent["msgId"][-16:], 16)),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "false",
        "msgId": sent["msgId"],
        "transactionId": "t",
    }
    return RawClient.request(RequestCode.END_TRANSACTION, fields)


async def test_rollback_twice_answers_as_the_broker_and_writes_one_op(tmp_path: Path, serve: Started) -> None:
    srv, store = await serve(tmp_path / "store")
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        sent = (await client.call(half_send("C0FFEE01"))).ext_fields
        for _ in range(3):
            answer = await client.call(end_tx(sent, 12))
            assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "not set any response code")
    finally:
        await client.close()
    assert store.reader.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 1
    assert store.reader.max_offset(TOPIC, 0) == 0


async def test_a_decision_made_before_a_restart_is_read_back_from_the_op_queue(
    tmp_path: Path, serve: Started
) -> None:
    srv, store = await serve(tmp_path / "store")
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        sent = (await client.call(half_send("C0FFEE02"))).ext_fields
        assert (await client.call(end_tx(sent, 8))).code == ResponseCode.SUCCESS
    finally:
        await client.close()
    await srv.stop()
    store.close()
    srv, store = await serve(tmp_path / "store")
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        for kind in (8, 12):
            answer = await client.call(end_tx(sent, kind))
            assert (answer.code, answer.remark) == (
                ResponseCode.SYSTEM_ERROR,
                already_decided_remark(Decision.UNKNOWN),
            )
    finally:
        await client.close()
    assert store.reader.max_offset(TOPIC, 0) == 1
