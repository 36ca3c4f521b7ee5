"""The script of ``tests/server/golden/record_end_transaction_twice.py`` (issue 31 item 6), shared by the
recorder (against the real 4.9.7 broker) and its replay against our server
(``tests/server/test_end_transaction_twice.py``), so any difference is the server's.

Two half messages to ``TxTwiceTopic`` queue 0 (SEND_MESSAGE with ``TRAN_MSG``, JSON headers), then:
commit A, commit A again, roll A back after the commits; roll B back, commit B after the rollback;
each END_TRANSACTION as a request (not oneway) so its answer is kept; last, GET_MAX_OFFSET of the
topic's queue 0: how many real messages were written.
"""

from __future__ import annotations

import time
from typing import Any

from protocol.codes import RequestCode as R
from protocol.codes import SerializeType
from tests.support.consume_side import Recorder

TOPIC = "TxTwiceTopic"
PGROUP = "TxTwiceProducer"


async def play(port: int) -> list[dict[str, Any]]:
    """The script against the server on ``port``: its steps in ``consume_side.Recorder``'s format."""
    rec = Recorder(port, SerializeType.JSON)
    rec.pgroup = PGROUP
    halves = {}
    for name in ("A", "B"):
        fields, uniq = rec.send_fields(
            TOPIC,
            0,
            f"Tx{name}",
            sys_flag=4,
            extra={"TRAN_MSG": "true", "PGROUP": PGROUP},
            born=int(time.time() * 1000),
        )
        answer = await rec.ask(
            f"send half message {name}", R.SEND_MESSAGE, fields, f"half-{name}".encode(), via="P"
        )
        ext = (answer.ext_fields or {}) if answer else {}
        halves[name] = {
            "producerGroup": PGROUP,
            "tranStateTableOffset": ext.get("queueOffset", "0"),
            "commitLogOffset": str(int(ext.get("msgId", "0" * 32)[-16:], 16)),
            "fromTransactionCheck": "false",
            "msgId": ext.get("msgId", ""),
            "transactionId": uniq,
        }

    def end(name: str, kind: str) -> dict[str, str]:
        return {**halves[name], "commitOrRollback": kind}

    await rec.ask("A: commit", R.END_TRANSACTION, end("A", "8"), via="P")
    await rec.ask("A: commit again", R.END_TRANSACTION, end("A", "8"), via="P")
    await rec.ask("A: rollback after commit", R.END_TRANSACTION, end("A", "12"), via="P")
    await rec.ask("B: rollback", R.END_TRANSACTION, end("B", "12"), via="P")
    await rec.ask("B: commit after rollback", R.END_TRANSACTION, end("B", "8"), via="P")
    await rec.ask(
        "real messages written to the topic (max offset of queue 0)",
        R.GET_MAX_OFFSET,
        {"topic": TOPIC, "queueId": "0"},
        via="admin",
    )
    for conn in rec.conns.values():
        await conn.close()
    return rec.steps
