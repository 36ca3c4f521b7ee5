"""The HTTP API over the Java-written store, checked against what the real 4.9.7 store answered.

Expected values come from ``java-4.9.7-a.expected.json`` (messages, key queries) and
``.cq-expected.json`` (topic stats, every consume-queue entry), both recorded from the real broker's
store code; the server under test is on 127.0.0.1 with port 0 for each port.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clients.testkit.jsonl_store import make_store
from server.app import QueryServer
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import StartServer
from tests.support.http_csrf import csrf_headers
from tests.support.java_store import JAVA_STORE, settings_for


@pytest.fixture(scope="module")
def cq_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / f"{JAVA_STORE}.cq-expected.json").read_text(encoding="utf-8"))


def queue_entries(cq_expected: dict[str, Any], topic: str) -> dict[int, list[list[Any]]]:
    """queue id -> [queueOffset, commitLogOffset, size, storeTimestamp, rawSha256] of every entry."""
    for t in cq_expected["topics"]:
        if t["topic"] == topic:
            return {q["queueId"]: [m for step in q["walk"] for m in step["messages"]] for q in t["queues"]}
    raise AssertionError(topic)


@pytest.fixture
async def http(start_server: StartServer) -> AsyncIterator[tuple[QueryServer, aiohttp.ClientSession]]:
    server = await start_server(http_port=0)
    async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
        yield server, session


async def get_json(session: aiohttp.ClientSession, path: str, status: int = 200) -> Any:
    async with session.get(path) as response:
        body = await response.json()
        assert response.status == status, body
        return body


async def test_topics_match_the_brokers_topic_stats(http: Any, cq_expected: dict[str, Any]) -> None:
    _, session = http
    body = await get_json(session, "/api/topics")
    got = {t["topic"]: t["queues"] for t in body["topics"]}
    for topic, rows in cq_expected["topicStats"].items():
        assert [
            (q["queueId"], q["minOffset"], q["maxOffset"], q["lastStoreTimestamp"]) for q in got[topic]
        ] == [(r["queueId"], r["minOffset"], r["maxOffset"], r["lastUpdateTimestamp"]) for r in rows]
    one = await get_json(session, "/api/topics/TopicB")
    assert one["queues"] == got["TopicB"]


async def test_the_brokers_own_topics_are_marked_system(tmp_path: Path) -> None:
    """``make-store`` writes the topics a 4.9.7 broker makes at its first start into topics.json: those
    (with the cluster's and broker's names) and the trace topic are ``system``; the user's are not."""
    lines = [{"topic": "Orders", "body": "x"}, {"topic": "RMQ_SYS_TRACE_TOPIC", "body": "t"},
             {"topic": "%RETRY%g1", "body": "r"}]  # fmt: skip
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=1024 * 1024)
    make_store(config, spec)
    store = MessageStore.open(config)
    server = QueryServer(store, settings_for(store.config, http_port=0))
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            marks = {t["topic"]: t["system"] for t in (await get_json(session, "/api/topics"))["topics"]}
    finally:
        await server.stop()
        store.close()
    cluster, broker = config.broker_cluster_name, config.broker_name
    system = {"SELF_TEST_TOPIC", "TBW102", "BenchmarkTest", cluster, broker, "OFFSET_MOVED_EVENT",
              "SCHEDULE_TOPIC_XXXX", f"{cluster}_REPLY_TOPIC", "RMQ_SYS_TRACE_TOPIC"}  # fmt: skip
    assert marks == {**{t: True for t in system}, "Orders": False, "%RETRY%g1": False}


async def test_message_by_offset_id_and_its_body(http: Any, java_expected: dict[str, Any]) -> None:
    _, session = http
    for m in java_expected["messages"][::497]:
        body = await get_json(session, f"/api/messages/{m['offsetMsgId']}")
        assert body["matchedAs"] == "offsetMsgId"
        mine = [r for r in body["messages"] if r["commitLogOffset"] == m["commitLogOffset"]]
        assert len(mine) == 1, m
        r = mine[0]
        assert (r["topic"], r["queueId"], r["storeTimestamp"], r["storeSize"]) == (
            m["topic"],
            m["queueId"],
            m["storeTimestamp"],
            m["size"],
        )
        assert r["uniqueKey"] == m["uniqKey"]
        async with session.get(f"/api/messages/{m['offsetMsgId']}/body") as response:
            assert response.status == 200
            assert hashlib.sha256(await response.read()).hexdigest() == m["bodySha256"]


