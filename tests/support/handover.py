"""Raw requests both sides of a store handover answer (``serve --writable`` and the real 4.9.7
broker): SENDs, heartbeats, offset commits and queries, the admin tables; shared by
``tests/server/test_store_handover.py`` and the script that records the broker's config files
(``tests/store/config/golden/record_config_files.py``)."""

from __future__ import annotations

import json

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from store.config.config_file import relaxed_json
from tests.support.harness import RawClient

TOPIC = "HandoverTopic"
QUEUES = 8


async def ok(
    client: RawClient, code: int, fields: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    """The answer to a request that must succeed."""
    answer = await client.call(RawClient.request(code, fields, body))
    assert answer.code == ResponseCode.SUCCESS, (code, answer.code, answer.remark)
    return answer


async def send(client: RawClient, topic: str, queue_id: int, body: bytes) -> None:
    """SEND_MESSAGE_V2 as the Java producer sends it; a new topic gets ``QUEUES`` queues."""
    fields = {"a": "pg", "b": topic, "c": "TBW102", "d": str(QUEUES), "e": str(queue_id), "f": "0",
              "g": "1", "h": "0", "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    await ok(client, RequestCode.SEND_MESSAGE_V2, fields, body)


def heartbeat_body(client_id: str, group: str, topic: str, model: str = "CLUSTERING") -> bytes:
    subscription = {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1}
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [subscription],
                "unitMode": False}  # fmt: skip
    return json.dumps({"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": []}).encode()


async def commit(client: RawClient, group: str, topic: str, queue_id: int, offset: int) -> None:
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}
    await ok(client, RequestCode.UPDATE_CONSUMER_OFFSET, fields)


async def offsets(client: RawClient, group: str, topic: str) -> list[tuple[int, str | None]]:
    """QUERY_CONSUMER_OFFSET for every queue: (code, offset) each."""
    answers = []
    for queue_id in range(QUEUES):
        fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
        answer = await client.call(RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
        answers.append((answer.code, (answer.ext_fields or {}).get("offset")))
    return answers


async def max_offsets(client: RawClient, topic: str) -> list[str]:
    answers = []
    for queue_id in range(QUEUES):
        answer = await ok(client, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        answers.append(answer.ext_fields["offset"])
    return answers


async def all_topics(client: RawClient) -> dict[str, dict[str, object]]:
    """GET_ALL_TOPIC_CONFIG's table: topic -> its config."""
    answer = await ok(client, RequestCode.GET_ALL_TOPIC_CONFIG)
    return relaxed_json(bytes(answer.body or b"").decode())["topicConfigTable"]  # type: ignore[index]


async def all_groups(client: RawClient) -> dict[str, dict[str, object]]:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's table: group -> its config."""
    answer = await ok(client, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    return relaxed_json(bytes(answer.body or b"").decode())["subscriptionGroupTable"]  # type: ignore[index]


def queue_config(entry: dict[str, object]) -> tuple[object, object, object]:
    return entry["readQueueNums"], entry["writeQueueNums"], entry["perm"]


#: Offsets committed by the tests: group -> {queue id: offset} (not every queue, not all equal).
COMMITTED = {"GroupA": {0: 1, 1: 2, 2: 3, 3: 0, 4: 1, 5: 2, 6: 3, 7: 3}, "GroupB": {0: 2, 5: 1}}
