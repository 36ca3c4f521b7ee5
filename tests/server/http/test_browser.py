"""The lookup page in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Playwright's async API runs on the test's own event loop, the loop the server under test serves on,
so the page's requests are answered while the test awaits the browser. The browser is Debian's
(``executable_path``); Playwright's own browser downloads are never used. ``.ci/run`` installs
``chromium`` when it is missing; without it (or without the ``playwright`` package) these tests skip
and say why, like the tests that need a JDK.

Two stores: one made here from JSON lines (``make_store``), whose every expected value is the spec
below (minutes, keys, copies, traces, committed offsets); and the copy of the Java-written store,
checked against what the real 4.9.7 broker recorded (``java_expected``, ``.cq-expected.json``).
Every wait is bounded (Playwright's timeouts, 5 s for a step); the browser and Playwright's driver
are stopped when each test ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clients.testkit.jsonl_store import make_store
from server.app import QueryServer
from server.http.app import HTTP_API
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.java_store import JAVA_STORE, open_java_store, settings_for

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # pragma: no cover - the test extras install it
    async_playwright = None  # type: ignore[assignment]

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(
    async_playwright is None or CHROMIUM is None,
    reason="needs the playwright package and Debian's chromium (.ci/run installs both)",
)

#: Bound of every single wait on the page.
STEP_MS = 5000
#: Where the README's screenshots go when RMQ_SCREENSHOTS=1 (else a temporary directory).
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"

# -- the made store ------------------------------------------------------------------------------

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
#: Messages of topic Orders stored in each minute from T0 (a gap at minute 2).
PER_MINUTE = (10, 20, 0, 15, 25)
GROUP = "orders-consumer"
#: The group's committed offsets of Orders, per queue.
COMMITTED = {0: 20, 1: 30}
TRACED = 7  # the order that has a trace, a retry copy and a dead-letter copy


def unique_key(n: int) -> str:
    """32 hex digits, like a 4.x client's msgId, so an id search must tell it from an offset id."""
    return f"C0A8000100002A9F{n:016X}"


@dataclass
class Order:
    n: int
    queue_id: int
    store_timestamp: int
    key: str
    uniq: str
    body: str


def orders() -> list[Order]:
    out = []
    n = 0
    for minute, count in enumerate(PER_MINUTE):
        for j in range(count):
            body = json.dumps({"order": n, "item": "thé ☕", "qty": j + 1}, ensure_ascii=False)
            out.append(Order(n, n % 2, T0 + minute * MINUTE + j * 1000, f"order-{n}", unique_key(n), body))
            n += 1
    return out


def trace_body(*contexts: list[str]) -> str:
    return "".join("\x01".join(c) + "\x02" for c in contexts)


TRACE_PUB = ["Pub", str(T0 + 7000), "DefaultRegion", "orders-producer", "Orders", unique_key(TRACED),
             "TagB", f"order-{TRACED}", "127.0.0.1:10911", "60", "4", "0", "true"]  # fmt: skip
TRACE_SUB_BEFORE = ["SubBefore", str(T0 + 7050), "DefaultRegion", GROUP, "req-1", unique_key(TRACED), "0",
                    f"order-{TRACED}"]  # fmt: skip
TRACE_SUB_AFTER = ["SubAfter", "req-1", unique_key(TRACED), "35", "false", f"order-{TRACED}", "0",
                   str(T0 + 7085)]  # fmt: skip


def made_store_lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"topic": "Orders", "queue_id": o.queue_id, "store_timestamp": o.store_timestamp, "keys": o.key,
         "tags": "TagA" if o.n % 2 == 0 else "TagB", "unique_key": o.uniq, "body": o.body}
        for o in orders()
    ]  # fmt: skip
    end = T0 + len(PER_MINUTE) * MINUTE
    traced = orders()[TRACED]
    lines += [
        {"topic": "RMQ_SYS_TRACE_TOPIC", "store_timestamp": end + 1000, "keys": [traced.uniq, traced.key],
         "body": trace_body(TRACE_PUB)},
        {"topic": "RMQ_SYS_TRACE_TOPIC", "store_timestamp": end + 2000, "keys": [traced.uniq, traced.key],
         "body": trace_body(TRACE_SUB_BEFORE, TRACE_SUB_AFTER)},
        {"topic": f"%RETRY%{GROUP}", "store_timestamp": end + 3000, "unique_key": traced.uniq,
         "reconsume_times": 1, "body": traced.body},
        {"topic": f"%DLQ%{GROUP}", "store_timestamp": end + 4000, "unique_key": traced.uniq,
         "reconsume_times": 16, "body": traced.body},
    ]  # fmt: skip
    return lines


