"""Resend under ``serve --writable``: ``POST /api/messages/{id}/resend`` over a writable store.

The originals are stored by the remoting port's own SEND processor (a SEND_MESSAGE_V2 request
handled as a producer's would be), or, for a retry copy, put into ``%RETRY%`` as the send-back
stores it; the expected copy is written out by hand from the rules in ``server.http.resend``'s
docstring: the producer's properties with a new ``UNIQ_KEY``, none of the broker's or the retry's,
the same body and flag, reconsume times 0, born at the HTTP caller. Access control is checked with
an account that may only read, one that may send to one topic, and an admin (for ``/metrics``).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message_properties import properties_to_string
from protocol.send_message import SendMessageRequestHeader
from server.acl.config import DENY, PUB, SUB, Account, AclConfig
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import WritePath, write_path
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord
from tests.support.http_csrf import csrf_headers

READER = ("reader-ak-1", "reader-sk-1")
WRITER = ("writer-ak-1", "writer-sk-1")
ADMIN = ("admin-ak-01", "admin-sk-01")
ACL = AclConfig(
    accounts={
        READER[0]: Account(*READER, resource_perms={"Orders": SUB}),
        WRITER[0]: Account(
            *WRITER, default_group_perm=SUB, resource_perms={"Orders": PUB | SUB, "Other": SUB}
        ),
        ADMIN[0]: Account(*ADMIN, admin=True, default_topic_perm=DENY),
    }
)
ORIGINAL_PROPS = {"KEYS": "order-1 o1", "TAGS": "TagA", "UNIQ_KEY": "0A0000090000AAAA0000000000000001",
                  "WAIT": "true", "app": "值-1"}  # fmt: skip


def auth(account: tuple[str, str]) -> dict[str, str]:
    token = base64.b64encode(f"{account[0]}:{account[1]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def send_original(path: WritePath, topic: str, props: dict[str, str], body: bytes) -> str:
    """A producer's SEND through the remoting processor; its offset msg id."""
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=1, sys_flag=0, born_timestamp=1_700_000_000_000, flag=7,
        properties=properties_to_string(props),
    )  # fmt: skip
    request = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2, ext_fields=header.to_ext_fields(v2=True), body=body
    )
    assert path.sends is not None
    answer = path.sends.handle(request, ("10.0.0.9", 5555))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields["msgId"]  # type: ignore[index]


async def start(tmp_path: Path, acl: AclConfig | None) -> tuple[QueryServer, WritableStore, WritePath]:
    config = StoreConfig.for_store(tmp_path / "store", broker_name="b1")
    store = WritableStore(config, auto_create_topics=False)
    store.create_topic("Orders", 4)
    store.create_topic("Other", 2)
    path = write_path(store)
    server = QueryServer(
        store.reader, ServerSettings(port=0, broker_name="b1", http_port=0, acl=acl), configure=path
    )
    await server.start()
    return server, store, path


@pytest.fixture
async def writable(tmp_path: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, WritePath]]:
    server, store, path = await start(tmp_path, None)
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            yield session, path
    finally:
        await server.stop()
        store.close()


async def post(
    session: aiohttp.ClientSession, msg_id: str, body: Any = None, status: int = 201, **kwargs: Any
) -> dict[str, Any]:
    kwargs["headers"] = {**await csrf_headers(session), **kwargs.get("headers", {})}
    async with session.post(f"/api/messages/{msg_id}/resend", json=body or {}, **kwargs) as response:
        answer = await response.json()
        assert response.status == status, answer
        return answer


async def one_record(session: aiohttp.ClientSession, offset_msg_id: str) -> dict[str, Any]:
    async with session.get(f"/api/messages/{offset_msg_id}") as response:
        assert response.status == 200
        body = await response.json()
    return next(m for m in body["messages"] if m["offsetMsgId"] == offset_msg_id)


