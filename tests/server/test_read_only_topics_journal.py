"""A read-only server lists the topics a writable one holds only in ``topics.json``'s journal.

``serve --writable`` makes a topic change durable by appending it to ``config/topics.json.journal``
and rewrites ``topics.json`` whole a moment later (``store/config/journal.py``); a kill -9 in between
leaves the change in the journal alone. A read-only ``serve`` on that store (beside the writable one,
or after it) must answer the topic list, routes and topic stats as the writable server did.

The whole write is held off here (its delay made long), so the changes are in the journal alone
while both servers answer: the test checks that first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.journal import journal_path
from store.config.store_config import StoreConfig
from store.config.topics import AUTO_CREATE_TOPIC
from store.message_store import MessageStore
from tests.support.harness import RawClient

#: Topics the writable server creates over the wire (8 queues each) ...
CREATED = ("Asked0", "Asked1", "Asked2")
#: ... and the one it creates at start (saved whole) and then deletes.
DELETED = "Doomed"


async def _call(client: RawClient, code: int, fields: dict[str, str] | None = None) -> tuple[int, bytes]:
    answer = await client.call(RawClient.request(code, fields))
    return answer.code, bytes(answer.body or b"")


async def _answers(port: int, topics: list[str]) -> dict[str, object]:
    """The topic list, and each topic's route (queue datas; the broker's address differs between the
    servers) and stats as the server at ``port`` answers them."""
    client = await RawClient.connect("127.0.0.1", port)
    try:
        code, body = await _call(client, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert code == ResponseCode.SUCCESS
        out: dict[str, object] = {"list": sorted(json.loads(body)["topicList"])}
        for topic in topics:
            code, body = await _call(client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            out["route " + topic] = (code, json.loads(body)["queueDatas"] if body else None)
            code, body = await _call(client, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            out["stats " + topic] = (code, body if code == ResponseCode.SUCCESS else None)
        return out
    finally:
        await client.close()


async def test_a_read_only_server_answers_the_topics_the_journal_alone_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("store.config.persister.WHOLE_WRITE_AFTER_S", 600.0)
    config = StoreConfig.for_store(tmp_path / "store", broker_name="b1", mapped_file_size_commit_log=1 << 20)
    store = WritableStore(config)
    store.create_topic(DELETED, 2)  # saved whole: the file lists it
    writable = QueryServer(
        store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store)
    )
    await writable.start()
    reader: MessageStore | None = None
    read_only: QueryServer | None = None
    try:
        client = await RawClient.connect("127.0.0.1", writable.port)
        try:
            for name in CREATED:
                fields = {
                    "topic": name, "defaultTopic": AUTO_CREATE_TOPIC, "readQueueNums": "8",
                    "writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0", "order": "false",
                }  # fmt: skip
                assert (await _call(client, RequestCode.UPDATE_AND_CREATE_TOPIC, fields))[0] == 0
            code, _ = await _call(client, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": DELETED})
            assert code == ResponseCode.SUCCESS
        finally:
            await client.close()
        topics_json = config.store_path_root_dir / "config" / "topics.json"
        # the changes are in the journal alone: the file still lists the deleted topic, none created
        listed = json.loads(topics_json.read_text(encoding="utf-8"))["topicConfigTable"]
        assert DELETED in listed and not set(CREATED) & set(listed)
        assert journal_path(topics_json).stat().st_size > 0

        topics = [*CREATED, DELETED]
        expected = await _answers(writable.port, topics)
        assert set(CREATED) <= set(expected["list"]) and DELETED not in expected["list"]  # type: ignore[operator]
        assert expected["route " + DELETED][0] == ResponseCode.TOPIC_NOT_EXIST  # type: ignore[index]

        reader = MessageStore.open(config)
        read_only = QueryServer(reader, ServerSettings(port=0, broker_name="b1"))
        await read_only.start()
        assert await _answers(read_only.port, topics) == expected
    finally:
        if read_only is not None:
            await read_only.stop()
        if reader is not None:
            reader.close()
        await writable.stop()
        store.close()
