"""Record what a real 4.9.7 broker answers to tag-filtered and edge-case pulls (run by hand).

    python tests/server/golden/record_java_pulls.py BROKER_PORT > tests/server/golden/java_pulls.json

The broker (``bin/start-broker.sh`` of a copy of ``../shared/rocketmq-4.9.7-bin``, see its README)
must serve an untouched ``cp -a`` copy of ``../shared/stores/java-4.9.7-a``. Each request is a
PULL_MESSAGE as ``DefaultMQPullConsumer`` sends it with one change (subscription, offset,
maxMsgNums, queue, topic); the answer is kept as code, remark, extFields and the sha256 of its body
(the records' raw bytes). The requests are drawn with a fixed seed, so a second recording gives the
same file. ``test_java_pulls.py`` replays them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from protocol.codes import RequestCode
from tests.support.harness import RawClient
from tests.support.pulls import pull_fields

TOPICS = {"TopicA": 4, "TopicB": 4, "topic_c-1": 4}
EXPRESSIONS = [
    "*",
    "tag1",
    "tag3",
    "tag1||tag3",
    " tag3 || tag1 ",
    "tag2",
    "tag0||tag2",
    "TagA",
    "nomatch",
    "",
]


#: The fields that vary; the rest are ``pull_fields``'s.
VARIED = ("topic", "queueId", "queueOffset", "maxMsgNums", "subscription")


def requests(count: int = 400) -> list[dict[str, str]]:
    rng = random.Random(20261122)
    out = []
    for _ in range(count):
        topic = rng.choice(sorted(TOPICS))
        queue_id = rng.randrange(TOPICS[topic])
        offset = rng.choice(
            [
                0,
                1,
                rng.randrange(0, 330),
                rng.randrange(0, 330),
                rng.randrange(0, 416),
                329,
                330,
                331,
                416,
                417,
                495,
                500,
            ]
        )
        max_nums = rng.choice([1, 2, 7, 32, 32, 32, 64, 1000])
        fields = pull_fields(topic, queue_id, offset, max_nums)
        fields["subscription"] = rng.choice(EXPRESSIONS)
        out.append(fields)
    return out


async def record(port: int) -> list[dict[str, object]]:
    client = await RawClient.connect("127.0.0.1", port)
    answers = []
    try:
        for fields in requests():
            answer = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))
            body = bytes(answer.body or b"")
            answers.append(
                {
                    "request": {k: fields[k] for k in VARIED},
                    "code": answer.code,
                    "remark": answer.remark,
                    "extFields": answer.ext_fields,
                    "bodyLength": len(body),
                    "bodySha256": hashlib.sha256(body).hexdigest(),
                }
            )
    finally:
        await client.close()
    return answers


if __name__ == "__main__":
    result = asyncio.run(record(int(sys.argv[1])))
    sys.stdout.write('{"recordedFrom": "Apache RocketMQ 4.9.7 broker (JDK 17) over java-4.9.7-a",\n')
    sys.stdout.write(' "pulls": [\n')
    sys.stdout.write(",\n".join("  " + json.dumps(answer, ensure_ascii=False) for answer in result))
    sys.stdout.write("\n ]}\n")