async def test_the_copy_is_a_producers_send_of_the_message(writable: Any) -> None:
    session, path = writable
    original_id = send_original(path, "Orders", ORIGINAL_PROPS, "body ☕".encode())
    original = await one_record(session, original_id)
    answer = await post(session, original_id)
    assert answer["topic"] == "Orders" and answer["resentFrom"] == original_id
    assert answer["uniqueKey"] != ORIGINAL_PROPS["UNIQ_KEY"] and len(answer["uniqueKey"]) == 32
    copy = await one_record(session, answer["offsetMsgId"])
    # WAIT is kept out of the stored string by the broker, CLUSTER put by it: as for the original
    assert copy["properties"] == {**original["properties"], "UNIQ_KEY": answer["uniqueKey"]}
    assert "WAIT" not in copy["properties"] and copy["properties"]["CLUSTER"] == "DefaultCluster"
    assert (copy["bodyText"], copy["flag"], copy["sysFlag"], copy["reconsumeTimes"]) == ("body ☕", 7, 0, 0)
    assert (copy["queueId"], copy["queueOffset"]) == (answer["queueId"], answer["queueOffset"])
    assert copy["bornHost"].startswith("127.0.0.1:") and copy["bornTimestamp"] > original["bornTimestamp"]
    assert copy["offsetMsgId"] != original_id
    # the copy is a message of its own: its id finds it (indexed at once), and only it
    async with session.get(f"/api/messages/{answer['uniqueKey']}") as response:
        found = (await response.json())["messages"]
    assert [m["offsetMsgId"] for m in found] == [answer["offsetMsgId"]]
    # another topic, by unique key of the original
    other = await post(session, ORIGINAL_PROPS["UNIQ_KEY"], {"topic": "Other"})
    assert other["topic"] == "Other" and (await one_record(session, other["offsetMsgId"]))["topic"] == "Other"


async def test_a_retry_copy_goes_back_to_its_topic_without_the_retrys_properties(writable: Any) -> None:
    session, path = writable
    props = {**ORIGINAL_PROPS, "RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "X" * 32, "DELAY": "3",
             "MAX_RECONSUME_TIMES": "16", "CLUSTER": "DefaultCluster"}  # fmt: skip
    store: WritableStore = path.store
    store.create_topic("%RETRY%g1", 1)
    stored = store.put(
        [StoreRecord("%RETRY%g1", b"again", properties_to_string(props), reconsume_times=3, flag=2)]
    )
    answer = await post(session, stored[0].offset_msg_id)
    assert answer["topic"] == "Orders"  # RETRY_TOPIC, not the retry topic nor the schedule's
    copy = await one_record(session, answer["offsetMsgId"])
    assert copy["topic"] == "Orders" and copy["reconsumeTimes"] == 0 and copy["flag"] == 2
    wanted = {k: v for k, v in ORIGINAL_PROPS.items() if k != "WAIT"}
    assert copy["properties"] == {**wanted, "UNIQ_KEY": answer["uniqueKey"], "CLUSTER": "DefaultCluster"}


@pytest.mark.parametrize(
    ("kwargs", "status", "error"),
    [
        ({"json": {"topic": "bad topic!"}}, 400, "bad_request"),
        ({"json": ["Orders"]}, 400, "bad_request"),
        # nested past the decoder's bound: a 400, not a RecursionError (issue 31, item 8)
        ({"data": "[" * 20_000, "headers": {"Content-Type": "application/json"}}, 400, "bad_request"),
        ({"data": "{}", "headers": {"Content-Type": "text/plain"}}, 415, "unsupported_media_type"),
        ({"json": {}, "headers": {"Origin": "http://evil.example"}}, 403, "csrf"),
        ({"json": {}, "headers": {"Sec-Fetch-Site": "cross-site"}}, 403, "csrf"),
        ({"json": {"topic": "NoSuchTopic"}}, 404, "not_found"),  # auto-create is off: TOPIC_NOT_EXIST
        ({"json": {"topic": "SCHEDULE_TOPIC_XXXX"}}, 403, "forbidden"),  # nobody may send there
    ],
)
async def test_refusals(writable: Any, kwargs: dict[str, Any], status: int, error: str) -> None:
    session, path = writable
    original_id = send_original(path, "Orders", ORIGINAL_PROPS, b"x")
    token = await csrf_headers(session)
    kwargs["headers"] = {**token, **kwargs.get("headers", {})}
    async with session.post(f"/api/messages/{original_id}/resend", **kwargs) as response:
        body = await response.json()
        assert (response.status, body["error"]) == (status, error), body
    async with session.post("/api/messages/no-such-id/resend", json={}, headers=token) as response:
        assert response.status == 404


async def test_acl_needs_pub_on_the_target_and_admin_for_metrics(tmp_path: Path) -> None:
    server, store, path = await start(tmp_path, ACL)
    try:
        original_id = send_original(path, "Orders", ORIGINAL_PROPS, b"x")
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            assert (await post(session, original_id, status=401))["error"] == "unauthorized"
            refused = await post(session, original_id, status=403, headers=auth(READER))
            assert "Orders" in refused["message"]
            await post(session, original_id, headers=auth(WRITER))
            await post(session, original_id, {"topic": "Other"}, status=403, headers=auth(WRITER))
            # /metrics: credentials, then an admin account
            for headers, status in (({}, 401), (auth(READER), 403), (auth(ADMIN), 200)):
                async with session.get("/metrics", headers=headers) as response:
                    assert response.status == status, headers
            async with session.get("/", headers={}) as response:
                assert response.status == 200  # the page itself holds no data
    finally:
        await server.stop()
        store.close()