@pytest.fixture(scope="module")
def made_store(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    root = tmp_path_factory.mktemp("web-store")
    spec = root / "messages.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in made_store_lines()), encoding="utf-8")
    config = StoreConfig.for_store(root / "store", mapped_file_size_commit_log=1024 * 1024)
    make_store(config, spec)
    offsets = {"offsetTable": {f"Orders@{GROUP}": {str(q): o for q, o in COMMITTED.items()}}}
    (root / "store" / "config" / "consumerOffset.json").write_text(json.dumps(offsets), encoding="utf-8")
    return config


# -- the browser and the servers -----------------------------------------------------------------


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=15_000)
        try:
            yield launched
        finally:
            await launched.close()


async def serve(store: MessageStore) -> QueryServer:
    server = QueryServer(store, settings_for(store.config, http_port=0))
    await server.start()
    return server


@pytest.fixture
async def made(made_store: StoreConfig, browser: Browser) -> AsyncIterator[Page]:
    """The page over the made store, opened."""
    store = MessageStore.open(made_store)
    server = await serve(store)
    try:
        page = await open_page(browser, server)
        yield page
    finally:
        await server.stop()
        store.close()


@pytest.fixture
async def java(java_store_dir: Path, tmp_path: Path, browser: Browser) -> AsyncIterator[Page]:
    """The page over a copy of the Java-written store."""
    shutil.copytree(java_store_dir, tmp_path / JAVA_STORE)
    shutil.copy(java_store_dir.parent / f"{JAVA_STORE}.broker.conf", tmp_path)
    store = open_java_store(tmp_path / JAVA_STORE)
    server = await serve(store)
    try:
        yield await open_page(browser, server)
    finally:
        await server.stop()
        store.close()


