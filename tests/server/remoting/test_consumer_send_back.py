"""CONSUMER_SEND_MSG_BACK (36) over a socket against ``serve --writable``: every branch of 4.9.7's
``consumerSendMsgBack`` and every bad input, answered with the broker's code and remark.

Before: 36 was REQUEST_CODE_NOT_SUPPORTED, which the Go client takes as delivered, so a message a
consumer failed on was dropped; the Java client fell back to sending it itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.message import MessageExt, decode_message
from protocol.message_id import decode_offset_msg_id
from server.app import QueryServer
from server.broker.writable_store import WritableStore
from store.config.subscription_groups import SubscriptionGroupConfig
from tests.support.harness import RawClient
from tests.support.topics_json import durable_topics

GROUP = "G"
COMMAND_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
#: A client of 4.9.7 (``MQVersion.Version.V4_9_7.ordinal()``) and one older than V3_4_9 (121).
V4_9_7, V3_4_9_SNAPSHOT = 409, 120


def _send_fields(topic: str, props: str) -> dict[str, str]:
    return {
        "a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
        "h": "0", "i": props, "j": "0", "k": "false", "m": "false",
    }  # fmt: skip


def _back(offset: int | str | None, **fields: str) -> dict[str, str]:
    ext = {"group": GROUP, "delayLevel": "0", "originMsgId": "x", "originTopic": "T", **fields}
    if offset is not None:
        ext["offset"] = str(offset)
    return ext


def _request(ext: dict[str, str], version: int = V4_9_7, **kw: object) -> RemotingCommand:
    cmd = RawClient.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext, **kw)  # type: ignore[arg-type]
    cmd.version = version
    return cmd


@pytest.fixture
async def client(writable_server: tuple[QueryServer, WritableStore]) -> AsyncIterator[RawClient]:
    srv, store = writable_server
    store.create_topic("T", 1)
    c = await RawClient.connect("127.0.0.1", srv.port)
    yield c
    await c.close()


async def _send(
    client: RawClient, props: str = "KEYS\x01k1\x02UNIQ_KEY\x01AA00\x02WAIT\x01true\x02TAGS\x01TagA"
) -> int:
    """A SEND to T; returns the CommitLog offset of its record."""
    answer = await client.call(
        RawClient.request(RequestCode.SEND_MESSAGE_V2, _send_fields("T", props), b"body")
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return decode_offset_msg_id(answer.ext_fields["msgId"]).offset  # type: ignore[index]


def _queue(store: WritableStore, topic: str, queue_id: int) -> list[MessageExt]:
    result = store.reader.get_message(topic, queue_id, 0, 32)
    return [decode_message(bytes(b)) for b in result.buffers]


def _topic(store: WritableStore, topic: str) -> dict[str, object]:
    """The topic's entry as ``config/topics.json`` holds it on disk."""
    return durable_topics(store.config.store_path_root_dir)[topic]


def _broker(srv: QueryServer):  # type: ignore[no-untyped-def]
    return srv._configure.broker  # type: ignore[attr-defined]


async def test_first_failure_is_retried_through_the_schedule(writable_server, client) -> None:
    _srv, store = writable_server
    offset = await _send(client)
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark, answer.ext_fields) == (ResponseCode.SUCCESS, None, None)
    # The retry topic is on disk when the answer comes: the group's retryQueueNums (1), read and write.
    assert {k: _topic(store, "%RETRY%G")[k] for k in ("readQueueNums", "writeQueueNums", "perm")} == {
        "readQueueNums": 1,
        "writeQueueNums": 1,
        "perm": 6,
    }
    [scheduled] = _queue(store, "SCHEDULE_TOPIC_XXXX", 2)  # level 3 = 3 + reconsumeTimes 0
    props = scheduled.properties
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["DELAY"], props["RETRY_TOPIC"]) == (
        "%RETRY%G",
        "0",
        "3",
        "T",
    )
    assert (props["WAIT"], props["UNIQ_KEY"], props["KEYS"]) == ("false", "AA00", "k1")
    assert (
        props["ORIGIN_MESSAGE_ID"] == decode_message(bytes(store.reader.view_message(offset))).offset_msg_id
    )
    assert (scheduled.reconsume_times, scheduled.body, scheduled.born_timestamp) == (
        1,
        b"body",
        1700000000000,
    )
    # When the level's delay is over the schedule puts it into the retry topic, as the consumer pulls it.
    store.deliver_due(now_ms=scheduled.store_timestamp + 60_000)
    [retried] = _queue(store, "%RETRY%G", 0)
    assert (retried.topic, retried.reconsume_times, retried.properties["RETRY_TOPIC"]) == ("%RETRY%G", 1, "T")
    # The second failure of that copy waits one level longer and keeps the first origin id.
    answer = await client.call(_request(_back(retried.commit_log_offset)))
    assert answer.code == ResponseCode.SUCCESS
    [second] = _queue(store, "SCHEDULE_TOPIC_XXXX", 3)
    assert (second.reconsume_times, second.properties["DELAY"]) == (2, "4")
    assert second.properties["ORIGIN_MESSAGE_ID"] == props["ORIGIN_MESSAGE_ID"]
    assert second.properties["RETRY_TOPIC"] == "T"


