"""400 pulls (tag expressions, offsets around the ends of queues, batch sizes) answered as the real
4.9.7 broker answered them over the same store (``golden/java_pulls.json``, recorded with
``golden/record_java_pulls.py``): code, remark, header fields in order, and the body's sha256."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from protocol.codes import RequestCode
from tests.support.harness import RawClient, StartServer
from tests.support.pulls import pull_fields

GOLDEN = Path(__file__).parent / "golden" / "java_pulls.json"


async def test_pulls_answer_as_the_real_broker(start_server: StartServer) -> None:
    pulls = json.loads(GOLDEN.read_text(encoding="utf-8"))["pulls"]
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        for number, expected in enumerate(pulls):
            varied = expected["request"]
            fields = {
                **pull_fields(varied["topic"], int(varied["queueId"]), int(varied["queueOffset"]), 32),
                **varied,
            }
            answer = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))
            what = f"pull {number}: {varied}"
            assert (answer.code, answer.remark) == (expected["code"], expected["remark"]), what
            assert list((answer.ext_fields or {}).items()) == list(expected["extFields"].items()), what
            body = bytes(answer.body or b"")
            assert (len(body), hashlib.sha256(body).hexdigest()) == (
                expected["bodyLength"],
                expected["bodySha256"],
            ), what
    finally:
        await client.close()
    assert {p["code"] for p in pulls} == {0, 19, 20, 21}
