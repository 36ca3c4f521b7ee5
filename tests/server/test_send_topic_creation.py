"""Topics created by SENDs: written off the event loop, batched, and never lost to a kill -9.

Issue 18, item 10. Each SEND that auto-created a topic rewrote and fsynced the whole
``config/topics.json`` on the event loop (about 10 ms here at 3,000 topics, 47 ms on the reviewer's
machine), so every other client waited behind it. Now the table changes in memory at once, its file
is written on a thread of its own (creations arriving meanwhile go out in one write), and the SEND
that created a topic is answered once that write is done, as the broker answers after its
``persist``: what a SEND_OK says exists is on disk even if the process is killed right after.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
import time
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from clients.producer import Producer
from protocol.codes import RequestCode, ResponseCode
from server.broker.writable_store import WritableStore
from store.config.journal import ConfigJournal, journal_path
from store.config.store_config import StoreConfig
from store.config.topics import AUTO_CREATE_TOPIC, TopicConfig, TopicTable, startup_topics
from store.write.writer import StoreRecord
from tests.support.harness import RawClient
from tests.support.serve_process import PROCESS_TIMEOUT, start_writable

#: Topics already in the table, the size at which the issue measured its stalls.
EXISTING = 3000
#: The table of the test that watches other clients' answers: one write of it takes long.
BIG_TABLE = 10_000
CONF = "brokerName=topics\nbrokerIP1=127.0.0.1\nstorePathRootDir=.\nmappedFileSizeCommitLog=1048576\n"


def _store_with_topics(root: Path, existing: int = EXISTING) -> None:
    """A store whose ``topics.json`` lists the broker's start-up topics and ``existing`` others."""
    root.mkdir()
    (root / "broker.conf").write_text(CONF, encoding="utf-8")
    table = TopicTable(root / "config" / "topics.json", {}, 0, 0)
    for config in startup_topics("DefaultCluster", "topics"):
        table.put(config, 1)
    for i in range(existing):
        table.put(TopicConfig(f"Existing{i:05d}", 4, 4, 6), 1)
    table.save()


def test_creating_a_topic_in_a_send_does_not_write_the_table_on_the_callers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the event loop runs for a SEND to an unknown topic: the check's creation. It used to
    # include a rewrite and fsync of the 3,000-topic file (about 10 ms each here). Which thread
    # writes the file is what matters (timing it would only measure how busy the machine is).
    root = tmp_path / "s"
    _store_with_topics(root)
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=1048576, broker_ip1="127.0.0.1")
    writers: list[int] = []
    real_write, real_append = TopicTable._write, ConfigJournal.append

    def write(table: TopicTable, *args: object) -> None:
        writers.append(threading.get_ident())
        real_write(table, *args)  # type: ignore[arg-type]

    def append(journal: ConfigJournal, lines: list[bytes]) -> None:
        writers.append(threading.get_ident())
        real_append(journal, lines)

    monkeypatch.setattr(TopicTable, "_write", write)
    monkeypatch.setattr(ConfigJournal, "append", append)  # a creation is durable once journaled
    with WritableStore(config) as store:
        writers.clear()  # whatever opening the store wrote
        for i in range(40):
            created = store.create_topic_in_send(f"New{i}", AUTO_CREATE_TOPIC, 4)
            assert created is not None and created.write_queue_nums == 4
        # Off the caller's thread, every creation reaches the file; fewer writes than creations is
        # the batching.
        store.topics_saved(store.topic_changes()).result(timeout=PROCESS_TIMEOUT)
        assert writers and threading.get_ident() not in writers
        assert len(writers) <= 40
        on_disk = TopicTable.load(root / "config" / "topics.json").topics
        assert {f"New{i}" for i in range(40)} <= set(on_disk)
        assert len(on_disk) == EXISTING + len(startup_topics("DefaultCluster", "topics")) + 40


async def _create_topics(port: int, prefix: str, count: int, acked: list[str]) -> None:
    async with Producer(f"127.0.0.1:{port}", timeout=5.0) as producer:
        for i in range(count):
            topic = f"{prefix}{i:03d}"
            await producer.send(topic, b"body", keys=f"k-{topic}", queue_id=0)
            acked.append(topic)


