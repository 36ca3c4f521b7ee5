"""A held pull wakes for a message stored before its hold began waiting (issue 33's end-to-end p99).

Under ``serve --writable`` a pull that finds nothing returns its hold as a coroutine, which runs as
a task from the next turn of the event loop; a SEND handled before that turn (the next frame of the
same read, or another connection's) wakes the pulls waiting on its queue, and this one was not yet
waiting. The broker's ``PullRequestHoldService`` looks at the queue again when a request is
suspended as when a message arrives; so must the hold, or the message waits for the next one on its
queue (or the hold's periodic look, made an hour long here so that a missed wake-up cannot hide).
"""

from __future__ import annotations

from protocol.codes import RequestCode, ResponseCode
from server.remoting.processors import pull_message
from tests.support.harness import RawClient
from tests.support.pulls import pull_fields, records


def _send(topic: str, body: bytes) -> RawClient:
    fields = {
        "a": "g", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
        "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false",
    }  # fmt: skip
    return RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, body)


async def test_a_pull_held_behind_a_send_of_the_same_read_answers_it(writable_server, monkeypatch) -> None:
    monkeypatch.setattr(pull_message, "HOLD_RECHECK_SECONDS", 3600.0)
    srv, _store = writable_server
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        first = await client.call(_send("Wake", b"first"))
        assert (first.code, first.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "0")
        # queue 0 ends at 1: the pull is held; the SEND right behind it in one write adds offset 1
        fields = {**pull_fields("Wake", 0, 1, 32), "sysFlag": "6", "suspendTimeoutMillis": "600000"}
        held = RawClient.request(RequestCode.PULL_MESSAGE, fields)
        second = _send("Wake", b"second")
        await client.send(held, second)
        answers = {}
        for _ in range(2):
            answer = await client.receive(timeout=10)
            answers[answer.opaque] = answer
        assert answers[second.opaque].code == ResponseCode.SUCCESS
        pulled = answers[held.opaque]
        assert (pulled.code, pulled.remark) == (ResponseCode.SUCCESS, "FOUND")
        assert pulled.ext_fields["nextBeginOffset"] == "2"
        (record,) = records(pulled.body)
        assert b"\x00\x00\x00\x06second\x04Wake" in record  # body length, body, topic
    finally:
        await client.close()