async def test_past_max_reconsume_times_is_a_dead_letter(writable_server, client) -> None:
    _srv, store = writable_server
    offset = await _send(client)
    answer = await client.call(_request(_back(offset, maxReconsumeTimes="0")))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    [dead] = _queue(store, "%DLQ%G", 0)
    assert (dead.reconsume_times, dead.properties["DELAY"], dead.properties["RETRY_TOPIC"]) == (1, "0", "T")
    assert {k: _topic(store, "%DLQ%G")[k] for k in ("readQueueNums", "writeQueueNums", "perm")} == {
        "readQueueNums": 1,
        "writeQueueNums": 1,
        "perm": 6,
    }
    assert _queue(store, "SCHEDULE_TOPIC_XXXX", 2) == []


async def test_negative_level_is_a_dead_letter_at_once(writable_server, client) -> None:
    _srv, store = writable_server
    offset = await _send(client)
    assert (await client.call(_request(_back(offset, delayLevel="-1")))).code == ResponseCode.SUCCESS
    assert [m.reconsume_times for m in _queue(store, "%DLQ%G", 0)] == [1]


async def test_old_clients_max_is_the_groups(writable_server, client) -> None:
    """Before V3_4_9 the header's maxReconsumeTimes is ignored: the group's retryMaxTimes (16) rules."""
    _srv, store = writable_server
    offset = await _send(client)
    answer = await client.call(_request(_back(offset, maxReconsumeTimes="0"), version=V3_4_9_SNAPSHOT))
    assert answer.code == ResponseCode.SUCCESS
    assert len(_queue(store, "SCHEDULE_TOPIC_XXXX", 2)) == 1
    assert store.topic_config("%DLQ%G") is None


async def test_group_max_from_its_config(writable_server, client) -> None:
    srv, store = writable_server
    _broker(srv).groups.put(SubscriptionGroupConfig(GROUP, retry_max_times=0))
    offset = await _send(client)
    assert (await client.call(_request(_back(offset)))).code == ResponseCode.SUCCESS
    assert len(_queue(store, "%DLQ%G", 0)) == 1


async def test_level_the_client_asks_for(writable_server, client) -> None:
    _srv, store = writable_server
    offset = await _send(client)
    assert (await client.call(_request(_back(offset, delayLevel="1")))).code == ResponseCode.SUCCESS
    assert [m.properties["DELAY"] for m in _queue(store, "SCHEDULE_TOPIC_XXXX", 0)] == ["1"]
    assert (await client.call(_request(_back(offset, delayLevel="99")))).code == ResponseCode.SUCCESS
    assert [m.properties["DELAY"] for m in _queue(store, "SCHEDULE_TOPIC_XXXX", 17)] == ["18"]


async def test_unit_mode_retry_topic_flag(writable_server, client) -> None:
    _srv, store = writable_server
    offset = await _send(client)
    assert (await client.call(_request(_back(offset, unitMode="true")))).code == ResponseCode.SUCCESS
    assert _topic(store, "%RETRY%G")["topicSysFlag"] == 2


async def test_rocketmq_serialization(writable_server, client) -> None:
    _srv, _store = writable_server
    offset = await _send(client)
    answer = await client.call(_request(_back(offset), serialize_type=SerializeType.ROCKETMQ))
    assert (answer.code, answer.serialize_type, answer.ext_fields) == (
        ResponseCode.SUCCESS,
        SerializeType.ROCKETMQ,
        None,
    )


async def test_unknown_group_without_auto_creation(writable_server, client) -> None:
    srv, store = writable_server
    _broker(srv).settings.auto_create_subscription_group = False
    offset = await _send(client)
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group not exist, G {FAQ}",
    )
    assert store.topic_config("%RETRY%G") is None


async def test_group_without_retry_queues_is_success_storing_nothing(writable_server, client) -> None:
    """The broker's answer: the message is dropped (RELIABILITY.md)."""
    srv, store = writable_server
    _broker(srv).groups.put(SubscriptionGroupConfig(GROUP, retry_queue_nums=0))
    offset = await _send(client)
    end = store.writer.position
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert store.writer.position == end
    assert store.topic_config("%RETRY%G") is None


async def test_retry_topic_not_writable(writable_server, client) -> None:
    _srv, store = writable_server
    store.create_topic("%RETRY%G", 1, perm=4)
    offset = await _send(client)
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark) == (
        ResponseCode.NO_PERMISSION,
        "the topic[%RETRY%G] sending message is forbidden",
    )


