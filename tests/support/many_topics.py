"""The script of ``tests/server/golden/record_many_topics.py`` (issue 30: answers on a many-topic store
byte-identical to the real 4.9.7 broker's), shared by the recorder and the replay against our server
(``tests/server/test_many_topics_golden.py``), so any difference is the server's.

``requests()`` is the whole sequence, made from a fixed seed, in the order it is sent (one request at a
time on one connection, JSON headers; the broker runs admin requests on a pool of threads, so they are
never pipelined):

1. ``TOPICS`` UPDATE_AND_CREATE_TOPIC: ``ScaleTopic-NNNN`` names, every 10th a ``%RETRY%`` name, every
   25th a ``%DLQ%`` name, some with ``|`` and ``_``; read and write queue counts 1-16 (often unequal),
   perm among 6, 2, 4, 7, 3, both filter types, sys flags 0-3, ``order`` true or false;
2. ``UPDATED`` of those topics created again with another config (an update in place);
3. ``GROUPS`` UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ``ScaleGroup-NNNN`` (some ``_`` / ``-`` / ``%``
   names), bodies from ``{"groupName"}`` alone to every field, ``consumeMessageOrderly`` sometimes,
   an unknown field sometimes; then ``UPDATED`` of them again with another body;
4. DELETE_TOPIC_IN_BROKER of ``DELETED`` topics (one never created), DELETE_SUBSCRIPTIONGROUP of
   ``DELETED`` groups (``removeOffset`` alternating; one never created);
5. ``RECREATED`` of the deleted topics created again (they go to the end of their hash bucket);
6. SEND_MESSAGE: ``SENT_TOPICS`` writable topics get 1-4 messages each on queues below their write
   count; two sends to topics that do not exist create them from ``TBW102`` (``AUTO_TOPICS``); then
   a pause of ``SETTLE_S``;
7. GET_TOPIC_STATS_INFO of ``stats_topics()``: topics with messages, without, a deleted one, one never
   created, an auto-created one, a topic without read perm, a ``%RETRY%`` one;
8. GET_ALL_TOPIC_CONFIG, then GET_ALL_SUBSCRIPTIONGROUP_CONFIG.

``play`` returns every answer's code and remark (and a send's queue and offset), the bodies of step 7
and 8 verbatim, and ``plan_digest`` (a hash of the requests) so a recording and a replay of different
scripts are never compared. ``normalised`` blanks what the broker takes from its clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from protocol.codes import RequestCode as R
from protocol.command import RemotingCommand
from tests.support.harness import RawClient

SEED = 30
TOPICS = 3000
GROUPS = 3000
UPDATED = 50
DELETED = 40
RECREATED = 10
SENT_TOPICS = 30
AUTO_TOPICS = ("ScaleAuto-1", "ScaleAuto-2")
PGROUP = "ScaleProducer"
BORN = 1_700_000_000_000
#: Seconds between the last send and the first GET_TOPIC_STATS_INFO: the broker builds its consume
#: queues on its reput thread, a little after SEND_OK (asked at once, the broker's first recording
#: showed ``ScaleAuto-1``'s queue, written just before, still empty): the stats of the settled store.
SETTLE_S = 1.0


@dataclass(frozen=True)
class Step:
    """One request of the script: ``kind`` names what it is for the recording."""

    kind: str
    code: int
    fields: dict[str, str] | None
    body: bytes | None = None


def topic_name(i: int) -> str:
    if i % 25 == 0:
        return f"%DLQ%ScaleGroup-{i:04d}"
    if i % 10 == 0:
        return f"%RETRY%ScaleGroup-{i:04d}"
    if i % 37 == 0:
        return f"Scale|Topic_{i:04d}"
    return f"ScaleTopic-{i:04d}"


def group_name(i: int) -> str:
    if i % 41 == 0:
        return f"Scale_Group%{i:04d}"
    return f"ScaleGroup-{i:04d}"


def _topic_fields(rng: random.Random, name: str) -> dict[str, str]:
    read = rng.randint(1, 16)
    write = read if rng.random() < 0.5 else rng.randint(1, 16)
    return {
        "topic": name,
        "defaultTopic": "TBW102",
        "readQueueNums": str(read),
        "writeQueueNums": str(write),
        "perm": str(rng.choice((6, 6, 6, 6, 2, 4, 7, 3))),
        "topicFilterType": rng.choice(("SINGLE_TAG", "SINGLE_TAG", "MULTI_TAG")),
        "topicSysFlag": str(rng.choice((0, 0, 0, 1, 2, 3))),
        "order": rng.choice(("false", "false", "true")),
    }


def _group_body(rng: random.Random, name: str) -> bytes:
    body: dict[str, Any] = {"groupName": name}
    shape = rng.randint(0, 3)
    if shape >= 1:
        body["consumeEnable"] = rng.random() < 0.8
        body["retryMaxTimes"] = rng.randint(0, 32)
    if shape >= 2:
        body["consumeFromMinEnable"] = rng.random() < 0.7
        body["consumeBroadcastEnable"] = rng.random() < 0.3
        body["retryQueueNums"] = rng.randint(1, 4)
        body["brokerId"] = rng.choice((0, 0, 1))
        body["whichBrokerWhenConsumeSlowly"] = rng.choice((1, 1, 0))
        body["notifyConsumerIdsChangedEnable"] = rng.random() < 0.8
    if shape == 3 and rng.random() < 0.5:
        body["consumeMessageOrderly"] = rng.random() < 0.5
    if rng.random() < 0.05:
        body["someFieldTheBrokerDoesNotKnow"] = 1
    return json.dumps(body, separators=(",", ":")).encode()


def _properties(**values: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items())


def _send_fields(topic: str, queue: int, n: int) -> dict[str, str]:
    return {
        "producerGroup": PGROUP,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue),
        "sysFlag": "0",
        "bornTimestamp": str(BORN + n),
        "flag": "0",
        "properties": _properties(TAGS=f"t{n % 3}", UNIQ_KEY=f"C0FFEE30{n:024X}", WAIT="true"),
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }


class Plan:
    """The script's requests, and which topics it left in which state (for ``stats_topics``)."""

    def __init__(self) -> None:
        rng = random.Random(SEED)
        self.steps: list[Step] = []
        topics: dict[str, dict[str, str]] = {}
        for i in range(1, TOPICS + 1):
            fields = _topic_fields(rng, topic_name(i))
            topics[fields["topic"]] = fields
            self.steps.append(Step("create topic", R.UPDATE_AND_CREATE_TOPIC, fields))
        names = list(topics)
        for name in rng.sample(names, UPDATED):
            fields = _topic_fields(rng, name)
            topics[name] = fields
            self.steps.append(Step("update topic", R.UPDATE_AND_CREATE_TOPIC, fields))
        groups = [group_name(i) for i in range(1, GROUPS + 1)]
        for name in groups:
            self.steps.append(
                Step("create group", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, _group_body(rng, name))
            )
        for name in rng.sample(groups, UPDATED):
            self.steps.append(
                Step("update group", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, _group_body(rng, name))
            )
        deleted = rng.sample(names, DELETED)
        for name in [*deleted, "ScaleNeverCreated"]:
            self.steps.append(Step("delete topic", R.DELETE_TOPIC_IN_BROKER, {"topic": name}))
            topics.pop(name, None)
        for n, name in enumerate([*rng.sample(groups, DELETED), "ScaleGroupNeverCreated"]):
            fields = {"groupName": name, "removeOffset": "true" if n % 2 else "false"}
            self.steps.append(Step("delete group", R.DELETE_SUBSCRIPTIONGROUP, fields))
        for name in deleted[:RECREATED]:
            fields = _topic_fields(rng, name)
            topics[name] = fields
            self.steps.append(Step("recreate topic", R.UPDATE_AND_CREATE_TOPIC, fields))
        self.deleted = deleted[RECREATED:]
        writable = [n for n, f in topics.items() if int(f["perm"]) & 2 and not n.startswith("%")]
        self.sent = rng.sample(writable, SENT_TOPICS)
        self.unsent = [n for n in writable if n not in self.sent][:3]
        picked = {*self.sent, *self.unsent}
        self.unreadable = next(n for n, f in topics.items() if not int(f["perm"]) & 4 and n not in picked)
        self.retry = next(n for n in topics if n.startswith("%RETRY%"))
        n = 0
        for name in self.sent:
            write = int(topics[name]["writeQueueNums"])
            for _ in range(rng.randint(1, 4)):
                n += 1
                fields = _send_fields(name, rng.randrange(write), n)
                self.steps.append(Step("send", R.SEND_MESSAGE, fields, f"body-{n}".encode()))
        for name in AUTO_TOPICS:
            n += 1
            self.steps.append(
                Step("send", R.SEND_MESSAGE, _send_fields(name, n % 4, n), f"body-{n}".encode())
            )
        for name in self.stats_topics():
            self.steps.append(Step("topic stats", R.GET_TOPIC_STATS_INFO, {"topic": name}))
        self.steps.append(Step("all topic config", R.GET_ALL_TOPIC_CONFIG, None))
        self.steps.append(Step("all subscription group config", R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None))

    def stats_topics(self) -> list[str]:
        return [
            *self.sent[:8],
            self.sent[-1],
            *self.unsent,
            self.deleted[0],
            "ScaleNeverCreated",
            AUTO_TOPICS[0],
            self.unreadable,
            self.retry,
        ]

    def digest(self) -> str:
        """A hash of every request (code, fields in order, body): equal digests, equal scripts."""
        h = hashlib.sha256()
        for step in self.steps:
            h.update(json.dumps([step.code, step.fields, step.body.decode() if step.body else None]).encode())
        return h.hexdigest()


