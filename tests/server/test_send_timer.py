"""5.x timer messages over the remoting port (a 5.x remoting client's ``setDelayTimeMs``,
``setDeliverTimeMs``): delivered into their topic when due, woken pulls included; a time past
``timerMaxDelaySec`` or one Java cannot parse answered as the 5.x broker answers it, nothing stored."""

from __future__ import annotations

import asyncio
import time

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from tests.support.harness import RawClient

ILLEGAL = (
    "timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set "
    "del msg, the delay time should be bigger than the current time"
)


def _v2(topic: str, props: str) -> dict[str, str]:
    return {"a": "g", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
            "i": props, "j": "0", "k": "false", "m": "false"}  # fmt: skip


async def test_a_timer_send_is_delivered_when_due(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("T", 1)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        sent_ms = int(time.time() * 1000)
        answer = await client.call(
            RawClient.request(
                RequestCode.SEND_MESSAGE_V2, _v2("T", "TIMER_DELAY_MS\x011200\x02UNIQ_KEY\x01U1"), b"x"
            )
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert store.reader.max_offset("T", 0) == 0, "not in its topic at once"
        for _ in range(60):
            if store.reader.max_offset("T", 0):
                break
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    (buf,) = store.reader.get_message("T", 0, 0, 32).buffers
    delivered = decode_message(buf)
    assert delivered.body == b"x" and delivered.properties["UNIQ_KEY"] == "U1"
    assert sent_ms + 1200 <= delivered.store_timestamp <= sent_ms + 1200 + 1000 + 500
    # handed out, then stored (the store time is the writer's clock a moment later)
    assert 0 <= delivered.store_timestamp - int(delivered.properties["TIMER_DEQUEUE_MS"]) < 1000


async def test_refused_timer_sends_store_nothing(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("T", 1)
    far = int(time.time() * 1000) + 259_200_000 + 60_000
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        for props in (f"TIMER_DELIVER_MS\x01{far}", "TIMER_DELAY_SEC\x01 5", "TIMER_DELAY_MS\x011e3"):
            answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T", props), b"x"))
            assert (answer.code, answer.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL), props
    finally:
        await client.close()
    assert list(store.reader.commitlog.iter_records()) == []
