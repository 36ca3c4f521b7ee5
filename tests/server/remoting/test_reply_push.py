"""The reply push's bounds: a requester that never answers, never reads or goes away costs the server
a bounded wait and bounded memory, and never holds up anyone else (issue 32).

The broker waits up to 10 s for the requester's answer to PUSH_REPLY_MESSAGE_TO_CLIENT on a thread
of its own; here the wait is a coroutine, so the event loop serves others meanwhile. A requester
whose connection stopped taking writes (it reads nothing and the push filled its buffers) gets no
second push queued: the next reply's push fails at once. A requester that disconnects fails its
pending push at once instead of after the timeout.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import WritePath, write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
#: The stalled-reader test's per-connection write budget.
LIMIT = 4 * 1024 * 1024


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritePath]]:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store"))
    path = write_path(store)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=path)
    await srv.start()
    try:
        yield srv, path
    finally:
        await srv.stop()
        store.close()


def heartbeat(client_id: str) -> RemotingCommand:
    body = {"clientID": client_id, "producerDataSet": [{"groupName": "Requesters"}], "consumerDataSet": []}
    return RawClient.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode())


def reply(client_id: str, body: bytes = b"the reply") -> RemotingCommand:
    properties = f"MSG_TYPE\x01reply\x02CORRELATION_ID\x01c-1\x02REPLY_TO_CLIENT\x01{client_id}\x02"
    fields = {
        "a": "Repliers", "b": REPLY_TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties, "j": "0", "k": "false",
    }  # fmt: skip
    return RawClient.request(RequestCode.SEND_REPLY_MESSAGE_V2, fields, body)


async def requester(port: int, client_id: str, *, receive_buffer: int | None = None) -> RawClient:
    """A client registered as a producer under ``client_id`` (its heartbeat answered)."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    client = RawClient(reader, writer)
    assert (await client.call(heartbeat(client_id))).code == ResponseCode.SUCCESS
    return client


async def timed_call(client: RawClient, request: RemotingCommand) -> tuple[RemotingCommand, float]:
    started = time.monotonic()
    answer = await client.call(request)
    return answer, time.monotonic() - started


async def test_a_requester_answering_success_gets_the_push_and_the_replier_success(
    served: tuple[QueryServer, WritePath],
) -> None:
    srv, _ = served
    asker = await requester(srv.port, "cid-ok")
    replier = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await replier.send(reply("cid-ok"))
        pushed = await asker.receive()
        assert pushed.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and not pushed.is_response
        assert bytes(pushed.body or b"") == b"the reply"
        assert (pushed.ext_fields or {})["topic"] == REPLY_TOPIC
        await asker.send(RemotingCommand(code=0, flag=1, opaque=pushed.opaque))
        answer = await replier.receive()
        assert answer.code == ResponseCode.SUCCESS
        assert len((answer.ext_fields or {})["msgId"]) == 32  # stored: the record's offset msg id
    finally:
        await asker.close()
        await replier.close()


async def test_a_silent_requester_times_out_without_holding_up_other_clients(
    served: tuple[QueryServer, WritePath],
) -> None:
    srv, path = served
    assert path.replies is not None
    path.replies.push_timeout = 1.5
    silent = await requester(srv.port, "cid-silent")
    replier = await RawClient.connect("127.0.0.1", srv.port)
    other = await RawClient.connect("127.0.0.1", srv.port)
    try:
        pending = asyncio.ensure_future(timed_call(replier, reply("cid-silent")))
        await asyncio.sleep(0.2)  # the push is out and waits
        assert not pending.done()
        max_offset = RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": REPLY_TOPIC, "queueId": "0"})
        answer, took = await timed_call(other, max_offset)
        assert answer.code == ResponseCode.SUCCESS and took < 0.5
        answer, took = await pending
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "push reply message to cid-silentfail.",
        )
        assert 1.2 < took < 5
    finally:
        for client in (silent, replier, other):
            await client.close()