def _requests(plan: Plan) -> Iterator[tuple[Step, RemotingCommand]]:
    for step in plan.steps:
        yield step, RawClient.request(step.code, dict(step.fields) if step.fields else None, step.body)


async def play(port: int) -> dict[str, Any]:
    """The script against the server on ``port``: each answer's code and remark (``answers``, one a
    request; a send's also its queue and offset), the bodies of the stats and all-config answers as
    the server wrote them (``topicStats``: topic -> [code, remark, body]), and ``planDigest``."""
    plan = Plan()
    client = await RawClient.connect("127.0.0.1", port)
    answers: list[list[Any]] = []
    stats: dict[str, list[Any]] = {}
    bodies: dict[str, str] = {}
    try:
        for step, request in _requests(plan):
            if step.code == R.GET_TOPIC_STATS_INFO and not stats:
                await asyncio.sleep(SETTLE_S)
            answer = await client.call(request)
            row: list[Any] = [answer.code, answer.remark]
            ext = answer.ext_fields or {}
            if step.code == R.SEND_MESSAGE:
                row += [ext.get("queueId"), ext.get("queueOffset")]
            answers.append(row)
            text = answer.body.decode() if answer.body else None
            if step.code == R.GET_TOPIC_STATS_INFO:
                stats[request.ext_fields["topic"]] = [answer.code, answer.remark, text]  # type: ignore[index]
            elif step.code == R.GET_ALL_TOPIC_CONFIG:
                bodies["allTopicConfig"] = text or ""
            elif step.code == R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
                bodies["allSubscriptionGroupConfig"] = text or ""
    finally:
        await client.close()
    return {"planDigest": plan.digest(), "answers": answers, "topicStats": stats, **bodies}


