"""SQL92 filtering, ours against the real 4.9.7 broker (``enablePropertyFilter=true``), request for
request: the same messages sent to each, then for every expression below the same pulls and checks.

The expected answers are the real broker's, not ours: for each expression, CHECK_CLIENT_CONFIG's
code, and a pull carrying the expression (queue 0 from offset 0, room for all): its code and the
bodies it returned. The messages carry property values chosen at the edges of Java's rules (a
decimal against an ``Integer`` literal, a value past ``Integer``'s range, blanks, ``NaN``, a hex
double, a ``d`` suffix, a non-ASCII digit, ``true``, an empty property set), and the expressions
cover each operator, null handling, precedence, system properties, and expressions that do not
compile (which a carried pull does not refuse).

Not here: a ``--`` comment, which needs a line break, and the broker's fastjson reads a JSON body
string holding an escape (``\n``) with its opening quote (CHECK_CLIENT_CONFIG then fails to lex
``"``), a body quirk outside the selector; the unit tests cover such comments.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from protocol.message_properties import properties_to_string
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient
from tests.support.pulls import pull_fields, records
from tests.support.real_broker import copy_rmq, needs_java, real_broker

TOPIC = "SqlGolden"

#: body -> user properties (besides TAGS, KEYS and the client's own).
MESSAGES: dict[str, dict[str, str]] = {
    "m0": {"a": "10", "b": "x"},
    "m1": {"a": "3", "b": "y"},
    "m2": {"a": "5.5"},
    "m3": {"a": "abc", "b": "x"},
    "m4": {"a": "3000000000"},
    "m5": {},
    "m6": {"a": "-3", "b": " x"},
    "m7": {"a": "true"},
    "m8": {"a": " 7 ", "b": "x"},
    "m9": {"a": "NaN"},
    "m10": {"a": "Infinity"},
    "m11": {"a": "05", "c": "it's"},
    "m12": {"a": "1e1"},
    "m13": {"a": "0x1p4"},
    "m14": {"a": "1_000"},
    "m15": {"a": "+5"},
    "m16": {"a": "5d"},
    "m17": {"a": "\u0665"},
    "m18": {"a": "5", "b": "5"},
}

EXPRESSIONS = [
    "a > 5", "a >= 5", "a < 5", "a <= 5", "a = 5", "a <> 5", "a > 5.0", "a = 5.0", "a < 5.5",
    "a = 10", "a = '10'", "a > -5", "a < -5", "a > 3000000000", "a > 1.5E0", "a >= 1e1",
    "a BETWEEN 1 AND 10", "a NOT BETWEEN 1 AND 10", "a BETWEEN -5 AND 5.5",
    "a IN ('10', 'abc', 'true')", "a NOT IN ('10', 'abc')", "a IS NULL", "a IS NOT NULL",
    "b = 'x'", "b <> 'x'", "b IS NULL AND a IS NOT NULL",
    "a > 5 OR b = 'x'", "b = 'x' OR a > 5", "a > 5 AND b = 'x'", "b = 'x' AND a > 5",
    "NOT (a > 5)", "NOT (b = 'x')", "a = TRUE", "a = FALSE", "a", "NOT a", "TRUE", "FALSE",
    "a > b", "a = b", "b < a",
    "TAGS = 'TagA'", "TAGS IN ('TagB')", "KEYS IS NOT NULL", "c = 'it''s'",
    "a = 1 OR b = 'y' AND a = 3", "(a = 10 OR b = 'y') AND a = 3",
    "a > 5 b c", "a > 5 - - x", "a /* here */ > 5", "A > 5", "a > 5L",
    # do not compile
    "a >", "a > 'x'", "NOT a > 5", "a = NULL", "5", "a BETWEEN 5 AND 1", "a IN (1)", "a > 0.0",
    "a > 5 #", "TRUE = 1", "a > 5 NOT",
]  # fmt: skip

pytestmark = [needs_java, pytest.mark.skipif(shutil.which("java") is None, reason="needs java")]


def send_request(body: str, queue_id: int, index: int) -> object:
    props = {
        **MESSAGES[body],
        "TAGS": "TagA" if index % 2 == 0 else "TagB",
        "KEYS": f"k{index}",
        "WAIT": "true",
    }
    fields = {"a": "sqlp", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "1",
              "h": "0", "i": properties_to_string(props), "j": "0", "k": "false", "m": "false"}  # fmt: skip
    return RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, body.encode())


async def observe(client: RawClient) -> dict[str, object]:
    """Send the messages, then ask about every expression: what each side answers."""
    for index, body in enumerate(MESSAGES):
        sent = await client.call(send_request(body, 0, index))  # type: ignore[arg-type]
        assert sent.code == ResponseCode.SUCCESS, sent.remark
    # the broker's reput is asynchronous: wait until the queue holds them all
    for _ in range(100):
        top = await client.call(
            RawClient.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
        )
        if top.ext_fields and top.ext_fields.get("offset") == str(len(MESSAGES)):
            break
        await asyncio.sleep(0.05)
    seen: dict[str, object] = {}
    for expression in EXPRESSIONS:
        check_body = {"clientId": "c", "group": "SqlG", "subscriptionData": {
            "topic": TOPIC, "subString": expression, "expressionType": "SQL92", "subVersion": 1,
            "classFilterMode": False, "tagsSet": [], "codeSet": []}}  # fmt: skip
        checked = await client.call(
            RawClient.request(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(check_body).encode())
        )
        fields = pull_fields(TOPIC, 0, 0, 64)
        fields.update(consumerGroup="SqlG", expressionType="SQL92", subscription=expression)
        pulled = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))
        got = sorted(bytes(decode_message(r).body).decode() for r in records(pulled.body))  # type: ignore[arg-type]
        seen[expression] = {"check": checked.code, "pull": pulled.code, "got": got}
    return seen


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_rmq(tmp_path_factory.mktemp("sql-real"))


async def ours(tmp_path: Path) -> dict[str, object]:
    store = WritableStore(StoreConfig.for_store(tmp_path / "ours" / "store", broker_name="b1"))
    srv = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store))
    await srv.start()
    try:
        client = await RawClient.connect("127.0.0.1", srv.port)
        try:
            return await observe(client)
        finally:
            await client.close()
    finally:
        await srv.stop()
        store.close()


async def theirs(rmq: Path, tmp_path: Path) -> dict[str, object]:
    store = tmp_path / "theirs" / "store"
    store.mkdir(parents=True)
    (store.parent / "broker.conf").write_text("enablePropertyFilter=true\n")
    with real_broker(rmq, store) as broker:
        client = await RawClient.connect("127.0.0.1", broker.port)
        try:
            return await observe(client)
        finally:
            await client.close()


async def test_sql_filter_answers_as_the_real_broker(rmq: Path, tmp_path: Path) -> None:
    expected = await theirs(rmq, tmp_path)
    got = await ours(tmp_path)
    differ = {e: {"real": expected[e], "ours": got[e]} for e in EXPRESSIONS if expected[e] != got[e]}
    assert differ == {}
