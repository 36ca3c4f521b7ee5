"""Every answer in ``java-4.9.7-a.cq-expected.json``, asked through the server in both serializations.

The real 4.9.7 store answered min/max offset, earliest time, offset by time (9000 timestamps),
getMessage probes and a full walk of every queue, and the topic stats; the broker maps those to
GET_MIN_OFFSET, GET_MAX_OFFSET, GET_EARLIEST_MSG_STORETIME, SEARCH_OFFSET_BY_TIMESTAMP, PULL_MESSAGE
and GET_TOPIC_STATS_INFO answers (``stores/README.md``: FOUND -> 0, OFFSET_OVERFLOW_ONE -> 19,
OFFSET_OVERFLOW_BADLY / OFFSET_TOO_SMALL -> 21, the status name as remark). Each record of a pull
body is checked against the raw sha256 the Java store gave for it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.topic_stats import decode_topic_stats
from tests.support.harness import RawClient, StartServer
from tests.support.pulls import pull_fields, records

EXPECTED = "java-4.9.7-a.cq-expected.json"

#: The broker's answer code for each store status (PullMessageProcessor).
PULL_CODES = {
    "FOUND": ResponseCode.SUCCESS,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}

SERIALIZATIONS = [SerializeType.JSON, SerializeType.ROCKETMQ]


@pytest.fixture(scope="module")
def cq_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / EXPECTED).read_text(encoding="utf-8"))


def request(code: int, fields: dict[str, str], serialize_type: SerializeType) -> RemotingCommand:
    return RawClient.request(code, fields, serialize_type=serialize_type)


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_offsets_earliest_time_and_search_by_time(
    serialize_type: SerializeType, cq_expected: dict[str, Any], start_server: StartServer
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        asked: list[RemotingCommand] = []
        wanted: list[tuple[str, str, int]] = []
        queues = [(t["topic"], q) for t in cq_expected["topics"] for q in t["queues"]]
        queues += [(u["topic"], u) for u in cq_expected["unknownQueues"]]
        for topic, queue in queues:
            base = {"topic": topic, "queueId": str(queue["queueId"])}
            for code, field, value in (
                (RequestCode.GET_MIN_OFFSET, "offset", queue["minOffsetInQueue"]),
                (RequestCode.GET_MAX_OFFSET, "offset", queue["maxOffsetInQueue"]),
                (RequestCode.GET_EARLIEST_MSG_STORETIME, "timestamp", queue["earliestMessageTime"]),
            ):
                asked.append(request(code, base, serialize_type))
                wanted.append((f"{topic}/{queue['queueId']} code {code}", field, value))
            for timestamp, offset in queue["offsetByTime"]:
                fields = {**base, "timestamp": str(timestamp)}
                asked.append(request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields, serialize_type))
                wanted.append((f"{topic}/{queue['queueId']} search {timestamp}", "offset", offset))
        answers = await client.ask_all(asked)
        assert len(asked) > 9000
        for answer, (what, field, value) in zip(answers, wanted, strict=True):
            assert answer.code == ResponseCode.SUCCESS, what
            assert answer.serialize_type == serialize_type
            assert answer.ext_fields == {field: str(value)}, what
    finally:
        await client.close()


def check_pull(answer: RemotingCommand, probe: dict[str, Any], what: str) -> None:
    assert answer.code == PULL_CODES[probe["status"]], what
    assert answer.remark == probe["status"], what
    assert answer.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": str(probe["nextBeginOffset"]),
        "maxOffset": str(probe["maxOffset"]),
        "minOffset": str(probe["minOffset"]),
    }, what
    got = records(answer.body)
    messages = probe["messages"]
    if messages and isinstance(messages[0], list):  # the walk's compact form
        messages = [{"size": m[2], "rawSha256": m[4]} for m in messages]
    assert [len(r) for r in got] == [m["size"] for m in messages], what
    assert [hashlib.sha256(r).hexdigest() for r in got] == [m["rawSha256"] for m in messages], what
    assert len(bytes(answer.body or b"")) == probe.get("bufferTotalSize", len(bytes(answer.body or b"")))


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_pull_probes_and_walk_every_queue(
    serialize_type: SerializeType, cq_expected: dict[str, Any], start_server: StartServer
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        asked: list[RemotingCommand] = []
        probes: list[tuple[dict[str, Any], str]] = []
        for topic_entry in cq_expected["topics"]:
            topic = topic_entry["topic"]
            for queue in topic_entry["queues"]:
                qid = queue["queueId"]
                for probe in queue["getMessage"] + queue["walk"]:
                    fields = pull_fields(topic, qid, probe["offset"], probe["maxMsgNums"])
                    asked.append(request(RequestCode.PULL_MESSAGE, fields, serialize_type))
                    probes.append((probe, f"{topic}/{qid} offset {probe['offset']}"))
        answers = await client.ask_all(asked)
        for answer, (probe, what) in zip(answers, probes, strict=True):
            assert answer.serialize_type == serialize_type
            check_pull(answer, probe, what)
        queues = [q for t in cq_expected["topics"] for q in t["queues"]]
        walked = sum(len(p["messages"]) for q in queues for p in q["walk"])
        assert walked == 4980  # every consume-queue entry of the store
    finally:
        await client.close()


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_topic_stats(
    serialize_type: SerializeType, cq_expected: dict[str, Any], start_server: StartServer
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        for topic, rows in cq_expected["topicStats"].items():
            answer = await client.call(
                request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, serialize_type)
            )
            assert answer.code == ResponseCode.SUCCESS
            got = sorted(decode_topic_stats(bytes(answer.body or b"")), key=lambda r: r.queue_id)
            assert [(r.queue_id, r.min_offset, r.max_offset, r.last_update_timestamp) for r in got] == [
                (r["queueId"], r["minOffset"], r["maxOffset"], r["lastUpdateTimestamp"]) for r in rows
            ]
            assert {(r.broker_name, r.topic) for r in got} == {("broker-a", topic)}
    finally:
        await client.close()


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_unknown_topic_and_queue_pulls_are_refused_before_the_store(
    serialize_type: SerializeType, start_server: StartServer
) -> None:
    """The store answers NO_MESSAGE_IN_QUEUE for them, but the broker never asks it: an unknown topic
    is TOPIC_NOT_EXIST, a queue id past the read queue count SYSTEM_ERROR naming the consumer."""
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        answer = await client.call(
            request(RequestCode.PULL_MESSAGE, pull_fields("NoSuchTopic", 0, 0, 32), serialize_type)
        )
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        assert answer.remark == (
            "topic[NoSuchTopic] not exist, apply first please! \n"
            "See http://rocketmq.apache.org/docs/faq/ for further details."
        )
        answer = await client.call(
            request(RequestCode.PULL_MESSAGE, pull_fields("TopicA", 4, 0, 32), serialize_type)
        )
        host, port = client.writer.get_extra_info("sockname")[:2]
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == (
            f"queueId[4] is illegal, topic:[TopicA] topicConfig.readQueueNums:[4] consumer:[/{host}:{port}]"
        )
        stats = await client.call(
            request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"}, serialize_type)
        )
        assert (stats.code, stats.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")
    finally:
        await client.close()
