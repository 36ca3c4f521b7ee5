"""The attack of issue 31, item 7, against a running server: files overwritten under it.

A server over a copy of the real 4.9.7 broker's store, its store refreshed every 50 ms as ``serve``
refreshes it (``refresh_forever``, in slices): an IndexFile and a consume queue file are overwritten
in place with other files' bytes (``cp``). Once ``/metrics`` counts both rebuilt, every one of the
broker's 475 key queries over TCP gets the broker's records again, and the damaged queue pulls what it
pulled before, without the files being restored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from protocol.codes import RequestCode, ResponseCode
from server.app import QueryServer
from server.refresh import refresh_forever
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import RawClient
from tests.support.java_store import JAVA_STORE, settings_for


def _copy(stores_dir: Path, tmp_path: Path) -> StoreConfig:
    root = tmp_path / JAVA_STORE
    shutil.copytree(stores_dir / JAVA_STORE, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conf = tmp_path / f"{JAVA_STORE}.broker.conf"
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", conf)
    os.chmod(conf, 0o644)
    return StoreConfig.load(conf)


def _records(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        out.append(body[pos : pos + size])
        pos += size
    return out


async def _wrong_key_answers(port: int, queries: list[dict[str, Any]]) -> list[str]:
    """The broker's queries whose answer over TCP differs from the broker's (records by sha256,
    the index watermark)."""
    client = await RawClient.connect("127.0.0.1", port)
    try:
        answers = await client.ask_all(
            [
                RawClient.request(
                    RequestCode.QUERY_MESSAGE,
                    {
                        "topic": q["topic"],
                        "key": q["key"],
                        "maxNum": str(q["maxNum"]),
                        "beginTimestamp": str(q["begin"]),
                        "endTimestamp": str(q["end"]),
                        "_UNIQUE_KEY_QUERY": "false",
                    },
                )
                for q in queries
            ]
        )
    finally:
        await client.close()
    wrong = []
    for q, answer in zip(queries, answers, strict=True):
        want_code = ResponseCode.SUCCESS if q["count"] else ResponseCode.QUERY_NOT_FOUND
        got = (
            answer.code,
            answer.ext_fields.get("indexLastUpdatePhyoffset"),
            [hashlib.sha256(r).hexdigest() for r in _records(bytes(answer.body or b""))],
        )
        want = (want_code, str(q["indexLastUpdatePhyoffset"]), [r["rawSha256"] for r in q["results"]])
        if got != want:
            wrong.append(f"{q['label']} {q['topic']}#{q['key']!r}")
    return wrong


async def _pulled(admin: QueryAdmin, broker: str, topic: str, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    for _ in range(100):
        got = await admin.pull(MessageQueue(topic, broker, queue_id), None, offset, 32)
        if not got.messages:
            break
        bodies += [m.body for m in got.messages]
        offset = got.next_begin_offset
    return bodies


async def _counters(session: aiohttp.ClientSession) -> dict[tuple[str, str], float]:
    async with session.get("/metrics") as response:
        text = await response.text()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("rmq_query_files_failed_checks_total", "rmq_query_files_rebuilt_total"):
                found[(sample.name, sample.labels["kind"])] = sample.value
    return found


async def test_files_overwritten_under_a_running_server_are_answered_as_the_broker_answers(
    stores_dir: Path, tmp_path: Path
) -> None:
    expected = json.loads((stores_dir / f"{JAVA_STORE}.expected.json").read_text(encoding="utf-8"))
    queries = [q for q in expected["queries"] if "exception" not in q]
    config = _copy(stores_dir, tmp_path)
    index = sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())
    queue = config.consume_queue_dir / "TopicA" / "0" / ("0" * 20)
    store = MessageStore.open(config)
    server = QueryServer(store, settings_for(config, http_port=0))
    await server.start()
    server.run_in_background(lambda: refresh_forever(store, 0.05, server.changes.pulse))
    try:
        async with (
            QueryAdmin(f"127.0.0.1:{server.port}", timeout=5.0) as admin,
            aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session,
        ):
            assert await _wrong_key_answers(server.port, queries) == []
            before = await _pulled(admin, config.broker_name, "TopicA", 0)
            assert len(before) == 500
            mtime = queue.stat().st_mtime_ns
            shutil.copyfile(index[3], index[2])
            shutil.copyfile(config.consume_queue_dir / "TopicA" / "1" / ("0" * 20), queue)
            os.utime(queue, ns=(mtime, mtime + 1_000_000_000))  # cp's own mtime, past the old one
            deadline = time.monotonic() + 10
            want = {
                ("rmq_query_files_failed_checks_total", "index"): 1.0,
                ("rmq_query_files_failed_checks_total", "consume_queue"): 1.0,
                ("rmq_query_files_rebuilt_total", "index"): 1.0,
                ("rmq_query_files_rebuilt_total", "consume_queue"): 1.0,
            }
            while await _counters(session) != want:
                assert time.monotonic() < deadline, await _counters(session)
                await asyncio.sleep(0.05)
            assert await _wrong_key_answers(server.port, queries) == []
            assert await _pulled(admin, config.broker_name, "TopicA", 0) == before
    finally:
        await server.stop()
        store.close()