async def test_message_by_unique_key_finds_every_copy(http: Any, java_expected: dict[str, Any]) -> None:
    _, session = http
    indexed = [m for m in java_expected["messages"] if m["uniqKey"] and "not indexed" not in m["note"]]
    for m in indexed[::613]:
        copies = {
            c["commitLogOffset"]
            for c in java_expected["messages"]
            if c["uniqKey"] == m["uniqKey"] and "not indexed" not in c["note"]
        }
        body = await get_json(session, f"/api/messages/{m['uniqKey']}")
        assert body["matchedAs"] == "uniqueKey"
        assert {r["commitLogOffset"] for r in body["messages"]} == copies


async def test_topic_and_key_match_the_stores_key_queries(http: Any, java_expected: dict[str, Any]) -> None:
    _, session = http
    done = 0
    for q in java_expected["queries"]:
        if q["maxNum"] > 64 or q["count"] >= q["maxNum"] or q["begin"] < 0 or q["end"] < q["begin"]:
            continue  # capped answers depend on which entries the walk reached first
        key = q["key"]
        wanted = sorted(
            r["commitLogOffset"]
            for r in q["results"]
            if r["topic"] == q["topic"] and (key in (r["keys"] or "").split(" ") or r["uniqKey"] == key)
        )
        params = {"key": key, "begin": str(q["begin"]), "end": str(q["end"]), "limit": str(q["maxNum"])}
        async with session.get(f"/api/topics/{q['topic']}/messages", params=params) as response:
            body = await response.json()
        assert sorted(r["commitLogOffset"] for r in body["messages"]) == wanted, q["label"]
        done += 1
        if done >= 40:
            break
    assert done >= 10


