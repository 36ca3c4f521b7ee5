"""Issue 32: a request's reply against ``serve --writable``, step by step against the real 4.9.7 broker.

``golden/record_request_reply.py`` recorded the broker playing ``tests/support/request_reply.py``
(``golden/request_reply_4.9.7.json``): SEND_REPLY_MESSAGE and _V2 in JSON and ROCKETMQ headers, the
PUSH_REPLY_MESSAGE_TO_CLIENT frames it sent the requesters (header fields in their wire order,
properties with ``PUSH_REPLY_TIME``, body), its answers (codes, remarks, the stored message's id and
offsets), the replies as it stored them (read back with VIEW_MESSAGE_BY_ID) and the reply topic's
stats, each serialization on a fresh broker. The replay plays the same script against our server in
process, on a fresh store per serialization, and compares every step, normalised the same way.

One difference is not the reply's: the broker answers VIEW_MESSAGE_BY_ID in JSON whatever the
request's serialization (it writes the record with a header it encodes itself); ours answers in the
request's. The "stored:" steps compare everything else.

The silent requester's push waits 10 s on the broker; here the processor's wait is cut to 0.3 s
(the answer is the same: the push failed), so the replay takes a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import SerializeType
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.request_reply import play

GOLDEN = Path(__file__).parent / "golden"
RECORDING = json.loads((GOLDEN / "request_reply_4.9.7.json").read_text(encoding="utf-8"))


def test_the_recording_shows_the_push_and_the_broker_answers() -> None:
    """What the recording is evidence of, so that a re-recording that lost it is noticed."""
    steps = {s["step"]: s for s in RECORDING["runs"]["JSON"]}
    pushed = steps["reply to R (SEND_REPLY_MESSAGE)"]["brokerRequests"]["R"][0]
    assert pushed["code"] == 326
    assert pushed["body"] == {"text": "reply-1"}
    assert steps["reply to an unknown client"]["answer"]["remark"] == (
        "push reply message fail, channel of <cid-nobody-json> not found."
    )
    assert (
        steps["reply to S (never answers the push)"]["answer"]["remark"]
        == "push reply message to cid-S-jsonfail."
    )


def comparable(step: dict[str, Any]) -> dict[str, Any]:
    out = {"answer": step["answer"], "brokerRequests": step.get("brokerRequests")}
    if step["step"].startswith("stored:") and out["answer"] is not None:
        out["answer"] = {k: v for k, v in out["answer"].items() if k != "serializeType"}
    return out


@pytest.mark.parametrize("ser", [SerializeType.JSON, SerializeType.ROCKETMQ], ids=lambda s: s.name)
async def test_the_recorded_replies_against_our_server(tmp_path: Path, ser: SerializeType) -> None:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store", broker_name="broker-a"))
    path = write_path(store)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=path)
    await srv.start()
    try:
        assert path.replies is not None
        path.replies.push_timeout = 0.3
        steps = await play(srv.port, ser, settle=0.02)
    finally:
        await srv.stop()
        store.close()
    recorded = RECORDING["runs"][ser.name]
    assert [s["step"] for s in steps] == [s["step"] for s in recorded]
    for ours, broker in zip(steps, recorded, strict=True):
        assert comparable(ours) == comparable(broker), ours["step"]
