"""A request's reply as 4.9.7's ``ReplyMessageProcessor`` handles it: the rules without sockets.

Expected texts are the real broker's, copied from ``tests/server/golden/request_reply_4.9.7.json``
(the JSON run): remarks, the push's property order, the stored records' properties.
"""

from __future__ import annotations

import pytest

from protocol.codes import ResponseCode
from protocol.send_message import SendMessageRequestHeader
from server.broker.client_channel import ClientChannelInfo
from server.broker.consumer_groups import CHANNEL_EXPIRED_MS
from server.broker.producer_groups import ProducerGroups
from server.broker.put_message import PutContext, PutRefused
from server.broker.reply_message import (
    PushOutcome,
    StoreThrew,
    channel_not_found_remark,
    push_failed_remark,
    push_header,
    push_properties,
    reply_answer,
    reply_queue,
    reply_record,
    reply_target,
    reply_to_missing_remark,
)
from store.config.topics import TopicConfig
from tests.support.channels import FakeChannel

SENT = (
    "MSG_TYPE\x01reply\x02CORRELATION_ID\x01corr-1\x02REPLY_TO_CLIENT\x01cid-R-json\x02TTL\x013000\x02"
    "UNIQ_KEY\x01C0FFEE02000000000000000000000001\x02WAIT\x01true\x02"
)
#: The broker's push of ``SENT`` (PUSH_REPLY_TIME recorded as <timestamp>): HashMap order, no final 0x02.
PUSHED = (
    "PUSH_REPLY_TIME\x01{t}\x02MSG_TYPE\x01reply\x02REPLY_TO_CLIENT\x01cid-R-json\x02"
    "UNIQ_KEY\x01C0FFEE02000000000000000000000001\x02TTL\x013000\x02WAIT\x01true\x02CORRELATION_ID\x01corr-1"
)
CTX = PutContext("DefaultCluster", 4 * 1024 * 1024, "127.0.0.1", 5555)


def send_header(properties: str = SENT, queue_id: int = 0) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="RrReplier_json",
        topic="DefaultCluster_REPLY_TOPIC",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=1700000000000,
        flag=0,
        properties=properties,
        reconsume_times=0,
        unit_mode=False,
    )


def test_the_broker_s_remarks() -> None:
    assert reply_to_missing_remark() == "reply message properties[REPLY_TO_CLIENT] is null"
    assert channel_not_found_remark("cid-nobody-json") == (
        "push reply message fail, channel of <cid-nobody-json> not found."
    )
    assert push_failed_remark("cid-F-json") == "push reply message to cid-F-jsonfail."


def test_the_reply_is_pushed_to_its_reply_to_client() -> None:
    assert reply_target({"REPLY_TO_CLIENT": "cid-R", "CORRELATION_ID": "c"}) == "cid-R"
    assert reply_target({"CORRELATION_ID": "c"}) is None


def test_the_push_carries_the_properties_in_hashmap_order_with_the_push_time() -> None:
    assert push_properties(SENT, 1800000000123) == PUSHED.format(t=1800000000123)


def test_the_push_header_keeps_the_request_s_queue_and_names_both_addresses() -> None:
    pushed = push_header(
        send_header(queue_id=-1), born=("127.0.0.1", 5555), store_host=("10.0.0.1", 10911), now_ms=7,
        properties="P",
    )  # fmt: skip
    assert (pushed.queue_id, pushed.born_host, pushed.store_host) == (-1, "127.0.0.1:5555", "10.0.0.1:10911")
    assert (pushed.store_timestamp, pushed.properties, pushed.topic) == (7, "P", "DefaultCluster_REPLY_TOPIC")


@pytest.mark.parametrize(
    ("push", "stored", "code", "remark", "header"),
    [
        (PushOutcome(), ("AB" * 16, 3), ResponseCode.SUCCESS, None, ("AB" * 16, 0, 3)),
        (PushOutcome(), None, ResponseCode.SUCCESS, None, ("0", 0, 0)),
        (PushOutcome("no"), ("AB" * 16, 4), ResponseCode.SYSTEM_ERROR, "no", ("AB" * 16, 0, 4)),
        (PushOutcome("no"), None, ResponseCode.SYSTEM_ERROR, "no", None),
    ],
)
def test_the_push_decides_the_code_and_the_store_the_header(
    push: PushOutcome, stored: tuple[str, int] | None, code: int, remark: str | None, header: tuple | None
) -> None:
    answer = reply_answer(push, stored, 0)
    assert (answer.code, answer.remark) == (code, remark)
    got = (
        None
        if answer.header is None
        else (answer.header.msg_id, answer.header.queue_id, answer.header.queue_offset)
    )
    assert got == header