async def test_time_range_pages_return_every_entry_once(http: Any, cq_expected: dict[str, Any]) -> None:
    _, session = http
    entries = queue_entries(cq_expected, "topic_c-1")
    times = sorted(e[3] for es in entries.values() for e in es)
    begin, end = times[len(times) // 4], times[3 * len(times) // 4]
    wanted = sorted((q, e[0]) for q, es in entries.items() for e in es if begin <= e[3] <= end)
    got: list[tuple[int, int]] = []
    cursor = ""
    pages = 0
    while True:
        params = {"begin": str(begin), "end": str(end), "limit": "37", "cursor": cursor}
        body = await get_json(session, f"/api/topics/topic_c-1/messages?{_query(params)}")
        assert len(body["messages"]) <= 37
        got += [(r["queueId"], r["queueOffset"]) for r in body["messages"]]
        pages += 1
        if body["nextCursor"] is None:
            break
        cursor = body["nextCursor"]
        assert pages < 100
    assert sorted(got) == wanted
    assert len(got) == len(set(got))
    assert pages >= 2


def _query(params: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


async def test_queue_and_offset(http: Any, cq_expected: dict[str, Any]) -> None:
    _, session = http
    entries = queue_entries(cq_expected, "TopicA")[2]
    body = await get_json(session, "/api/topics/TopicA/queues/2/messages?offset=10&count=5")
    assert [(r["queueOffset"], r["commitLogOffset"]) for r in body["messages"]] == [
        (e[0], e[1]) for e in entries[10:15]
    ]


async def test_exports_carry_the_same_rows(http: Any) -> None:
    _, session = http
    path = "/api/topics/TopicA/queues/1/messages?offset=0&count=20"
    as_json = await get_json(session, path)
    async with session.get(path + "&format=jsonl") as response:
        assert response.headers["Content-Type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in (await response.text()).splitlines()]
    async with session.get(path + "&format=csv") as response:
        assert response.headers["Content-Disposition"].endswith('.csv"')
        rows = list(csv.DictReader(io.StringIO(await response.text())))
    assert lines == as_json["messages"]
    assert [int(r["commitLogOffset"]) for r in rows] == [m["commitLogOffset"] for m in as_json["messages"]]
    assert len(rows) == 20


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/topics/TopicA/messages?begin=0&end=10&limit=0", "limit"),
        ("/api/topics/TopicA/messages?begin=0&end=10&limit=x", "limit"),
        ("/api/topics/TopicA/messages?end=10", "begin"),
        ("/api/topics/TopicA/messages?begin=0", "end"),
        ("/api/topics/TopicA/messages?begin=yesterday&end=1", "begin"),
        # int() refuses thousands of digits, and takes digits other than ASCII: both were a 500
        ("/api/topics/TopicA/messages?begin=0&end=" + "9" * 5000, "end"),
        ("/api/topics/TopicA/messages?begin=%C2%B2&end=1", "begin"),
        ("/api/topics/TopicA/messages?begin=0&end=10&cursor=abc", "cursor"),
        ("/api/topics/TopicA/messages?begin=0&end=10&format=xml", "format"),
        ("/api/topics/TopicA/queues/x/messages?offset=0", "queueId"),
        ("/api/topics/TopicA/queues/0/messages", "offset"),
        ("/api/topics/TopicA/queues/0/messages?offset=0&count=1000", "count"),
        ("/api/groups/g/dlq?limit=100000", "limit"),
        ("/api/topics/TopicA/histogram?buckets=0", "buckets"),
        ("/api/topics/TopicA/histogram?begin=10&end=1", "begin"),
        ("/api/topics?limit=0", "limit"),
        ("/api/groups?limit=x", "limit"),
    ],
)
async def test_bad_parameters_are_400_naming_the_parameter(http: Any, path: str, parameter: str) -> None:
    _, session = http
    body = await get_json(session, path, 400)
    assert body["error"] == "bad_request"
    assert body["parameter"] == parameter


@pytest.mark.parametrize(
    "path",
    [
        "/api/topics/NoSuchTopic",
        "/api/topics/NoSuchTopic/messages?begin=0&end=1",
        "/api/topics/NoSuchTopic/histogram",
        "/api/topics/TopicA/queues/99/messages?offset=0",
        "/api/topics/TopicA/queues/0/messages?offset=100000",
        "/api/messages/7F00000100002A9F00000000FFFFFFFF",
        "/api/messages/no-such-unique-key",
        "/api/messages/no-such-unique-key/trace",
        "/api/groups/nobody",
        "/api/groups/nobody/dlq",
        "/api/no/such/route",
    ],
)
async def test_nothing_found_is_404(http: Any, path: str) -> None:
    _, session = http
    body = await get_json(session, path, 404)
    assert body["error"] == "not_found"
    assert body["message"]


async def test_a_key_nobody_has_is_an_empty_result_not_an_error(http: Any) -> None:
    _, session = http
    body = await get_json(session, "/api/topics/TopicA/messages?key=never-written")
    assert body["messages"] == []
    assert body["found"] == 0


async def test_openapi_describes_exactly_the_routes_served(http: Any) -> None:
    server, session = http
    doc = await get_json(session, "/openapi.json")
    assert doc["openapi"].startswith("3.")
    router = server.http_app.app.router
    served = {r.canonical for r in router.resources()}
    assert set(doc["paths"]) == served
    assert {"/api/topics/{topic}/histogram", "/static/{name}", "/api/messages/{id}/resend"} <= served
    methods = {(r.resource.canonical, r.method.lower()) for r in router.routes() if r.method != "HEAD"}
    assert {(path, m) for path, item in doc["paths"].items() for m in item} == methods
    assert ("/api/messages/{id}/resend", "post") in methods
    buckets = doc["paths"]["/api/topics/{topic}/histogram"]["get"]["parameters"]
    assert {p["name"] for p in buckets} == {"topic", "begin", "end", "buckets"}
    for path, item in doc["paths"].items():
        for operation in item.values():
            declared = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
            assert declared == {part[1:-1] for part in path.split("/") if part.startswith("{")}, path


async def test_the_page_and_its_files(http: Any) -> None:
    _, session = http
    async with session.get("/") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/html")
        page = await response.text()
    assert '<script src="/static/app.js">' in page
    assert 'href="/static/app.css"' in page
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        async with session.get(f"/static/{name}") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith(kind)
    for name in ("nope.js", "..%2Fapp.py", "__init__.py", ".hidden.js"):
        async with session.get(f"/static/{name}") as response:
            assert response.status == 404, name


async def test_histogram_counts_every_entry_by_minute(http: Any, cq_expected: dict[str, Any]) -> None:
    _, session = http
    for topic in ("TopicA", "topic_c-1"):
        times = [e[3] for es in queue_entries(cq_expected, topic).values() for e in es]
        body = await get_json(session, f"/api/topics/{topic}/histogram")
        first_minute = min(times) // 60_000 * 60_000
        assert (body["begin"], body["bucketMillis"]) == (first_minute, 60_000)
        wanted: dict[int, int] = {}
        for t in times:
            wanted[t // 60_000 * 60_000] = wanted.get(t // 60_000 * 60_000, 0) + 1
        got = {body["begin"] + i * 60_000: c for i, c in enumerate(body["counts"]) if c}
        assert got == wanted
        assert body["total"] == len(times)
    # a range that holds nothing of the topic counts nothing, in one bucket per minute asked
    body = await get_json(session, "/api/topics/TopicA/histogram?begin=60000&end=179999")
    assert (body["begin"], body["end"], body["counts"]) == (60_000, 179_999, [0, 0])


async def test_topics_and_groups_page_by_name(http: Any, cq_expected: dict[str, Any]) -> None:
    _, session = http
    every = (await get_json(session, "/api/topics"))["topics"]
    assert {"TopicA", "TopicB", "topic_c-1"} <= {t["topic"] for t in every}
    seen: list[str] = []
    after = ""
    for _ in range(len(every)):
        body = await get_json(session, f"/api/topics?limit=2&after={after}")
        assert len(body["topics"]) <= 2
        seen += [t["topic"] for t in body["topics"]]
        after = body["nextAfter"]
        if after is None:
            break
    assert seen == sorted(t["topic"] for t in every)
    groups = await get_json(session, "/api/groups?limit=1")
    assert groups["groups"] == [] and groups["nextAfter"] is None


async def test_resend_on_a_read_only_server_is_405(http: Any, java_expected: dict[str, Any]) -> None:
    _, session = http
    msg_id = java_expected["messages"][0]["offsetMsgId"]
    token = await csrf_headers(session)
    async with session.post(f"/api/messages/{msg_id}/resend", json={}, headers=token) as response:
        body = await response.json()
        assert (response.status, body["error"]) == (405, "read_only")
        assert "--writable" in body["message"]
    async with session.get(f"/api/messages/{msg_id}/resend") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "POST"
        assert (await response.json())["error"] == "method_not_allowed"


async def test_a_cursor_before_the_range_does_not_walk_the_queue(
    http: Any, cq_expected: dict[str, Any]
) -> None:
    """A page costs ``limit`` records whatever cursor it is given: ``0:0`` with a ``begin`` late in
    the queue starts where the range does, as the first page does, not at the queue's start."""
    server, session = http
    entries = queue_entries(cq_expected, "TopicA")[0]
    begin = entries[-3][3]
    reads: list[int] = []
    store = server.store
    real = store.get_message

    def counting(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        reads.append(len(result.buffers))
        return result

    store.get_message = counting  # type: ignore[method-assign]
    try:
        first = await get_json(session, f"/api/topics/TopicA/messages?begin={begin}&end={begin}&limit=5")
        from_zero = await get_json(
            session, f"/api/topics/TopicA/messages?begin={begin}&end={begin}&limit=5&cursor=0:0"
        )
    finally:
        del store.get_message
    assert from_zero["messages"] == first["messages"]
    assert len(entries) > 100 and sum(reads) < 40, reads
