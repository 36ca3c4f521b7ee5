"""``serve --writable`` killed with SIGKILL while producers send: nothing acknowledged is lost.

Real processes: a writable server, a producer sending as fast as it can on several connections
(single SENDs, or SEND_BATCH_MESSAGEs of 8, which the writer appends in one compiled call),
a ``kill -9`` at a seeded random moment, a restart on the same store (the writer scrubs a torn
tail, the index builder repairs after the abort marker), more sends, a second kill, a clean stop.
Afterwards every message whose SEND was answered SUCCESS must be in the CommitLog at the offset its
answer named and be found by its key, the queue offsets of each queue must be 0, 1, 2, ... without
a gap or a repeat, and the IndexFiles must equal a clean rebuild of the CommitLog.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest

from clients.errors import ClientError
from clients.producer import OutgoingMessage, Producer
from protocol.message import decode_message
from protocol.message_id import decode_offset_msg_id
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.index.builder import rebuild_index
from store.message_store import MessageStore
from tests.support.serve_process import PROCESS_TIMEOUT, start_writable

CONF = (
    "brokerName=crash\nbrokerIP1=127.0.0.1\nstorePathRootDir=.\nmappedFileSizeCommitLog=32768\n"
    "maxHashSlotNum=64\nmaxIndexNum=256\n"
    # a 64 KiB page-cache window: its worker writes back and drops pages every 16 KiB while killed
    "commitLogCacheWindow=65536\n"
)


async def _send_until_killed(
    port: int, acked: dict[str, str], prefix: str, connections: int = 4, batch: int = 0
) -> None:
    async def one(worker: int) -> None:
        async with Producer(f"127.0.0.1:{port}", timeout=2.0) as producer:
            for i in range(100_000):
                key = f"{prefix}-{worker}-{i}"
                try:
                    if batch:
                        keys = [f"{key}-{k}" for k in range(batch)]
                        messages = [OutgoingMessage(k.encode() * 3, keys=k) for k in keys]
                        results = await producer.send_batch("Crash", messages)
                        assert len(results) == batch
                        acked.update((k, r.offset_msg_id) for k, r in zip(keys, results, strict=True))
                        continue
                    result = await producer.send("Crash", key.encode() * 3, keys=key)
                except (ClientError, OSError):
                    return
                assert result is not None
                acked[key] = result.offset_msg_id

    await asyncio.gather(*(one(w) for w in range(connections)))


@pytest.mark.parametrize("batch", [0, 8], ids=["single", "batch-of-8"])
async def test_kill_9_while_sending_loses_nothing_acknowledged(tmp_path: Path, batch: int) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "broker.conf").write_text(CONF, encoding="utf-8")
    rng = random.Random(13)
    acked: dict[str, str] = {}
    for round_ in range(2):
        proc, port = await start_writable(store)
        before = len(acked)
        sender = asyncio.ensure_future(_send_until_killed(port, acked, f"r{round_}", batch=batch))
        for _ in range(100):  # the kill lands while SENDs are answered (a loaded machine starts slowly)
            if len(acked) > before:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(rng.uniform(0.6, 1.2))
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        await asyncio.wait_for(sender, PROCESS_TIMEOUT)
        assert (store / "abort").exists()
    proc, _port = await start_writable(store)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    assert len(acked) > 50, "the sender must have got answers before the kills"

    config = StoreConfig.load(store / "broker.conf")
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    records = {offset: decode_message(buf) for offset, buf in log.iter_records()}
    log.close()
    queues: dict[int, list[int]] = {}
    for msg in records.values():
        queues.setdefault(msg.queue_id, []).append(msg.queue_offset)
    for queue_id, offsets in queues.items():
        assert offsets == list(range(len(offsets))), f"queue {queue_id} has gaps or repeats"
    with MessageStore.open(config) as opened:
        for key, offset_msg_id in acked.items():
            offset = decode_offset_msg_id(offset_msg_id).offset
            assert records[offset].keys == [key]
            assert len(opened.query_message("Crash", key, 4, 0, 2**62, exact_key=True).buffers) == 1, key
    built = {p.name: p.read_bytes() for p in config.index_dir.iterdir()}
    rebuild_index(config)
    assert sorted(built.values()) == sorted(p.read_bytes() for p in config.index_dir.iterdir())