async def test_other_clients_are_not_held_up_while_sends_create_topics(tmp_path: Path) -> None:
    # Four producers create 40 topics while another client asks GET_MAX_OFFSET in a loop: its
    # answers used to wait behind the creations' file writes on the loop. The table holds 10,000
    # topics, so that one write of it (~0.1-0.4 s here) dwarfs what a busy machine adds to an answer.
    root = tmp_path / "s"
    _store_with_topics(root, BIG_TABLE)
    proc, port = await start_writable(root)
    try:
        async with QueryAdmin(f"127.0.0.1:{port}", timeout=5.0) as admin:
            mq = MessageQueue("Existing00000", "topics", 0)
            await admin.max_offset(mq)  # route cached, connection open
            acked: list[str] = []
            creators = asyncio.gather(*(_create_topics(port, f"P{w}x", 10, acked) for w in range(4)))
            waits: list[float] = []
            while not creators.done():
                start = time.perf_counter()
                await admin.max_offset(mq)
                waits.append(time.perf_counter() - start)
            await creators
        assert len(acked) == 40
        # On the loop, each creation's write holds an answer up for the whole write: about one
        # answer in ten slower than 100 ms (43 of 387 when tried). Off it, a busy machine still
        # delays a few (the writer thread competes for the GIL; 13 of 6,303 on a loaded machine).
        slow = sorted(w for w in waits if w > 0.1)
        allowed = max(2, len(waits) // 50)
        assert len(slow) <= allowed, f"{len(slow)} of {len(waits)} answers over 100 ms: {slow}"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_kill_9_right_after_send_ok_loses_no_created_topic(tmp_path: Path) -> None:
    # SEND_OK for a SEND that created a topic means the topic is in topics.json: the server is
    # killed while four producers create topics, and the file on disk (before any restart) must
    # list every topic whose SEND was acknowledged. A restart then serves each one's message.
    root = tmp_path / "s"
    _store_with_topics(root)
    proc, port = await start_writable(root)
    acked: list[str] = []
    try:
        creators = asyncio.gather(
            *(_create_topics(port, f"K{w}x", 200, acked) for w in range(4)), return_exceptions=True
        )
        while len(acked) < 60:
            await asyncio.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        await asyncio.wait_for(creators, PROCESS_TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert (root / "abort").exists()
    on_disk = set(TopicTable.load(root / "config" / "topics.json").topics)
    missing = [t for t in acked if t not in on_disk]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged topic creations not in topics.json"
    proc, port = await start_writable(root)
    try:
        async with QueryAdmin(f"127.0.0.1:{port}", timeout=5.0) as admin:
            for topic in acked:
                found = await admin.query_by_key(topic, f"k-{topic}")
                assert [m.topic for m in found.messages] == [topic]
                pulled = await admin.pull(MessageQueue(topic, "topics", 0), None, 0, 8)
                assert [m.properties.get("KEYS") for m in pulled.messages] == [f"k-{topic}"]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_a_topic_with_records_that_the_table_lacks_is_put_back_when_the_store_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The safety net under the persister: should its write fail (a full disk), topics.json lags the
    # records. The store opened next puts every topic with records back, as created at send time,
    # instead of leaving it out until a clean close (before: missing for the whole run).
    root = tmp_path / "s"
    _store_with_topics(root)
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=1048576, broker_ip1="127.0.0.1")
    with WritableStore(config) as store:
        assert store.create_topic_in_send("Lagging", AUTO_CREATE_TOPIC, 4) is not None
        store.put([StoreRecord("Lagging", b"x", "KEYS\x01k\x02", queue_id=2)])
    path = root / "config" / "topics.json"
    table = TopicTable.load(path)
    del table.topics["Lagging"]
    table.save()
    with caplog.at_level(logging.WARNING), WritableStore(config) as store:
        assert store.topic_config("Lagging") == TopicConfig("Lagging", 4, 4, 6)
        assert TopicTable.load(path).get("Lagging") == TopicConfig("Lagging", 4, 4, 6)
    assert sum("lacked 1 topic(s) with records" in r.getMessage() for r in caplog.records) == 1


async def test_a_kill_9_after_update_topic_keeps_its_config_and_the_restart_writes_it_whole(
    tmp_path: Path,
) -> None:
    # UPDATE_AND_CREATE_TOPIC is answered once the creation is journaled (issue 30: one small
    # append, not a rewrite of the whole table); a kill -9 before the table is written whole must
    # keep the topic as it was asked for (8 queues, read-only: nothing a record could tell), and the
    # next start must put it into topics.json itself, for a real broker started on the directory.
    root = tmp_path / "s"
    _store_with_topics(root)
    proc, port = await start_writable(root)
    try:
        client = await RawClient.connect("127.0.0.1", port)
        try:
            for name in ("Asked0", "Asked1", "Asked2"):
                fields = {
                    "topic": name, "defaultTopic": AUTO_CREATE_TOPIC, "readQueueNums": "8",
                    "writeQueueNums": "8", "perm": "4", "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0", "order": "false",
                }  # fmt: skip
                request = RawClient.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
                await client.send(request)
                answer = await asyncio.wait_for(client.receive(), PROCESS_TIMEOUT)
                assert answer.code == ResponseCode.SUCCESS
            deleted = RawClient.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Existing00007"})
            await client.send(deleted)
            assert (await asyncio.wait_for(client.receive(), PROCESS_TIMEOUT)).code == ResponseCode.SUCCESS
        finally:
            await client.close()
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    path = root / "config" / "topics.json"
    kept = TopicTable.load(path)
    for name in ("Asked0", "Asked1", "Asked2"):
        assert kept.get(name) == TopicConfig(name, 8, 8, 4)
    assert kept.get("Existing00007") is None
    proc, port = await start_writable(root)
    try:
        # opened: the journal folded into the file, which alone now says the same
        listed = json.loads(path.read_text(encoding="utf-8"))["topicConfigTable"]
        assert listed["Asked1"]["writeQueueNums"] == 8 and listed["Asked1"]["perm"] == 4
        assert "Existing00007" not in listed
        assert journal_path(path).stat().st_size == 0
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
