"""A CommitLog file cut under ``serve --writable``: no SEND is acknowledged that cannot be served.

Issue 18, item 6. The newest CommitLog file is cut in the middle of a record while the server runs.
Before the fix the writer kept appending past the new end (``pwrite`` re-extends the file with a
hole), every SEND was answered SEND_OK, and the reput, stopped at the torn record, never gave those
records to the index or the consume queues: not found by key, not pulled. The broker's answer to a
store it can no longer dispatch is to refuse every put (``makeLogicsQueueError`` ->
``checkStoreStatus``: SERVICE_NOT_AVAILABLE) until its recovery at the next start truncates at the
last whole record; ours now does the same. So each SEND after the cut is either refused or, if
acknowledged, found by its key and pulled from its queue; and after a restart SENDs are taken again.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from clients.producer import Producer
from clients.response_errors import ServiceNotAvailableError
from protocol.message_id import decode_offset_msg_id
from tests.support.serve_process import PROCESS_TIMEOUT, start_writable

CONF = "brokerName=cut\nbrokerIP1=127.0.0.1\nstorePathRootDir=.\nmappedFileSizeCommitLog=1048576\n"
TOPIC = "Cut"


async def _stop(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0


async def _send(port: int, prefix: str, count: int) -> tuple[list[str], int]:
    """Send ``count`` messages to queue 0; the keys answered SEND_OK and how many were refused."""
    acked: list[str] = []
    refused = 0
    async with Producer(f"127.0.0.1:{port}") as producer:
        for i in range(count):
            key = f"{prefix}-{i}"
            try:
                await producer.send(TOPIC, key.encode() * 4, keys=key, queue_id=0)
            except ServiceNotAvailableError:
                refused += 1
                continue
            acked.append(key)
    return acked, refused


async def _served(port: int, keys: list[str]) -> tuple[set[str], set[str]]:
    """Of ``keys``: those found by key, and those pulled from queue 0."""
    found: set[str] = set()
    async with QueryAdmin(f"127.0.0.1:{port}") as admin:
        for key in keys:
            try:
                result = await admin.query_by_key(TOPIC, key)
            except Exception:
                continue
            if any(m.properties.get("KEYS") == key for m in result.messages):
                found.add(key)
        pulled: set[str] = set()
        offset = 0
        for _ in range(1000):  # as a consumer goes on: to the next offset the broker names
            got = await admin.pull(MessageQueue(TOPIC, "cut", 0), None, offset, 32)
            pulled.update(m.properties.get("KEYS", "") for m in got.messages)
            if got.next_begin_offset <= offset or got.next_begin_offset >= got.max_offset:
                break
            offset = got.next_begin_offset
    return found, pulled & set(keys)


@pytest.mark.parametrize("wait", [0.0, 2.5], ids=["sent-at-once", "after-a-refresh"])
async def test_sends_after_a_cut_are_refused_or_served_and_a_restart_takes_them_again(
    tmp_path: Path, wait: float
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "broker.conf").write_text(CONF, encoding="utf-8")
    log = tmp_path / "serve.log"
    proc, port = await start_writable(store, log=log)
    try:
        before: list[str] = []
        offsets: list[int] = []
        async with Producer(f"127.0.0.1:{port}") as producer:
            for i in range(20):
                result = await producer.send(TOPIC, b"x" * 100, keys=f"pre-{i}", queue_id=0)
                assert result is not None
                before.append(f"pre-{i}")
                offsets.append(decode_offset_msg_id(result.offset_msg_id).offset)
        # Cut the newest (only) CommitLog file 20 bytes into the 11th record.
        os.truncate(store / "commitlog" / f"{0:020d}", offsets[10] + 20)
        await asyncio.sleep(wait)  # 2.5 s: the server's 1 s refresh has seen the cut
        acked, refused = await _send(port, "post", 100)
        assert len(acked) + refused == 100
        found, pulled = await _served(port, acked)
        assert found == set(acked), f"{len(acked) - len(found)} of {len(acked)} SEND_OK not found by key"
        assert pulled == set(acked), f"{len(acked) - len(pulled)} of {len(acked)} SEND_OK not pulled"
        # The 10 records wholly before the cut still answer.
        survivors, _ = await _served(port, before[:10])
        assert survivors == set(before[:10])
        await _stop(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # The restart recovers, as the broker's does: the log ends at the last whole record, and SENDs
    # are taken, found and pulled again, the queue going on at offset 10.
    proc, port = await start_writable(store, log=log)
    try:
        # Every SEND_OK of before the restart is still served after it.
        found, pulled = await _served(port, acked)
        assert found == set(acked) and pulled == set(acked), "acknowledged messages lost at the restart"
        again, again_refused = await _send(port, "again", 20)
        assert again_refused == 0
        found, pulled = await _served(port, again)
        assert found == set(again) and pulled == set(again)
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            assert await admin.max_offset(MessageQueue(TOPIC, "cut", 0)) == 30
        await _stop(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = log.read_text(encoding="utf-8")
    assert refused == 100  # nothing can be appended behind the hole
    assert text.count("the store stops taking messages") == 1
    assert text.count("not mappedFileSizeCommitLog") <= 1