async def test_a_requester_that_disconnects_fails_its_push_at_once(
    served: tuple[QueryServer, WritePath],
) -> None:
    srv, path = served
    assert path.replies is not None
    path.replies.push_timeout = 8.0
    gone = await requester(srv.port, "cid-gone")
    replier = await RawClient.connect("127.0.0.1", srv.port)
    try:
        pending = asyncio.ensure_future(timed_call(replier, reply("cid-gone")))
        pushed = await gone.receive()
        assert pushed.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT
        await gone.close()
        answer, took = await asyncio.wait_for(pending, 5)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "push reply message to cid-gonefail.",
        )
        assert took < 3
        # Gone from the producer table too: the next reply to it finds no connection.
        answer = await replier.call(reply("cid-gone"))
        assert answer.remark == "push reply message fail, channel of <cid-gone> not found."
    finally:
        await replier.close()


async def test_pushes_to_a_requester_that_reads_nothing_stop_at_the_connection_s_write_budget(
    tmp_path: Path,
) -> None:
    """Each push to a stalled reader is a frame of up to a message's size; they are queued only
    while its connection takes writes, and the connection's write budget cuts it off past its
    limit, so what a non-reading requester holds stays bounded and the pushes then fail at once."""
    store = WritableStore(StoreConfig.for_store(tmp_path / "store"))
    path = write_path(store)
    srv = QueryServer(
        store.reader, ServerSettings(port=0, max_queued_bytes_per_connection=LIMIT), configure=path
    )
    await srv.start()
    assert path.replies is not None
    path.replies.push_timeout = 1.0
    stalled = await requester(srv.port, "cid-stalled", receive_buffer=4096)
    replier = await RawClient.connect("127.0.0.1", srv.port)
    body = b"x" * (3 * 1024 * 1024)
    try:
        outcomes = []
        most_queued = 0
        for _ in range(6):
            answer, took = await timed_call(replier, reply("cid-stalled", body))
            outcomes.append((answer.remark, took))
            most_queued = max(most_queued, sum(c.write_buffer_size for c in srv.connections))
        assert all(remark is not None and "cid-stalled" in remark for remark, _ in outcomes), outcomes
        # Once cut off (or not writable) a push fails at once instead of waiting its second.
        assert outcomes[-1][1] < 0.5, outcomes
        assert most_queued <= LIMIT + len(body) + 64 * 1024
        assert await stalled.closed_by_server(5)
    finally:
        await stalled.close()
        await replier.close()
        await srv.stop()
        store.close()


async def test_the_reply_topic_of_the_store_s_cluster_routes_as_the_broker_registers_it(
    tmp_path: Path,
) -> None:
    """``TopicConfigManager`` creates ``<cluster>_REPLY_TOPIC`` at start (1 read and 1 write queue,
    read-write) and the broker registers it with the name server: a replier's route lookup finds it."""
    store = WritableStore(StoreConfig.for_store(tmp_path / "store", broker_cluster_name="MyCluster"))
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        answer = await client.call(
            RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "MyCluster_REPLY_TOPIC"})
        )
        assert answer.code == ResponseCode.SUCCESS
        (queues,) = json.loads(bytes(answer.body or b"{}"))["queueDatas"]
        assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (1, 1, 6)
    finally:
        await client.close()
        await srv.stop()
        store.close()


async def test_with_store_reply_message_enable_off_a_pushed_reply_is_answered_but_not_stored(
    tmp_path: Path,
) -> None:
    """``storeReplyMessageEnable=false``: pushed, answered SUCCESS with msgId ``0`` and queue offset 0
    (``handlePushReplyResult``), nothing written to the reply topic."""
    (tmp_path / "broker.conf").write_text(
        f"storePathRootDir={tmp_path / 'store'}\nstoreReplyMessageEnable=false\n"
    )
    config = StoreConfig.load(tmp_path / "broker.conf")
    assert config.store_reply_message_enable is False
    store = WritableStore(config)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    asker = await requester(srv.port, "cid-ok")
    replier = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await replier.send(reply("cid-ok"))
        pushed = await asker.receive()
        await asker.send(RemotingCommand(code=0, flag=1, opaque=pushed.opaque))
        answer = await replier.receive()
        assert answer.code == ResponseCode.SUCCESS
        fields = answer.ext_fields or {}
        assert (fields["msgId"], fields["queueId"], fields["queueOffset"]) == ("0", "0", "0")
        assert store.reader.max_offset(REPLY_TOPIC, 0) == 0
    finally:
        await asker.close()
        await replier.close()
        await srv.stop()
        store.close()