def test_a_negative_queue_is_a_random_writable_one() -> None:
    config = TopicConfig("T", 8, 3)
    assert {reply_queue(send_header(queue_id=-1), config) for _ in range(200)} <= {0, 1, 2}
    assert reply_queue(send_header(queue_id=5), config) == 5


def test_the_reply_is_stored_as_sent_with_sys_flag_0_and_no_cluster() -> None:
    rec = reply_record(send_header(), b"reply-1", 0, CTX)
    assert (rec.topic, rec.queue_id, rec.sys_flag) == ("DefaultCluster_REPLY_TOPIC", 0, 0)
    stored = rec.properties if isinstance(rec.properties, str) else rec.properties.decode()
    assert stored == SENT


def test_a_delayed_reply_goes_to_the_schedule_with_the_properties_the_push_left() -> None:
    sent = (
        SENT.replace("corr-1", "corr-12").replace(
            "C0FFEE02000000000000000000000001", "C0FFEE0200000000000000000000000C"
        )
        + "DELAY\x013\x02"
    )
    props = {k: v for k, v in (p.split("\x01") for p in sent.split("\x02") if p)}
    props["PUSH_REPLY_TIME"] = "1800000000000"
    rec = reply_record(send_header(sent), b"r12", 0, CTX, properties=props)
    assert (rec.topic, rec.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
    stored = rec.properties if isinstance(rec.properties, str) else rec.properties.decode()
    # The recorded record's properties, in its order.
    assert [p.split("\x01")[0] for p in stored.split("\x02") if p] == [
        "PUSH_REPLY_TIME", "REAL_TOPIC", "MSG_TYPE", "REPLY_TO_CLIENT", "UNIQ_KEY", "TTL", "WAIT", "DELAY",
        "CORRELATION_ID", "REAL_QID",
    ]  # fmt: skip


def test_a_delay_java_cannot_parse_throws_and_a_too_big_reply_is_refused() -> None:
    with pytest.raises(StoreThrew, match='For input string: "x"'):
        reply_record(send_header(SENT + "DELAY\x01x\x02"), b"r", 0, CTX)
    with pytest.raises(PutRefused) as refused:
        reply_record(send_header(), b"x" * (CTX.max_message_size + 1), 0, CTX)
    assert not isinstance(refused.value, StoreThrew)


def member(channel: FakeChannel, client_id: str, now: int = 0) -> ClientChannelInfo:
    return ClientChannelInfo(channel, client_id, "JAVA", 407, now)


def test_a_client_id_routes_to_its_latest_new_registration() -> None:
    producers = ProducerGroups()
    first, second = FakeChannel(), FakeChannel()
    producers.register("P", member(first, "cid"))
    producers.register("P", member(second, "cid"))
    assert producers.find_channel("cid") is second
    producers.register("P", member(first, "cid", 10))  # a refresh of the first: no new registration
    assert producers.find_channel("cid") is second
    assert producers.find_channel("nobody") is None


def test_a_client_stays_routed_while_it_has_a_group_and_falls_back_to_its_other_connection() -> None:
    producers = ProducerGroups()
    old, new = FakeChannel(), FakeChannel()
    producers.register("P", member(old, "cid"))
    producers.register("P", member(new, "cid"))
    producers.register("CLIENT_INNER_PRODUCER", member(new, "cid"))
    producers.unregister("P", new)  # one producer of the client shut down; its other group remains
    assert producers.find_channel("cid") is new
    producers.channel_closed(new)
    assert producers.find_channel("cid") is old
    producers.unregister("P", old)
    assert producers.find_channel("cid") is None


def test_an_expired_client_is_no_longer_routed() -> None:
    producers = ProducerGroups()
    channel = FakeChannel()
    producers.register("P", member(channel, "cid", 0))
    producers.expire(CHANNEL_EXPIRED_MS + 1)
    assert producers.find_channel("cid") is None