async def open_page(browser: Browser, server: QueryServer) -> Page:
    page = await browser.new_page(viewport={"width": 1200, "height": 800})
    page.set_default_timeout(STEP_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    await page.goto(server.http_url)
    await expect(page.locator("body[data-ready=true]")).to_have_count(1)
    return page


async def search(page: Page, text: str) -> None:
    await page.fill("#q", text)
    await page.click("#search-button")


async def result_column(page: Page, column: int) -> list[str]:
    await expect(page.locator("#results")).to_be_visible()
    return await page.locator(f"#result-table tbody tr td:nth-child({column})").all_inner_texts()


async def field(page: Page, name: str) -> str:
    header = page.locator("th", has_text=re.compile("^" + re.escape(name)))
    return await page.locator("#message-fields tr", has=header).locator("td").inner_text()


async def shoot(page: Page, name: str, tmp_path: Path) -> None:
    target = DOCS if os.environ.get("RMQ_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(target / f"{name}.png"))
    assert (target / f"{name}.png").stat().st_size > 5000


# -- the made store ------------------------------------------------------------------------------


async def test_key_search_opens_the_message_its_body_and_its_trace(made: Page, tmp_path: Path) -> None:
    page = made
    traced = orders()[TRACED]
    await search(page, f"Orders {traced.key}")
    assert await result_column(page, 6) == [traced.key]
    await page.locator("#result-table tbody tr").first.click()
    await expect(page.locator("#message")).to_be_visible()
    assert await field(page, "Unique key") == traced.uniq
    assert await field(page, "Queue offset") == str(traced.n // 2)
    assert (await field(page, "Stored (UTC)")).startswith("2026-01-01 00:00:07.000")
    await expect(page.locator("#body")).to_have_text(traced.body)
    await page.select_option("#body-view", "json")
    assert json.loads(await page.locator("#body").inner_text()) == json.loads(traced.body)
    assert "\n  " in await page.locator("#body").inner_text()  # pretty-printed
    await page.select_option("#body-view", "hex")
    first_line = traced.body.encode()[:16].hex(" ")
    await expect(page.locator("#body")).to_contain_text("00000000  " + first_line)
    await page.select_option("#body-view", "text")
    await page.select_option("#body-charset", "iso-8859-1")
    await expect(page.locator("#body")).to_contain_text("thÃ©")  # the UTF-8 bytes read as Latin-1
    href = await page.get_attribute("#body-download", "href")
    assert href == "/api/messages/" + await field(page, "Offset message id") + "/body"
    events = page.locator("#trace li")
    await expect(events).to_have_count(3)
    assert await events.evaluate_all("items => items.map(i => i.dataset.type)") == [
        "Pub",
        "SubBefore",
        "SubAfter",
    ]
    await expect(events.nth(0)).to_contain_text("producer orders-producer")
    await expect(events.nth(1)).to_contain_text("+50 ms")
    await expect(events.nth(2)).to_contain_text("took 35 ms, FAILED")
    await expect(events.nth(2)).to_have_class("event failed")
    await shoot(page, "message", tmp_path)
    assert page.errors == []  # type: ignore[attr-defined]


async def test_unique_key_and_offset_id_find_every_copy(made: Page) -> None:
    page = made
    traced = orders()[TRACED]
    await search(page, traced.uniq)
    await expect(page.locator("#result-summary")).to_contain_text("Found by unique key: 3 records")
    assert await result_column(page, 2) == ["Orders", f"%RETRY%{GROUP}", f"%DLQ%{GROUP}"]
    offset_id = await field(page, "Offset message id")
    assert await field(page, "Topic") == "Orders"
    # the offset id of the DLQ copy names that record, and the copies come along
    await page.locator("#result-table tbody tr").nth(2).click()
    dlq_id = await field(page, "Offset message id")
    assert dlq_id != offset_id
    assert await field(page, "Reconsume times") == "16"
    await search(page, dlq_id)
    await expect(page.locator("#result-summary")).to_contain_text("Found by offset message id: 3 records")
    assert await field(page, "Topic") == f"%DLQ%{GROUP}"
    # an order without a trace says so
    await search(page, unique_key(3))
    await expect(page.locator("#trace")).to_contain_text("No trace of this message")


async def test_chart_and_paging_through_a_topic(made: Page, tmp_path: Path) -> None:
    page = made
    await page.click("#tab-topics")
    await expect(page.locator("#chart-topic")).to_have_text("Orders")
    bars = page.locator("#chart rect.bar")
    await expect(bars).to_have_count(len(PER_MINUTE))
    counts = await bars.evaluate_all("rs => rs.map(r => [Number(r.dataset.start), Number(r.dataset.count)])")
    assert counts == [[T0 + i * MINUTE, c] for i, c in enumerate(PER_MINUTE)]
    await expect(page.locator("#chart-unit")).to_have_text("per minute")
    row = page.locator("#topic-table tbody tr[data-topic=Orders] td")
    await expect(row.nth(2)).to_have_text(str(sum(PER_MINUTE)))
    await shoot(page, "topics", tmp_path)

    await page.click("#chart-browse")
    seen: list[tuple[str, str]] = []
    sizes = []
    for _ in range(5):
        await expect(page.locator("#page-number")).to_have_text(f"page {len(sizes) + 1}")
        queues = await result_column(page, 3)
        offsets = await result_column(page, 4)
        sizes.append(len(queues))
        seen += zip(queues, offsets, strict=True)
        if await page.locator("#next-page").is_disabled():
            break
        await page.click("#next-page")
    assert sizes == [50, sum(PER_MINUTE) - 50]
    wanted = [(str(o.queue_id), str(o.n // 2)) for o in orders()]
    assert sorted(seen) == sorted(wanted)
    await page.click("#prev-page")
    await expect(page.locator("#page-number")).to_have_text("page 1")
    await expect(page.locator("#result-table tbody tr")).to_have_count(50)
    assert await page.get_attribute("#export-csv", "href") is not None

    # a click on a bar lists that minute's messages (a time-range search)
    await page.click("#tab-topics")
    await page.locator("#chart rect.bar").nth(3).click()
    await expect(page.locator("#result-table tbody tr")).to_have_count(PER_MINUTE[3])
    assert {t[:16] for t in await result_column(page, 1)} == {"2026-01-01 00:03"}


async def test_time_range_search_in_utc(made: Page) -> None:
    page = made
    await search(page, "Orders 2026-01-01T00:01..2026-01-01T00:01:59.999")
    await expect(page.locator("#result-table tbody tr")).to_have_count(PER_MINUTE[1])
    assert {t[:16] for t in await result_column(page, 1)} == {"2026-01-01 00:01"}
    # the same minute in another zone's clock
    await search(page, "Orders 2026-01-01T08:01+08:00..2026-01-01T08:01:59.999+08:00")
    await expect(page.locator("#result-summary")).to_contain_text(
        f"{PER_MINUTE[1]} messages of Orders stored"
    )
    # a key within a range that holds it, then one that does not
    await search(page, "Orders order-12 2026-01-01..2026-01-01")
    assert await result_column(page, 6) == ["order-12"]
    await search(page, "Orders order-12 2026-01-02..2026-01-03")
    await expect(page.locator("#nothing")).to_be_visible()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("order-7", "No message has the offset id or unique key"),
        ("C0A8000100002A9F00000000000000FF", "No message has the offset id or unique key"),
        ("Orders no-such-key", "has the key or unique key"),
        ("NoSuchTopic order-7", "There is no topic"),
        ("Orders 2025-01-01..2025-01-02", "No message of topic Orders was stored in that time range"),
    ],
)
async def test_nothing_found_is_said(made: Page, tmp_path: Path, text: str, says: str) -> None:
    page = made
    await search(page, text)
    await expect(page.locator("#nothing")).to_be_visible()
    await expect(page.locator("#nothing")).to_contain_text("Nothing found")
    await expect(page.locator("#nothing-detail")).to_contain_text(says)
    await expect(page.locator("#results")).to_be_hidden()
    if text == "order-7":
        await shoot(page, "nothing-found", tmp_path)


async def test_groups_show_lag_and_dead_letters(made: Page, tmp_path: Path) -> None:
    page = made
    await page.click("#tab-groups")
    row = page.locator(f"#group-table tbody tr[data-group={GROUP}] td")
    per_queue = {q: sum(1 for o in orders() if o.queue_id == q) for q in (0, 1)}
    lag = sum(per_queue[q] - COMMITTED[q] for q in (0, 1))
    await expect(row.nth(2)).to_have_text(str(lag))
    await row.nth(0).click()
    queues = page.locator("#group-queues tbody tr")
    await expect(queues.nth(0)).to_be_visible()
    cells = await queues.evaluate_all("rs => rs.map(r => Array.from(r.cells, c => c.textContent))")
    assert [c for c in cells if c[1] in ("0", "1")] == [
        ["Orders", str(q), str(per_queue[q]), str(COMMITTED[q]), str(per_queue[q] - COMMITTED[q])]
        for q in (0, 1)
    ]
    await shoot(page, "groups", tmp_path)
    await row.nth(4).locator("button").click()
    await expect(page.locator("#result-summary")).to_contain_text(f"1 dead letter of consumer group {GROUP}")
    assert await result_column(page, 7) == [orders()[TRACED].uniq]


# -- the Java-written store ----------------------------------------------------------------------


async def test_java_store_ids_keys_bodies(java: Page, java_expected: dict[str, Any], tmp_path: Path) -> None:
    page = java
    # a key query's result carries the start of the body as the broker stored it
    m = next(r for q in java_expected["queries"] for r in q.get("results", []) if r.get("bodyHex"))
    await search(page, m["offsetMsgId"])
    await expect(page.locator("#result-summary")).to_contain_text("Found by offset message id")
    assert await field(page, "Topic") == m["topic"]
    assert await field(page, "Queue offset") == str(m["queueOffset"])
    assert await field(page, "CommitLog offset") == str(m["commitLogOffset"])
    assert (await field(page, "Stored (UTC)")).endswith(f"({m['storeTimestamp']})")
    await page.select_option("#body-view", "hex")
    hex_text = await page.locator("#body").inner_text()
    dumped = "".join(line[10:57].replace(" ", "") for line in hex_text.splitlines())
    common = min(len(dumped), len(m["bodyHex"]))
    assert common >= 64 and dumped[:common] == m["bodyHex"][:common]
    await expect(page.locator("#trace")).to_contain_text("No trace of this message")

    # by unique key: every record carrying it, as the broker's store has them
    indexed = [c for c in java_expected["messages"] if c["uniqKey"] and "not indexed" not in c["note"]]
    u = indexed[len(indexed) // 3]
    copies = sorted(c["offsetMsgId"] for c in indexed if c["uniqKey"] == u["uniqKey"])
    await search(page, u["uniqKey"])
    await expect(page.locator("#result-summary")).to_contain_text(f"Found by unique key: {len(copies)}")
    ids = await page.locator("#result-table tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.offsetMsgId)"
    )
    assert sorted(ids) == copies

    # by topic and key: the broker's own key query answer
    q = next(
        q for q in java_expected["queries"]
        if q["maxNum"] <= 64 and 3 <= q.get("count", 0) < q["maxNum"] and q["begin"] == 0
        and " " not in q["key"] and q["key"].strip() == q["key"] and q["key"]
    )  # fmt: skip
    wanted = sorted(
        r["offsetMsgId"]
        for r in q["results"]
        if r["topic"] == q["topic"] and (q["key"] in (r["keys"] or "").split(" ") or r["uniqKey"] == q["key"])
    )
    await search(page, f"{q['topic']} {q['key']}")
    await expect(page.locator("#result-table tbody tr")).to_have_count(len(wanted))
    ids = await page.locator("#result-table tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.offsetMsgId)"
    )
    assert sorted(ids) == wanted
    await shoot(page, "search", tmp_path)
    assert page.errors == []  # type: ignore[attr-defined]


async def test_java_store_chart_paging_and_nothing_found(java: Page, stores_dir: Path) -> None:
    page = java
    cq = json.loads((stores_dir / f"{JAVA_STORE}.cq-expected.json").read_text(encoding="utf-8"))
    entries = {
        t["topic"]: [m for q in t["queues"] for step in q["walk"] for m in step["messages"]]
        for t in cq["topics"]
    }
    busiest = max(entries, key=lambda t: len(entries[t]))
    await page.click("#tab-topics")
    await expect(page.locator("#chart-topic")).to_have_text(busiest)
    bars = page.locator("#chart rect.bar")
    await expect(bars.first).to_be_visible()
    counts = await bars.evaluate_all("rs => rs.map(r => [Number(r.dataset.start), Number(r.dataset.count)])")
    by_minute: dict[int, int] = {}
    for e in entries[busiest]:
        by_minute[e[3] // MINUTE * MINUTE] = by_minute.get(e[3] // MINUTE * MINUTE, 0) + 1
    assert {s: c for s, c in counts if c} == by_minute

    await page.click("#chart-browse")
    total = 0
    for pages in range(1, 100):
        await expect(page.locator("#page-number")).to_have_text(f"page {pages}")
        total += await page.locator("#result-table tbody tr").count()
        if await page.locator("#next-page").is_disabled():
            break
        await page.click("#next-page")
    assert total == len(entries[busiest])
    assert pages == -(-total // 50)

    await search(page, "7F00000100002A9F00000000FFFFFFFF")
    await expect(page.locator("#nothing")).to_be_visible()
    await search(page, f"{busiest} never-written-key")
    await expect(page.locator("#nothing-detail")).to_contain_text("has the key or unique key")


async def test_histogram_buckets_widen_to_whole_minutes(made_store: StoreConfig) -> None:
    """Fewer buckets than minutes: each bucket spans whole minutes, counts add up (no browser)."""
    import aiohttp

    store = MessageStore.open(made_store)
    server = await serve(store)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.http_url}api/topics/Orders/histogram?buckets=2") as response:
                body = await response.json()
            end = T0 + 4 * MINUTE + 24_000
            async with session.get(
                f"{server.http_url}api/topics/Orders/histogram?begin={T0 + MINUTE}&end={end}&buckets=240"
            ) as response:
                narrow = await response.json()
    finally:
        await server.stop()
        store.close()
    assert (body["begin"], body["bucketMillis"], body["end"]) == (T0, 3 * MINUTE, T0 + 6 * MINUTE - 1)
    assert body["counts"] == [sum(PER_MINUTE[:3]), sum(PER_MINUTE[3:])]
    assert narrow["counts"] == list(PER_MINUTE[1:])


# -- access control and the write path -------------------------------------------------------------

#: An account of plain_acl.yml that may read Orders and nothing else.
ORDERS_ONLY = ("orders-reader", "orders-secret")


async def test_acl_asks_for_an_account_and_says_not_allowed(
    made_store: StoreConfig, browser: Browser
) -> None:
    from server.acl.config import SUB, Account, AclConfig
    from server.app import ServerSettings

    acl = AclConfig(accounts={ORDERS_ONLY[0]: Account(*ORDERS_ONLY, resource_perms={"Orders": SUB})})
    store = MessageStore.open(made_store)
    server = QueryServer(store, ServerSettings(port=0, http_port=0, acl=acl))
    await server.start()
    try:
        context = await browser.new_context(
            http_credentials={"username": ORDERS_ONLY[0], "password": ORDERS_ONLY[1]}
        )
        page = await context.new_page()
        page.set_default_timeout(STEP_MS)
        await page.goto(server.http_url)
        await expect(page.locator("body[data-ready=true]")).to_have_count(1)
        traced = orders()[TRACED]
        await search(page, f"Orders {traced.key}")
        assert await result_column(page, 6) == [traced.key]
        await search(page, "RMQ_SYS_TRACE_TOPIC")
        await expect(page.locator("#denied")).to_be_visible()
        await expect(page.locator("#denied-detail")).to_contain_text(
            "no permission to read topic RMQ_SYS_TRACE_TOPIC"
        )
        await expect(page.locator("#results")).to_be_hidden()
        # /metrics names every topic: not for an account limited to one
        response = await page.request.get(server.http_url + "metrics")
        assert response.status == 403
        await context.close()
        # without an account, data requests are challenged: that challenge is what makes a browser
        # ask for the account (headless Chromium would wait on its dialog, so it is asked directly)
        anonymous = await browser.new_context()
        response = await anonymous.request.get(server.http_url + "api/topics/Orders")
        assert response.status == 401
        assert response.headers["www-authenticate"] == 'Basic realm="rmq-query"'
        await anonymous.close()
    finally:
        await server.stop()
        store.close()


async def test_resend_from_the_message_view(
    made_store: StoreConfig, browser: Browser, tmp_path: Path
) -> None:
    from server.app import ServerSettings
    from server.broker.writable_store import WritableStore
    from server.remoting.write_path import write_path

    shutil.copytree(made_store.store_path_root_dir, tmp_path / "store")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=1024 * 1024)
    store = WritableStore(config)
    server = QueryServer(store.reader, ServerSettings(port=0, http_port=0), configure=write_path(store))
    await server.start()
    try:
        page = await open_page(browser, server)
        posts: list[dict[str, str]] = []
        page.on("request", lambda r: posts.append(r.headers) if r.method == "POST" else None)
        traced = orders()[TRACED]
        await search(page, traced.uniq)
        assert await field(page, "Topic") == "Orders"
        await page.click("#resend")
        await expect(page.locator("#resend-status")).to_contain_text("Sent to Orders")
        copy_id = await page.locator("#resend-status").get_attribute("data-offset-msg-id")
        assert copy_id
        # the page sent the server's CSRF token; a token that changed under it (a restarted server)
        # is fetched again once and the resend goes through
        assert server.http_app is not None
        api = server.http_app.app[HTTP_API]
        assert [p["x-rmq-csrf-token"] for p in posts] == [api.csrf.value]
        api.csrf.value = "changed-since-the-page-fetched-it"
        await page.click("#resend")
        await expect(page.locator("#resend-status")).not_to_have_attribute("data-offset-msg-id", copy_id)
        await expect(page.locator("#resend-status")).to_contain_text("Sent to Orders")
        tokens = [p.get("x-rmq-csrf-token") for p in posts[1:]]
        assert tokens == [posts[0]["x-rmq-csrf-token"], api.csrf.value]
        await search(page, copy_id)
        await expect(page.locator("#result-summary")).to_contain_text("Found by offset message id: 1 record")
        await expect(page.locator("#body")).to_have_text(traced.body)
        assert await field(page, "Unique key") != traced.uniq
        # the DLQ copy goes back to the topic it was consumed from unless told otherwise
        await search(page, traced.uniq)
        await page.locator("#result-table tbody tr").nth(2).click()
        await expect(page.locator("#resend-topic")).to_have_attribute("placeholder", f"%DLQ%{GROUP}")
        await page.fill("#resend-topic", "bad topic")
        await page.click("#resend")
        await expect(page.locator("#resend-status")).to_contain_text("The resend failed (400)")
        assert page.errors == []  # type: ignore[attr-defined]
    finally:
        await server.stop()
        store.close()


# -- small things a user hits (issue 35, item 5) -------------------------------------------------


async def test_links_open_a_search_or_a_tab_and_the_address_follows(made: Page) -> None:
    """``?q=`` (what a chat or a ticket keeps) and ``#q=`` open a search, ``?tab=`` and ``#topics``
    a tab; the address says what is shown, so it can be copied; one result is "1 message"."""
    page = made
    base = page.url.split("#")[0].split("?")[0]
    await page.goto(base + "?q=" + "Orders%20order-12")
    await expect(page.locator("#result-summary")).to_have_text("1 message of Orders with key order-12")
    assert await result_column(page, 6) == ["order-12"]
    assert page.url == base + "#q=Orders%20order-12"
    await page.click("#tab-groups")
    assert page.url == base + "#groups"
    await page.click("#tab-search")
    assert page.url == base + "#q=Orders%20order-12"
    for link, view in ((base + "?tab=topics", "topics"), (base + "#groups", "groups")):
        await page.goto("about:blank")
        await page.goto(link)
        await expect(page.locator(f"#view-{view}")).to_be_visible()
        await expect(page.locator("#view-search")).to_be_hidden()
    await page.goto(base + f"#q={unique_key(3)}")
    await expect(page.locator("#result-summary")).to_contain_text("Found by unique key: 1 record")
    assert page.errors == []  # type: ignore[attr-defined]


async def test_system_topics_are_hidden_behind_a_switch(made: Page, made_store: StoreConfig) -> None:
    """The broker's own topics (the ones ``make-store`` writes into topics.json as a 4.9.7 broker's
    first start does, and the trace topic) are hidden until the switch shows them."""
    page = made
    cluster, broker = made_store.broker_cluster_name, made_store.broker_name
    system = {"SELF_TEST_TOPIC", "TBW102", "BenchmarkTest", cluster, broker, "OFFSET_MOVED_EVENT",
              "SCHEDULE_TOPIC_XXXX", f"{cluster}_REPLY_TOPIC", "RMQ_SYS_TRACE_TOPIC"}  # fmt: skip
    await page.click("#tab-topics")
    orders_row = page.locator("#topic-table tbody tr[data-topic=Orders]")
    trace_row = page.locator("#topic-table tbody tr[data-topic=RMQ_SYS_TRACE_TOPIC]")
    await expect(orders_row).to_be_visible()
    await expect(trace_row).to_be_hidden()
    await expect(page.locator("#system-hidden")).to_have_text(f"({len(system)} hidden)")
    hidden = await page.locator("#topic-table tbody tr[hidden]").evaluate_all(
        "rs => rs.map(r => r.dataset.topic)"
    )
    assert set(hidden) == system
    shown = await page.locator("#topic-table tbody tr:not([hidden])").evaluate_all(
        "rs => rs.map(r => r.dataset.topic)"
    )
    assert set(shown) == {"Orders", f"%RETRY%{GROUP}", f"%DLQ%{GROUP}"}
    await page.check("#show-system")
    await expect(trace_row).to_be_visible()
    await expect(page.locator("#system-hidden")).to_have_text("")
    await page.uncheck("#show-system")
    await expect(trace_row).to_be_hidden()
    assert page.errors == []  # type: ignore[attr-defined]
