"""Issue 31 item 5: ACL tighter than 4.9.7 where 4.9.7 leaks (``serve --acl --writable`` over sockets).

4.9.7 checks only the signature of SEND_BATCH_MESSAGE, of VIEW_MESSAGE_BY_ID without a topic, and only
the caller's own group of CONSUMER_SEND_MSG_BACK: an account denied a topic could write it in a batch,
read its records by offset, or copy them into its own retry / dead-letter queue and pull them there.
Here a batch needs PUB on its topic (``b``) as SEND_MESSAGE_V2 does, and the record a VIEW answers or
a send-back copies needs SUB (GET for a VIEW) on its topic and on its ``REAL_TOPIC`` (a delayed message
parked in ``SCHEDULE_TOPIC_XXXX``). Each refusal is NO_PERMISSION with the broker's remark, and
nothing is answered or stored; the same requests from an account that may are served.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.acl import AclSigner
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.send_message import encode_batch_body
from server.acl.config import PUB, SUB, acl_config_from
from server.acl.validator import required_resources
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient

SECRET = "secret123"
#: ``owner123`` may do anything with topics; ``outsider1`` may use ``TopicOpen`` and its own groups, and
#: is denied ``TopicSecret`` (explicitly, although its default would let it consume any other topic).
ACL = acl_config_from(
    {
        "accounts": [
            {
                "accessKey": "owner123",
                "secretKey": SECRET,
                "defaultTopicPerm": "PUB|SUB",
                "defaultGroupPerm": "SUB",
            },
            {
                "accessKey": "outsider1",
                "secretKey": SECRET,
                "defaultTopicPerm": "SUB",
                "defaultGroupPerm": "SUB",
                "topicPerms": ["TopicSecret=DENY", "TopicOpen=PUB|SUB"],
            },
        ]
    }
)
DENIED = "No default permission for topic:TopicSecret"


def signed(who: str, code: int, fields: dict[str, str], body: bytes | None = None) -> RemotingCommand:
    request = RawClient.request(code, dict(fields), body)
    AclSigner(who, SECRET)(request)
    return request


def v2(topic: str, props: str = "WAIT\x01true", batch: bool = False) -> dict[str, str]:
    return {
        "a": "pg",
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
        "m": "true" if batch else "false",
    }


def batch_body(n: int) -> bytes:
    return encode_batch_body([(0, f"b{i}".encode(), {"WAIT": "true"}) for i in range(n)])


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritableStore]]:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store"))
    srv = QueryServer(store.reader, ServerSettings(port=0, acl=ACL), configure=write_path(store))
    await srv.start()
    try:
        yield srv, store
    finally:
        await srv.stop()
        store.close()


@pytest.fixture
async def client(server: tuple[QueryServer, WritableStore]) -> AsyncIterator[RawClient]:
    c = await RawClient.connect("127.0.0.1", server[0].port)
    yield c
    await c.close()


async def _send(client: RawClient, who: str, topic: str, props: str = "WAIT\x01true") -> int:
    """The CommitLog offset of the message ``who`` sent to ``topic``."""
    answer = await client.call(signed(who, RequestCode.SEND_MESSAGE_V2, v2(topic, props), b"payload"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext_fields["msgId"][-16:], 16)


async def _max_offset(client: RawClient, topic: str) -> int:
    answer = await client.call(
        signed("owner123", RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})
    )
    return int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else -1


def test_a_batch_needs_pub_on_its_topic_as_a_v2_send() -> None:
    batch = RawClient.request(RequestCode.SEND_BATCH_MESSAGE, v2("T", batch=True))
    assert required_resources(batch) == {"T": PUB}
    retry = RawClient.request(RequestCode.SEND_BATCH_MESSAGE, v2("%RETRY%G", batch=True))
    assert required_resources(retry) == {"%RETRY%pg": SUB}


async def test_a_batch_to_a_denied_topic_is_refused_and_stores_nothing(client: RawClient) -> None:
    await _send(client, "owner123", "TopicSecret")  # the topic exists, with one message
    refused = await client.call(
        signed("outsider1", RequestCode.SEND_BATCH_MESSAGE, v2("TopicSecret", batch=True), batch_body(3))
    )
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, DENIED)
    assert await _max_offset(client, "TopicSecret") == 1
    served = await client.call(
        signed("outsider1", RequestCode.SEND_BATCH_MESSAGE, v2("TopicOpen", batch=True), batch_body(3))
    )
    assert served.code == ResponseCode.SUCCESS, served.remark
    assert await _max_offset(client, "TopicOpen") == 3


async def test_view_by_offset_needs_sub_on_the_records_topic(client: RawClient) -> None:
    secret = await _send(client, "owner123", "TopicSecret")
    public = await _send(client, "owner123", "TopicOpen")
    for fields in ({"offset": str(secret)}, {"offset": str(secret), "topic": "TopicOpen"}):
        refused = await client.call(signed("outsider1", RequestCode.VIEW_MESSAGE_BY_ID, fields))
        assert (refused.code, refused.remark, refused.body) == (ResponseCode.NO_PERMISSION, DENIED, None)
    owner = await client.call(signed("owner123", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(secret)}))
    assert owner.code == ResponseCode.SUCCESS and b"TopicSecret" in owner.body
    mine = await client.call(signed("outsider1", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(public)}))
    assert mine.code == ResponseCode.SUCCESS and b"TopicOpen" in mine.body


async def test_view_of_a_delayed_message_checks_the_topic_it_is_bound_for(client: RawClient) -> None:
    # Stored in SCHEDULE_TOPIC_XXXX (which the outsider's default SUB covers), bound for TopicSecret.
    parked = await _send(client, "owner123", "TopicSecret", "WAIT\x01true\x02DELAY\x0118")
    refused = await client.call(signed("outsider1", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(parked)}))
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, DENIED)


async def test_view_of_bytes_that_are_no_record_is_refused_under_acl(
    server: tuple[QueryServer, WritableStore], client: RawClient
) -> None:
    """A body holding a plausible size word: a VIEW at its offset reads 64 bytes of TopicSecret's
    message that are no record, so no topic can be checked: refused, nothing answered."""
    fake = b"\x00\x00\x00\x40" + b"S" * 60
    answer = await client.call(signed("owner123", RequestCode.SEND_MESSAGE_V2, v2("TopicSecret"), fake))
    offset = int(answer.ext_fields["msgId"][-16:], 16)
    stored = server[1].reader.view_message_copy(offset, 1 << 20)
    assert stored is not None
    inside = offset + stored.index(fake)
    refused = await client.call(signed("outsider1", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(inside)}))
    assert refused.code == ResponseCode.NO_PERMISSION and refused.body is None
    assert refused.remark == f"the bytes at offset {inside} are no message, so their topic cannot be checked"


async def test_send_back_of_a_denied_topics_record_is_refused_and_copies_nothing(
    server: tuple[QueryServer, WritableStore], client: RawClient
) -> None:
    secret = await _send(client, "owner123", "TopicSecret")
    public = await _send(client, "owner123", "TopicOpen")

    def back(offset: int, max_times: str) -> RemotingCommand:
        fields = {"offset": str(offset), "group": "G", "delayLevel": "0", "maxReconsumeTimes": max_times}
        return signed("outsider1", RequestCode.CONSUMER_SEND_MSG_BACK, fields)

    for max_times in ("16", "0"):  # a retry, and straight to the dead-letter queue
        refused = await client.call(back(secret, max_times))
        assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, DENIED)
    assert len(list(server[1].reader.commitlog.iter_records())) == 2  # the two sends, no copy
    served = await client.call(back(public, "0"))
    assert served.code == ResponseCode.SUCCESS, served.remark
    assert await _max_offset(client, "%DLQ%G") == 1
