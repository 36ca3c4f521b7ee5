"""The REQUEST-REPLY script of ``tests/server/golden/record_request_reply.py`` (issue 32), shared by the
recorder (against the real 4.9.7 broker) and its replay against ``serve --writable``
(``tests/server/test_request_reply_golden.py``), so any difference is the server's.

Per serialization (the replier's requests in JSON, then in ROCKETMQ): requesters heartbeat as
producers (``R`` answers the broker's PUSH_REPLY_MESSAGE_TO_CLIENT with SUCCESS, ``F`` with
SYSTEM_ERROR as a Java client whose processing failed, ``S`` never), then the replier ``P`` sends
replies as ``MessageUtil.createReplyMessage`` makes them: SEND_REPLY_MESSAGE (long header) and
SEND_REPLY_MESSAGE_V2 (one-letter header) to ``<cluster>_REPLY_TOPIC``, and the edge cases: no
``REPLY_TO_CLIENT``, an unknown client, a failing and a silent requester, a bad queue id, a
forbidden and an illegal topic, a topic created by the reply, a ``DELAY``, a ``DELAY`` Java cannot
parse, headers Java cannot decode, and after ``R`` unregistered. The stored replies are read back
(VIEW_MESSAGE_BY_ID) and the reply topic's stats asked. Each step records the answer and the
requests the broker sent meanwhile (the pushes), normalised by ``consume_side.Normaliser``.
"""

from __future__ import annotations

from typing import Any

from protocol.codes import RequestCode as R
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.send_message import V2_NAMES
from tests.support.consume_side import BORN, Recorder, heartbeat, props

CLUSTER = "DefaultCluster"
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"
#: The silent requester's push costs the broker's whole 10 s wait.
SILENT_TIMEOUT = 15.0


def reply_fields(
    rec: Recorder,
    *,
    reply_to: str | None,
    correlation: str,
    topic: str = REPLY_TOPIC,
    queue: int = 0,
    v2: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """A reply's SEND header as the Java client sends one made by ``createReplyMessage``."""
    rec.uniq += 1
    uniq = f"C0FFEE{2 if rec.ser == SerializeType.JSON else 3:02X}{rec.uniq:024X}"
    values = {"MSG_TYPE": "reply", "CORRELATION_ID": correlation}
    if reply_to is not None:
        values["REPLY_TO_CLIENT"] = reply_to
    values |= {"TTL": "3000", "UNIQ_KEY": uniq, "WAIT": "true", **(extra or {})}
    fields = {
        "producerGroup": f"RrReplier_{rec.s}",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue),
        "sysFlag": "0",
        "bornTimestamp": str(BORN),
        "flag": "0",
        "properties": props(**values),
        "reconsumeTimes": "0",
        "unitMode": "false",
    }
    if v2:
        return {V2_NAMES[k]: v for k, v in fields.items()}
    return fields


