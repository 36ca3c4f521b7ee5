"""DELETE_TOPIC_IN_BROKER as 4.9.7's ``AdminBrokerProcessor.deleteTopic`` does it (issue 32).

The broker drops the topic's config (``deleteTopicConfig``, topics.json persisted) and destroys its
consume queues (``cleanUnusedTopic``); the CommitLog keeps its records. Here the topic must leave every
listing (topic list, GET_ALL_TOPIC_CONFIG, the store's topics and queue counts), its consume queue
directory must go, the other topics must keep every acknowledged message, and a restart must not bring
it back. Expected values come from what the tests sent, never from the server. Each test starts an
in-process writable server on 127.0.0.1 port 0 and stops it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clients.producer import Producer, SendResult
from clients.testkit import RmqClient, RmqServer, kit_store_config
from clients.topic_admin import TopicAdmin
from protocol.codes import RequestCode
from store.check.consume_queues import check_consume_queues
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.builder import DISPATCHED_MARK


def _delete(server: RmqServer, topic: str) -> None:
    async def delete() -> None:
        admin = TopicAdmin(server.address, server.admin.client)
        await admin.delete_topic_in_broker(server.address, topic)
        await admin.delete_topic_in_namesrv(topic)

    server.run(delete())


def _listings(server: RmqServer) -> dict[str, set[str]]:
    """Every place a topic is listed: the name server's list, GET_ALL_TOPIC_CONFIG, the store's topic
    set and queue counts (what /api/topics and /metrics read)."""

    async def ask() -> tuple[list[str], bytes]:
        admin = TopicAdmin(server.address, server.admin.client)
        listed = await admin.topic_list()
        config = await server.admin.client.invoke(server.address, RequestCode.GET_ALL_TOPIC_CONFIG)
        return listed, bytes(config.body or b"")

    listed, config_body = server.run(ask())
    store = server.store
    assert store is not None
    return {
        "topic list": set(listed),
        "topic config": set(json.loads(config_body)["topicConfigTable"]),
        "store topics": set(store.reader.topics()),
        "queue counts": set(store.reader.queue_nums()),
    }


def _total(server: RmqServer, topic: str, queues: int) -> int:
    store = server.store
    assert store is not None
    return sum(store.reader.max_offset(topic, q) - store.reader.min_offset(topic, q) for q in range(queues))


def _queue_check(config: StoreConfig) -> tuple[list[str], list[str]]:
    """fsck's consume queue check of the closed store: (problems, notes)."""
    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        found = check_consume_queues(config, commitlog)
    finally:
        commitlog.close()
    return found.problems, found.notes


def test_a_deleted_topic_leaves_every_listing_and_a_restart_does_not_bring_it_back(tmp_path: Path) -> None:
    config = kit_store_config(tmp_path / "store")
    server = RmqServer(config)
    try:
        server.create_topic("Kept", 4)
        server.create_topic("Gone", 4)
        client = RmqClient(server)
        for i in range(6):
            client.send("Kept", f"k{i}")
        # Gone's records come last: its queues hold the newest entry, whose removal would otherwise
        # make a restart dispatch them again.
        gone_ids = [client.send("Gone", f"g{i}").offset_msg_id for i in range(5)]  # type: ignore[union-attr]
        assert all("Gone" in names for names in _listings(server).values())
        _delete(server, "Gone")
        after = _listings(server)
        for where, names in after.items():
            assert "Gone" not in names, where
            assert "Kept" in names, where
        assert not (config.consume_queue_dir / "Gone").exists()
        assert _total(server, "Kept", 4) == 6
        # The CommitLog keeps the deleted topic's records, as the broker's does.
        assert client.view(gone_ids[0]).body == b"g0"
    finally:
        server.close()
    assert (
        "Gone"
        not in json.loads((config.store_path_root_dir / "config" / "topics.json").read_text())[
            "topicConfigTable"
        ]
    )

    server = RmqServer(config)
    try:
        listed = _listings(server)
        assert [where for where, names in listed.items() if "Gone" in names] == []
        assert not (config.consume_queue_dir / "Gone").exists()
        assert _total(server, "Kept", 4) == 6
    finally:
        server.close()


