"""Delayed messages over a socket (issue 18, item 3): DELAY read with Java's ``Integer.parseInt``, and
scheduled delivery resumed when the server starts.

Before: a DELAY that Python's ``int`` takes and Java refuses (``" 3"``, ``"1_0"``, ``"2147483648"``)
was answered SEND_OK and stored in ``SCHEDULE_TOPIC_XXXX`` without its queue entry (the reput's own
parse refuses it), so it was never delivered and the schedule queue's offsets no longer matched its
records; and a message pending across a restart waited for some new delayed SEND to arm the timer.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader, client_properties
from server.app import QueryServer, ServerSettings
from server.broker.put_message import PutContext, single_record
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.check.consume_queues import check_consume_queues
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient

#: The broker's answer to a DELAY ``Integer.parseInt`` refuses, as the real 4.9.7 broker on JDK 17
#: words it (``RemotingHelper.exceptionSimpleDesc``: the exception, then its top frame).
_FRAME = "java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)"


def _v2(topic: str, props: str) -> dict[str, str]:
    return {
        "a": "g",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1",
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
        "m": "false",
    }


@pytest.mark.parametrize(
    "delay",
    [" 3", "3 ", "1_0", "2147483648", "99999999999", "+", "0x3", "\U0001d7d1"],
    ids=["leading-space", "trailing-space", "underscore", "int-max+1", "11-digits", "sign", "hex", "non-bmp"],
)
async def test_a_delay_java_cannot_parse_is_refused_as_the_broker_refuses_it(
    writable_server, delay: str
) -> None:
    srv, store = writable_server
    store.create_topic("T", 1)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        for props in (f"DELAY\x01{delay}\x02WAIT\x01true", f"DELAY\x01{delay}\x02TRAN_MSG\x01true"):
            answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T", props), b"x"))
            assert answer.code == ResponseCode.SYSTEM_ERROR, answer.remark
            assert answer.remark == f'java.lang.NumberFormatException: For input string: "{delay}", {_FRAME}'
    finally:
        await client.close()
    assert list(store.reader.commitlog.iter_records()) == [], "a refused SEND stores nothing"


async def test_delays_java_parses_are_scheduled_with_their_queue_entries(writable_server) -> None:
    """``+3``, ``003`` and an Arabic-Indic three (``Character.digit`` takes it) are level 3, ``-3``
    and ``0`` no delay: every record has its queue entry, in order (the consume queues' own check)."""
    srv, store = writable_server
    store.create_topic("T", 1)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        for delay in ("+3", "003", "\u0663", "-3", "0"):
            props = f"DELAY\x01{delay}\x02WAIT\x01true"
            answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T", props), b"x"))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
    finally:
        await client.close()
    topics = [decode_message(buf, read_body=False).topic for _, buf in store.reader.commitlog.iter_records()]
    assert topics == ["SCHEDULE_TOPIC_XXXX"] * 3 + ["T"] * 2
    assert store.reader.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 3
    assert store.reader.max_offset("T", 0) == 2
    assert check_consume_queues(store.config, store.reader.commitlog).problems == []


async def test_a_delivery_pending_across_a_restart_is_made_without_a_new_delayed_send(tmp_path: Path) -> None:
    """A level-1 message stored 0.8 s before the server starts is due 0.2 s after: it is delivered
    by the server's own timer, with no SEND at all (before: never, until another delayed SEND)."""
    config = StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1"
    )
    header = SendMessageRequestHeader(
        "g", "T", "TBW102", 4, 0, 0, 5, 0, client_properties("k", None, None, "U-k", 1)
    )
    stored_at = int(time.time() * 1000) - 800
    with WritableStore(config, clock=lambda: stored_at) as store:
        store.put([single_record(header, b"later", PutContext("DefaultCluster", 4096, "127.0.0.1", 9))])
    store = WritableStore(config)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    try:
        for _ in range(100):
            if store.reader.max_offset("T", 0):
                break
            await asyncio.sleep(0.05)
        (buf,) = store.reader.get_message("T", 0, 0, 32).buffers
        delivered = decode_message(buf)
        assert delivered.body == b"later" and delivered.store_timestamp >= stored_at + 1000
    finally:
        await srv.stop()
        store.close()
