"""PULL_MESSAGE as the Java tools send it, and a pull answer's body split into its records.

Shared by the server's pull tests (the golden consume-queue answers, the recorded Java pulls, tag
filtering and long polling, read-only serving) and the script that recorded ``java_pulls.json``.
"""

from __future__ import annotations


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
