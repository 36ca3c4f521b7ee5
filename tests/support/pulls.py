"""PULL_MESSAGE as the Java tools send it, and a pull answer's body split into its records.

Shared by the server's pull tests (the golden consume-queue answers, the recorded Java pulls, tag
filtering and long polling, read-only serving) and the script that recorded ``java_pulls.json``.
"""

from __future__ import annotations

import json


def pull_fields(topic: str, queue_id: int, offset: int, max_nums: int) -> dict[str, str]:
    """What DefaultMQPullConsumer sends (sysFlag 4: subscription only, no commit, no suspend)."""
    return {
        "consumerGroup": "TOOLS_CONSUMER",
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "20000",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }


def records(body: bytes | None) -> list[bytes]:
    """A pull body split into its records (each starts with its total size)."""
    data = bytes(body or b"")
    out = []
    position = 0
    while position < len(data):
        size = int.from_bytes(data[position : position + 4], "big")
        out.append(data[position : position + size])
        position += size
    return out


def heartbeat(client_id: str, group: str, topics: dict[str, str], *, model: str = "CLUSTERING") -> bytes:
    """The HEART_BEAT body of a pulling consumer: one group subscribing ``topics`` (topic -> tag
    expression), as the Java client registers it before it pulls."""
    subs = [
        {"topic": t, "subString": e, "tagsSet": [] if e == "*" else e.split(" || "), "subVersion": 1}
        for t, e in topics.items()
    ]
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": model,
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": subs,
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    ).encode()