@pytest.mark.parametrize("where", ["end", "past", "negative", "inside"])
async def test_no_record_at_the_offset(writable_server, client, where: str) -> None:
    _srv, store = writable_server
    first = await _send(client)
    offset = {"end": store.writer.position, "past": 10**12, "negative": -1, "inside": first + 8}[where]
    end = store.writer.position
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark) == (
        ResponseCode.SYSTEM_ERROR,
        f"look message by offset failed, {offset}",
    )
    assert store.writer.position == end


async def test_store_refusals_answer_the_put_status(writable_server, client) -> None:
    _srv, store = writable_server
    plain = await _send(client)
    # Properties the SEND took that no longer fit once the send-back and the schedule add theirs.
    offset = await _send(client, "K\x01" + "v" * 32_640)
    answer = await client.call(_request(_back(offset)))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "PROPERTIES_SIZE_EXCEEDED")
    store.not_writable = "a test stopped it"
    answer = await client.call(_request(_back(plain)))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        ({"group": "G", "delayLevel": "0"}, "the custom field <offset> is null"),
        ({"offset": "0", "delayLevel": "0"}, "the custom field <group> is null"),
        ({"offset": "0", "group": "G"}, "the custom field <delayLevel> is null"),
        (
            {"offset": "x", "group": "G", "delayLevel": "0"},
            "the custom field <offset> is not a valid Java long: 'x'",
        ),
        (
            {"offset": "0", "group": "G", "delayLevel": "2147483648"},
            "the custom field <delayLevel> is not a valid Java int: '2147483648' is out of range",
        ),
        (
            {"offset": "0", "group": "G", "delayLevel": "0", "maxReconsumeTimes": "one"},
            "the custom field <maxReconsumeTimes> is not a valid Java int: 'one'",
        ),
    ],
    ids=["no-offset", "no-group", "no-level", "bad-offset", "level-overflow", "bad-max"],
)
async def test_bad_headers(writable_server, client, ext: dict[str, str], remark: str) -> None:
    _srv, store = writable_server
    await _send(client)
    end = store.writer.position
    answer = await client.call(_request(ext))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, f"{COMMAND_EXCEPTION}: {remark}")
    assert store.writer.position == end


async def test_no_header_at_all(writable_server, client) -> None:
    answer = await client.call(_request(None))  # type: ignore[arg-type]
    assert (answer.code, answer.remark) == (
        ResponseCode.SYSTEM_ERROR,
        f"{COMMAND_EXCEPTION}: the custom field <offset> is null",
    )


def _retry_send_fields(reconsume_times: int, max_times: int | None = None) -> dict[str, str]:
    """What the Java client's fallback sends when CONSUMER_SEND_MSG_BACK failed: the message to
    ``%RETRY%G`` with DELAY 3 + reconsumeTimes, its reconsume and max reconsume times."""
    fields = _send_fields(
        "%RETRY%G", f"DELAY\x01{3 + reconsume_times - 1}\x02RETRY_TOPIC\x01T\x02WAIT\x01true"
    )
    fields["j"] = str(reconsume_times)
    if max_times is not None:
        fields["l"] = str(max_times)
    return fields


async def test_client_fallback_send_to_retry_topic_past_max_is_a_dead_letter(writable_server, client) -> None:
    """``handleRetryAndDLQ``: the topic and queue become the DLQ's; the client's DELAY stays (4.9.7
    overwrites its own DELAY=0 with the request's properties), so it is scheduled into ``%DLQ%G``."""
    _srv, store = writable_server
    answer = await client.call(
        RawClient.request(RequestCode.SEND_MESSAGE_V2, _retry_send_fields(1, max_times=1), b"body")
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert store.topic_config("%DLQ%G") is not None
    [scheduled] = _queue(store, "SCHEDULE_TOPIC_XXXX", 2)
    assert (scheduled.properties["REAL_TOPIC"], scheduled.properties["REAL_QID"]) == ("%DLQ%G", "0")
    store.deliver_due(now_ms=scheduled.store_timestamp + 60_000)
    assert [m.reconsume_times for m in _queue(store, "%DLQ%G", 0)] == [1]


async def test_client_fallback_send_below_max_stays_a_retry(writable_server, client) -> None:
    _srv, store = writable_server
    answer = await client.call(
        RawClient.request(RequestCode.SEND_MESSAGE_V2, _retry_send_fields(1, max_times=2), b"body")
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    [scheduled] = _queue(store, "SCHEDULE_TOPIC_XXXX", 2)
    assert scheduled.properties["REAL_TOPIC"] == "%RETRY%G"
    assert store.topic_config("%DLQ%G") is None


async def test_client_fallback_send_for_an_unknown_group(writable_server, client) -> None:
    srv, store = writable_server
    _broker(srv).settings.auto_create_subscription_group = False
    store.create_topic("%RETRY%G", 1)
    end = store.writer.position
    answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _retry_send_fields(1), b"body"))
    assert (answer.code, answer.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group not exist, G {FAQ}",
    )
    assert store.writer.position == end
