"""PULL_MESSAGE beyond the captures: tag filtering, long polling, and the broker's refusals.

Expected values come from the Java golden data (``java-4.9.7-a.expected.json``: every message's
queue, queue offset and tags) and from the 4.9.7 broker's rules (``stores/README.md``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.index_key import java_string_hash
from server.remoting.processors.consumer_manage import ConsumerManageProcessor
from server.remoting.processors.pull_message import PullMessageProcessor, tag_filter
from server.store_changes import StoreChanges
from store.config.store_config import StoreConfig
from store.consumequeue.get_message import GetMessageResult, GetMessageStatus
from store.message_store import MessageStore
from tests.support.harness import RawClient, StartServer
from tests.support.java_store import JAVA_STORE
from tests.support.pulls import pull_fields, records


def queue_messages(java_expected: dict[str, Any], topic: str, queue_id: int) -> list[dict[str, Any]]:
    """The queue's messages with a consume-queue entry (not prepared, not rolled back), by offset."""
    return sorted(
        (
            m
            for m in java_expected["messages"]
            if m["topic"] == topic and m["queueId"] == queue_id and m["sysFlag"] & 0xC in (0, 0x8)
        ),
        key=lambda m: m["queueOffset"],
    )


async def pull(client: RawClient, fields: dict[str, str]) -> RemotingCommand:
    return await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_a_tag_subscription_gets_only_its_tags(
    serialize_type: SerializeType, start_server: StartServer, java_expected: dict[str, Any]
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        messages = queue_messages(java_expected, "TopicA", 1)
        tag1 = [m for m in messages if m["tags"] == "tag1"]
        fields = {**pull_fields("TopicA", 1, 0, 32), "subscription": " tag1 || nothing "}
        answer = await client.call(
            RawClient.request(RequestCode.PULL_MESSAGE, fields, serialize_type=serialize_type)
        )
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "FOUND")
        got = records(answer.body)
        assert [int.from_bytes(r[28:36], "big") for r in got] == [m["commitLogOffset"] for m in tag1[:32]]
        # Entries skipped by the filter count: the next pull starts after the 32nd match.
        assert answer.ext_fields["nextBeginOffset"] == str(tag1[31]["queueOffset"] + 1)

        everything = await pull(client, {**pull_fields("TopicA", 1, 0, 32), "subscription": "tag1||tag3"})
        assert len(records(everything.body)) == 32

        none = await pull(client, {**pull_fields("TopicA", 1, 0, 32), "subscription": "no-such-tag"})
        assert (none.code, none.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
        assert none.ext_fields["nextBeginOffset"] == str(len(messages))  # the whole file was scanned
        assert none.body is None
    finally:
        await client.close()


PARSE_FAILED = "parse the consumer's subscription failed"


@pytest.mark.parametrize(
    ("change", "code", "remark"),
    [
        ({"sysFlag": "0"}, ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"),
        ({"subscription": "||"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED, PARSE_FAILED),
        # read-only, property filtering is on: no message has a property ``a``, none matches
        ({"expressionType": "SQL92", "subscription": "a > 1"}, ResponseCode.PULL_RETRY_IMMEDIATELY,
         "NO_MATCHED_MESSAGE"),
        ({"expressionType": "SQL92", "subscription": ""}, 23, PARSE_FAILED),
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist, apply first"),
        ({"queueId": "-1"}, ResponseCode.SYSTEM_ERROR, "queueId[-1] is illegal"),
        ({"queueOffset": None}, ResponseCode.SYSTEM_ERROR, "the custom field <queueOffset> is null"),
        ({"maxMsgNums": "x"}, ResponseCode.SYSTEM_ERROR, "maxMsgNums"),
        # What the real 4.9.7 broker (JDK 17) answered, asked by hand:
        ({"maxMsgNums": "-5"}, ResponseCode.SYSTEM_ERROR,
         "java.lang.IllegalArgumentException: Illegal Capacity: -5, java.base/java.util.ArrayList.<init>"),
    ],
)  # fmt: skip
async def test_refusals_as_the_broker_words_them(
    change: dict[str, str | None], code: int, remark: str, start_server: StartServer
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        fields = {**pull_fields("TopicA", 1, 0, 32), **change}
        answer = await pull(client, {k: v for k, v in fields.items() if v is not None})
        assert answer.code == code
        assert remark in (answer.remark or "")
        assert answer.body is None
    finally:
        await client.close()


def test_tag_filter_follows_filter_api() -> None:
    assert tag_filter("*", "TAG") is None
    assert tag_filter(None, None) is None
    assert tag_filter("", "TAG") is None
    assert tag_filter(" A ||B||  ", "TAG") == frozenset({java_string_hash("A"), java_string_hash("B")})
    assert tag_filter(" || ", "TAG") == frozenset()  # nothing left: no message matches
    assert tag_filter("A", "") == frozenset()  # an empty type skips parsing: only * takes anything


# Long polling over a store that grows ----------------------------------------------------------


class GrowingStore:
    """One queue whose max offset grows when the test says so: the consume-queue reads a pull makes."""

    def __init__(self) -> None:
        self.max = 5
        self.reads = 0

    def queue_nums(self) -> dict[str, int]:
        return {"T": 1}

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.max

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tags_codes: frozenset[int] | None = None,
        record_filter: object = None,
    ) -> GetMessageResult:
        self.reads += 1
        if offset == self.max:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, 0, self.max)
        record = (24).to_bytes(4, "big") + bytes(20)
        return GetMessageResult(GetMessageStatus.FOUND, offset + 1, 0, self.max, [memoryview(record)])


def suspended_pull(offset: int, timeout_ms: int) -> RemotingCommand:
    fields = {**pull_fields("T", 0, offset, 32), "sysFlag": "6", "suspendTimeoutMillis": str(timeout_ms)}
    return RawClient.request(RequestCode.PULL_MESSAGE, fields)


async def test_a_suspended_pull_is_held_until_the_queue_grows() -> None:
    store = GrowingStore()
    changes = StoreChanges()
    processor = PullMessageProcessor(store, changes)  # type: ignore[arg-type]
    held = asyncio.ensure_future(processor.pull_message(suspended_pull(5, 600_000), "/127.0.0.1:1"))
    await asyncio.sleep(0)
    for _ in range(3):  # pulses without new data keep it held
        changes.pulse()
        await asyncio.sleep(0)
    assert not held.done()
    store.max = 6
    changes.pulse()
    answer = await asyncio.wait_for(held, 60)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert answer.ext_fields["nextBeginOffset"] == "6"


async def test_a_held_pull_without_a_connection_answers_two_turns_after_its_queue_grows() -> None:
    """With no connection to write on (no ``CURRENT_CHANNEL``), a SEND's ``notify_queue`` has the
    wake-up run at the loop's next turn, which resumes the held pull's task at the one after: its
    answer is ready two turns later. (On a connection the SEND's own turn answers it:
    ``test_held_pull_wake.py``.)"""
    store = GrowingStore()
    changes = StoreChanges()
    processor = PullMessageProcessor(store, changes)  # type: ignore[arg-type]
    held = asyncio.ensure_future(processor.pull_message(suspended_pull(5, 600_000), "/127.0.0.1:1"))
    for _ in range(3):
        await asyncio.sleep(0)  # the first pass, then held on the queue
    assert not held.done()
    store.max = 6
    changes.notify_queue("T", 0)
    await asyncio.sleep(0)  # the wake-up's turn
    await asyncio.sleep(0)  # the task's: the held pull ran before this task resumed
    assert held.done()
    answer = held.result()
    assert (answer.code, answer.remark, answer.ext_fields["nextBeginOffset"]) == (0, "FOUND", "6")


async def test_a_suspended_pull_gets_no_new_msg_at_its_timeout() -> None:
    store = GrowingStore()
    processor = PullMessageProcessor(store, StoreChanges())  # type: ignore[arg-type]
    answer = await asyncio.wait_for(processor.pull_message(suspended_pull(5, 50), "/127.0.0.1:1"), 60)
    assert (answer.code, answer.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    assert store.reads == 2  # asked, held, asked once more at the timeout


async def test_without_the_suspend_flag_nothing_is_held() -> None:
    store = GrowingStore()
    processor = PullMessageProcessor(store, StoreChanges())  # type: ignore[arg-type]
    request = RawClient.request(RequestCode.PULL_MESSAGE, pull_fields("T", 0, 5, 32))  # sysFlag 4
    answer = await processor.pull_message(request, "/127.0.0.1:1")
    assert answer.code == ResponseCode.PULL_NOT_FOUND
    assert store.reads == 1


async def test_held_pulls_do_not_block_other_requests_and_end_with_the_server(
    start_server: StartServer,
) -> None:
    server = await start_server()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        # TopicA queue 1 ends at 498: a suspended pull there is held (the Java store does not grow).
        fields = {**pull_fields("TopicA", 1, 498, 32), "sysFlag": "6", "suspendTimeoutMillis": "600000"}
        held = RawClient.request(RequestCode.PULL_MESSAGE, fields)
        await client.send(held)
        other = await client.call(
            RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicA", "queueId": "1"})
        )
        assert other.ext_fields == {"offset": "498"}
        await server.stop()  # answers the held pull at once instead of after 10 minutes
        answer = await client.receive()
        assert answer.opaque == held.opaque
        assert (answer.code, answer.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    finally:
        await client.close()


# QUERY_CONSUMER_OFFSET ------------------------------------------------------------------------


async def test_query_consumer_offset_when_the_first_message_is_on_disk(java_store: Any) -> None:
    """With no memory at all every message counts as "on disk": the broker answers QUERY_NOT_FOUND."""
    fields = {"consumerGroup": "G", "topic": "TopicA", "queueId": "1"}
    request = RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
    on_disk = ConsumerManageProcessor(java_store, physical_memory=0).query_consumer_offset(request)
    assert (on_disk.code, on_disk.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
    )
    assert on_disk.ext_fields == {}
    in_memory = ConsumerManageProcessor(java_store, physical_memory=1 << 40).query_consumer_offset(request)
    assert (in_memory.code, in_memory.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
    empty = RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, {**fields, "queueId": "7"})
    assert ConsumerManageProcessor(java_store, physical_memory=0).query_consumer_offset(empty).code == 0


def test_query_consumer_offset_uses_the_broker_conf_in_memory_ratio(
    java_store: Any, java_store_dir: Path
) -> None:
    """``checkInDiskByCommitOffset`` reads the store's ``accessMessageInMemoryMaxRatio``: with the
    machine's memory twice the first message's distance from the CommitLog's end, 40 % (the
    default) puts it on disk and 60 % in memory, so a broker.conf saying 60 turns the broker's
    QUERY_NOT_FOUND into SUCCESS with offset 0."""
    fields = {"consumerGroup": "G", "topic": "TopicA", "queueId": "1"}
    request = RawClient.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
    first = java_store.get_message("TopicA", 1, 0, 1).buffers[0]
    distance = java_store.commitlog.max_offset - int.from_bytes(first[28:36], "big")  # PHYSICALOFFSET
    assert distance > 0
    memory = 2 * distance
    default = ConsumerManageProcessor(java_store, physical_memory=memory).query_consumer_offset(request)
    assert default.code == ResponseCode.QUERY_NOT_FOUND
    conf_text = (java_store_dir.parent / f"{JAVA_STORE}.broker.conf").read_text(encoding="utf-8")
    conf = java_store_dir.parent / "ratio-60.broker.conf"
    conf.write_text(conf_text + "accessMessageInMemoryMaxRatio=60\n", encoding="utf-8")
    store = MessageStore.open(StoreConfig.load(conf))
    try:
        assert store.config.access_message_in_memory_max_ratio == 60
        answer = ConsumerManageProcessor(store, physical_memory=memory).query_consumer_offset(request)
        assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
    finally:
        store.close()
        conf.unlink()


# Routes and the topic list over a store with config/topics.json ---------------------------------


@pytest.fixture
def send_store(stores_dir: Path, tmp_path: Path) -> Any:
    import shutil

    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    shutil.copytree(stores_dir / "java-4.9.7-send", tmp_path / "java-4.9.7-send")
    shutil.copy(stores_dir / "java-4.9.7-send.broker.conf", tmp_path / "java-4.9.7-send.broker.conf")
    store = MessageStore.open(StoreConfig.load(tmp_path / "java-4.9.7-send.broker.conf"))
    yield store
    store.close()


async def test_routes_advertise_the_stores_queue_counts(send_store: Any) -> None:
    import msgspec

    from server.app import QueryServer, ServerSettings

    server = QueryServer(send_store, ServerSettings(host="127.0.0.1", port=0))
    await server.start()
    client = await RawClient.connect("127.0.0.1", server.port)
    try:
        # topics.json: SCHEDULE_TOPIC_XXXX 18/18, SendTopicNew 4/4 (one consumequeue directory, "2").
        for topic, nums in (("SCHEDULE_TOPIC_XXXX", 18), ("SendTopicNew", 4), ("BenchmarkTest", 1024)):
            answer = await client.call(
                RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            )
            queue = msgspec.json.decode(bytes(answer.body or b""))["queueDatas"][0]
            assert (queue["readQueueNums"], queue["writeQueueNums"]) == (nums, nums), topic
        listed = await client.call(RawClient.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        topics = msgspec.json.decode(bytes(listed.body or b""))["topicList"]
        assert "RMQ_SYS_TRANS_HALF_TOPIC" in topics and "SendTopic" in topics
        assert len(topics) == len(set(topics))
    finally:
        await client.close()
        await server.stop()


def test_the_consumer_address_is_written_as_java_prints_it() -> None:
    from server.remoting.dispatch import java_remote_address

    assert java_remote_address("127.0.0.1:39466") == "/127.0.0.1:39466"
    assert java_remote_address("::1:5555") == "/[0:0:0:0:0:0:0:1]:5555"
    assert java_remote_address("fd00::1234:5678:40003") == "/[fd00:0:0:0:0:0:1234:5678]:40003"