async def play(port: int, ser: SerializeType, *, settle: float = 0.3) -> list[dict[str, Any]]:
    """The script against the server on ``port``, the replier's requests in ``ser``; ``settle``: how
    long each step waits for requests the server sends after its answer (the recorder's 0.3 s; the
    broker sends its push before it answers, so a replay may wait less)."""
    rec = Recorder(port, ser)
    s = rec.s
    cid = {name: f"cid-{name}-{s}" for name in ("R", "F", "S")}
    for name in ("R", "F", "S"):
        await rec.ask(
            f"heartbeat: requester {name}",
            R.HEART_BEAT,
            None,
            heartbeat(cid[name], [], [f"RrRequester{name}_{s}"]),
            via=name,
            wait_pushed=settle,
        )
    (await rec.conn("F")).push_answer = (1, "process reply message fail")
    (await rec.conn("S")).push_answer = None

    stored: list[tuple[str, RemotingCommand | None]] = []

    async def reply(
        step: str, fields: dict[str, str], body: bytes, *, v2: bool, timeout: float = 15.0
    ) -> None:
        code = R.SEND_REPLY_MESSAGE_V2 if v2 else R.SEND_REPLY_MESSAGE
        answer = await rec.ask(step, code, fields, body, via="P", timeout=timeout, wait_pushed=settle)
        stored.append((step, answer))

    await reply(
        "reply to R (SEND_REPLY_MESSAGE)", reply_fields(rec, reply_to=cid["R"], correlation="corr-1"),
        b"reply-1", v2=False,
    )  # fmt: skip
    await reply(
        "reply to R (SEND_REPLY_MESSAGE_V2)",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-2", v2=True),
        b"reply-2",
        v2=True,
    )
    await reply(
        "reply to R: queue -1",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-3", queue=-1, v2=True),
        b"reply-3",
        v2=True,
    )
    await reply(
        "reply without REPLY_TO_CLIENT",
        reply_fields(rec, reply_to=None, correlation="corr-4"),
        b"r4",
        v2=False,
    )
    await reply(
        "reply to an unknown client",
        reply_fields(rec, reply_to=f"cid-nobody-{s}", correlation="corr-5"),
        b"r5",
        v2=False,
    )
    await reply(
        "reply to F (answers the push SYSTEM_ERROR)",
        reply_fields(rec, reply_to=cid["F"], correlation="corr-6", v2=True),
        b"r6",
        v2=True,
    )
    await reply(
        "reply to S (never answers the push)",
        reply_fields(rec, reply_to=cid["S"], correlation="corr-7", v2=True),
        b"r7",
        v2=True,
        timeout=SILENT_TIMEOUT,
    )
    await reply(
        "reply: queue 5 of a one-queue topic",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-8", queue=5),
        b"r8",
        v2=False,
    )
    await reply(
        "reply: forbidden topic",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-9", topic="SCHEDULE_TOPIC_XXXX"),
        b"r9",
        v2=False,
    )
    await reply(
        "reply: illegal topic",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-10", topic="bad topic!"),
        b"r10",
        v2=False,
    )
    await reply(
        "reply: a topic the reply creates",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-11", topic=f"RrCreated_{s}", v2=True),
        b"r11",
        v2=True,
    )
    await reply(
        "reply: DELAY 3",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-12", extra={"DELAY": "3"}),
        b"r12",
        v2=False,
    )
    await reply(
        "reply: DELAY not a number",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-13", extra={"DELAY": "x"}),
        b"r13",
        v2=False,
    )
    await reply("reply: no header fields", None, b"r15", v2=False)  # type: ignore[arg-type]
    await reply("reply V2: only producerGroup", {"a": f"RrReplier_{s}"}, b"r16", v2=True)
    await reply(
        "reply V2: queueId not a number",
        {**reply_fields(rec, reply_to=cid["R"], correlation="corr-17", v2=True), "e": "x"},
        b"r17",
        v2=True,
    )
    await rec.ask(
        "unregister requester R",
        R.UNREGISTER_CLIENT,
        {"clientID": cid["R"], "producerGroup": f"RrRequesterR_{s}"},
        via="R",
        wait_pushed=settle,
    )
    await reply(
        "reply to R after it unregistered",
        reply_fields(rec, reply_to=cid["R"], correlation="corr-14"),
        b"r14",
        v2=False,
    )
    for step, answer in stored:
        msg_id = (answer.ext_fields or {}).get("msgId", "") if answer is not None else ""
        if len(msg_id) == 32:
            await rec.ask(
                f"stored: {step}",
                R.VIEW_MESSAGE_BY_ID,
                {"offset": str(int(msg_id[-16:], 16))},
                messages=True,
                wait_pushed=0,
            )
    await rec.ask("reply topic stats", R.GET_TOPIC_STATS_INFO, {"topic": REPLY_TOPIC}, wait_pushed=0)
    for conn in rec.conns.values():
        await conn.close()
    return rec.steps