def test_a_topic_written_again_after_its_deletion_starts_afresh_and_loses_nothing(tmp_path: Path) -> None:
    config = kit_store_config(tmp_path / "store")
    server = RmqServer(config)
    try:
        server.create_topic("Busy", 2)
        client = RmqClient(server)
        for i in range(4):
            client.send("Busy", f"old{i}", queue_id=i % 2)
            client.send("Other", f"o{i}")
        _delete(server, "Busy")
        # Sends right after the delete (auto-create on): the topic is made again, its queues start
        # from offset 0 in new directories; the other topic's messages are all there.
        results = [client.send("Busy", f"new{i}", queue_id=0) for i in range(3)]
        assert [r.queue_offset for r in results] == [0, 1, 2]  # type: ignore[union-attr]
        client.send("Other", "o4")
        assert _total(server, "Busy", 4) == 3
        assert _total(server, "Other", 4) == 5
    finally:
        server.close()
    server = RmqServer(config)
    try:
        assert _total(server, "Busy", 4) == 3
        assert _total(server, "Other", 4) == 5
        got = RmqClient(server).receive("Busy", count=3, timeout=10)
        assert sorted(m.body for m in got) == [b"new0", b"new1", b"new2"]
    finally:
        server.close()
    # The old records of the topic made again are neither entries of its new queues nor a problem.
    problems, _notes = _queue_check(config)
    assert problems == [], problems


def test_deleting_a_topic_that_does_not_exist_succeeds_and_changes_nothing(tmp_path: Path) -> None:
    server = RmqServer(kit_store_config(tmp_path / "store"))
    try:
        server.create_topic("Here", 2)
        before = _listings(server)
        _delete(server, "NeverMade")
        assert _listings(server) == before
    finally:
        server.close()


def test_deleting_a_topic_while_it_is_sent_to_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """Sends to the topic and to another one in flight on several connections while the delete
    comes: every acknowledged message of the other topic is there, the topic's sends after the delete
    make it again (auto-create) from queue offset 0, nothing crashes, fsck finds no problem."""
    config = kit_store_config(tmp_path / "store")
    server = RmqServer(config)
    try:
        server.create_topic("Hot", 4)
        producers = [Producer(server.address) for _ in range(4)]

        async def storm() -> dict[str, list[SendResult | None]]:
            acked = {"Hot": 0, "Cold": 0}
            halfway = asyncio.Event()

            async def sends(producer: Producer, topic: str, n: int) -> list[SendResult | None]:
                out = []
                for i in range(n):
                    out.append(await producer.send(topic, f"{topic}-{i}".encode()))
                    acked[topic] += 1
                    if acked["Hot"] >= 80:
                        halfway.set()
                return out

            admin = TopicAdmin(server.address, server.admin.client)
            jobs = [(p, t) for p in producers for t in ("Hot", "Cold")]
            tasks = [asyncio.ensure_future(sends(p, t, 60)) for p, t in jobs]
            await halfway.wait()  # the delete comes while every sender is still sending
            await admin.delete_topic_in_broker(server.address, "Hot")
            done = await asyncio.gather(*tasks)
            for p in producers:
                await p.close()
            results: dict[str, list[SendResult | None]] = {"Hot": [], "Cold": []}
            for (_p, topic), got in zip(jobs, done, strict=True):
                results[topic].extend(got)
            return results

        results = server.run(storm(), timeout=60)
        assert len(results["Cold"]) == 240 and all(r is not None for r in results["Cold"])
        assert _total(server, "Cold", 4) == 240
        # Hot was made again by the sends after the delete (auto-create): its new queues hold those
        # only.
        assert 0 < _total(server, "Hot", 4) <= 240 - 80
    finally:
        server.close()
    problems, _notes = _queue_check(config)
    assert problems == []
    server = RmqServer(config)
    try:
        assert _total(server, "Cold", 4) == 240
    finally:
        server.close()


def test_a_dispatch_mark_past_the_commitlog_end_is_ignored(tmp_path: Path) -> None:
    """``.dispatched-to`` says where dispatch stood at a deletion; should a crash lose CommitLog
    records after it was written (an unflushed tail), it would point past the end and the records
    written there next would never get entries. It is dropped instead: they all do."""
    config = kit_store_config(tmp_path / "store")
    server = RmqServer(config)
    try:
        client = RmqClient(server)
        client.send("Kept", "k0")
        client.send("Gone", "g0")
        _delete(server, "Gone")
    finally:
        server.close()
    mark = config.consume_queue_dir / DISPATCHED_MARK
    assert mark.is_file()
    mark.write_bytes((1 << 40).to_bytes(8, "big"))  # far past the CommitLog's end
    server = RmqServer(config)
    try:
        for i in range(3):
            RmqClient(server).send("Kept", f"k{i + 1}")
        assert _total(server, "Kept", 4) == 4
        assert not mark.exists()
    finally:
        server.close()