_DATA_VERSION_TIME = re.compile(r'("timestamp"\s*:\s*)(\d+)')
_LAST_UPDATE = re.compile(r'("lastUpdateTimestamp"\s*:\s*)([1-9]\d*)')


def normalised(text: str) -> str:
    """``text`` with the clock's values blanked: every ``dataVersion`` ``"timestamp"`` (the only
    field of that name in the tables and in the files) and every non-zero ``lastUpdateTimestamp``
    of a stats body (the store time of a queue's last message; 0, an empty queue, is kept)."""
    text = _DATA_VERSION_TIME.sub(r"\g<1>0", text)
    return _LAST_UPDATE.sub(r"\g<1>1", text)


def clock_values(text: str) -> list[int]:
    """The values ``normalised`` blanks, in order (kept in the recording, checked for plausibility)."""
    return [int(m.group(2)) for m in _DATA_VERSION_TIME.finditer(text)] + [
        int(m.group(2)) for m in _LAST_UPDATE.finditer(text)
    ]


async def all_configs(port: int) -> dict[str, str]:
    """GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG bodies as the server wrote them (after
    a restart on the script's store: the tables as the server loads them from its files)."""
    client = await RawClient.connect("127.0.0.1", port)
    try:
        topics = await client.call(RawClient.request(R.GET_ALL_TOPIC_CONFIG))
        groups = await client.call(RawClient.request(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    finally:
        await client.close()
    return {
        "allTopicConfig": topics.body.decode() if topics.body else "",
        "allSubscriptionGroupConfig": groups.body.decode() if groups.body else "",
    }
