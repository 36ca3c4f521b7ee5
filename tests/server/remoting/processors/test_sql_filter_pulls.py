"""SQL92 subscriptions over raw requests to ``serve --writable``: what 4.9.7's
``PullMessageProcessor``, ``ClientManageProcessor.checkClientConfig`` and ``ExpressionMessageFilter``
answer (expected values from those sources, worked out by hand).

- A pull carrying its expression (the subscription flag) is filtered by it; an empty expression is
  SUBSCRIPTION_PARSE_FAILED; one that does not compile is not refused (``ConsumerFilterManager.build``
  swallows the error) and, the filter data being null, every message passes.
- A pull relying on the heartbeat's expression is filtered by it; one that did not compile was never
  registered: FILTER_DATA_NOT_EXIST.
- With ``enablePropertyFilter`` off, every SQL92 pull that got past those checks and CHECK_CLIENT_CONFIG
  are SYSTEM_ERROR "The broker does not support consumer to filter message by SQL92"; on,
  CHECK_CLIENT_CONFIG compiles the expression (SUBSCRIPTION_PARSE_FAILED when it does not compile).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import store.consumequeue.get_message as get_message_module
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.message import decode_message
from server.app import QueryServer, ServerSettings
from server.broker.controller import ConsumeSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient
from tests.support.pulls import pull_fields, records

TOPIC = "SqlT"
REFUSED = "The broker does not support consumer to filter message by SQL92"


@pytest.fixture(params=[True, False], ids=["filter-on", "filter-off"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[RawClient, bool]]:
    """A writable server holding m0..m5 in queue 0 of ``SqlT`` (property ``a`` = i, tag TagA for even
    i, TagB for odd), and a client connected to it; with property filtering on or off."""
    config = StoreConfig.for_store(tmp_path / "store", broker_name="b1")
    store = WritableStore(config)
    consume = ConsumeSettings(enable_property_filter=request.param)
    srv = QueryServer(
        store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store, consume=consume)
    )
    await srv.start()
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        for i in range(6):
            props = f"WAIT\x01true\x02TAGS\x01{'TagA' if i % 2 == 0 else 'TagB'}\x02a\x01{i}"
            fields = {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1",
                      "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}  # fmt: skip
            sent = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, f"m{i}".encode()))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        yield client, request.param
    finally:
        await client.close()
        await srv.stop()
        store.close()


async def pull(
    client: RawClient, expression: str | None, *, carried: bool = True, group: str = "G"
) -> RemotingCommand:
    fields = pull_fields(TOPIC, 0, 0, 32)
    fields.update(consumerGroup=group, expressionType="SQL92")
    if carried:
        fields["subscription"] = expression  # type: ignore[assignment]
    else:
        fields.update(sysFlag="0", subVersion="1")
        fields.pop("subscription")
    return await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))


def bodies(answer: RemotingCommand) -> list[str]:
    return [bytes(decode_message(r).body).decode() for r in records(answer.body)]  # type: ignore[arg-type]


async def declare(client: RawClient, group: str, expression: str) -> None:
    body = {
        "clientID": "c-" + group,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": TOPIC, "subString": expression, "expressionType": "SQL92", "subVersion": 1}
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }
    beat = await client.call(RawClient.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode()))
    assert beat.code == ResponseCode.SUCCESS


async def check(client: RawClient, expression: str) -> RemotingCommand:
    body = {"clientId": "c", "group": "G", "subscriptionData": {"topic": TOPIC, "subString": expression,
            "expressionType": "SQL92", "subVersion": 1, "classFilterMode": False}}  # fmt: skip
    return await client.call(
        RawClient.request(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())
    )


async def test_a_pull_carrying_its_expression(served: tuple[RawClient, bool]) -> None:
    client, on = served
    empty = await pull(client, "")
    assert (empty.code, empty.remark) == (
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )
    good = await pull(client, "a > 2 AND TAGS = 'TagB'")
    bad = await pull(client, "a >")
    if not on:
        assert (good.code, good.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
        assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
        return
    assert (good.code, bodies(good)) == (ResponseCode.SUCCESS, ["m3", "m5"])
    assert good.ext_fields["nextBeginOffset"] == "6"
    assert (bad.code, bodies(bad)) == (ResponseCode.SUCCESS, ["m0", "m1", "m2", "m3", "m4", "m5"])
    none = await pull(client, "a > 5")
    assert (none.code, none.remark, none.body) == (
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        "NO_MATCHED_MESSAGE",
        None,
    )
    assert none.ext_fields["nextBeginOffset"] == "6"


async def test_a_pull_relying_on_the_heartbeat(served: tuple[RawClient, bool]) -> None:
    client, on = served
    await declare(client, "Good", "a IN ('1', '4') OR a IS NULL")
    await declare(client, "Bad", "a > 'x'")
    good = await pull(client, None, carried=False, group="Good")
    bad = await pull(client, None, carried=False, group="Bad")
    not_exist = "The broker's consumer filter data is not exist!Your expression may be wrong!"
    assert (bad.code, bad.remark) == (ResponseCode.FILTER_DATA_NOT_EXIST, not_exist)
    if on:
        assert (good.code, bodies(good)) == (ResponseCode.SUCCESS, ["m1", "m4"])
    else:
        assert (good.code, good.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)


async def test_check_client_config(served: tuple[RawClient, bool]) -> None:
    client, on = served
    good, bad = await check(client, "a > 1"), await check(client, "a >")
    if not on:
        assert (good.code, good.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
        assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, REFUSED)
        return
    assert good.code == ResponseCode.SUCCESS
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert bad.remark  # the compiler's message


@pytest.mark.parametrize("served", [True], indirect=True, ids=["filter-on"])
async def test_records_filtered_per_pull_are_bounded(
    served: tuple[RawClient, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = served
    monkeypatch.setattr(get_message_module, "RECORD_FILTER_BUDGET", 4)
    answer = await pull(client, "a > 5")
    assert (answer.code, answer.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert answer.ext_fields["nextBeginOffset"] == "4"  # stopped after 4 refusals, not at the end
