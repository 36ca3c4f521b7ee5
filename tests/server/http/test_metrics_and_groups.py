"""``/metrics`` parsed with Prometheus' own parser, and consumer groups from ``consumerOffset.json``.

Values are checked against the real broker's recorded answers (``.expected.json``,
``.cq-expected.json``) and against offsets this test writes into a copy of the store's config.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from server.app import QueryServer
from server.http.trace import decode_trace_body
from tests.support.java_store import JAVA_STORE, open_java_store, settings_for


def samples(text: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def write_offsets(root: Path, table: dict[str, dict[int, int]]) -> None:
    (root / "config").mkdir(exist_ok=True)
    body = {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in table.items()}}
    (root / "config" / "consumerOffset.json").write_text(json.dumps(body), encoding="utf-8")


async def test_metrics_and_groups_over_a_store_copy(
    stores_dir: Path, tmp_path: Path, java_expected: dict[str, Any]
) -> None:
    shutil.copytree(stores_dir / JAVA_STORE, tmp_path / JAVA_STORE)
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", tmp_path / f"{JAVA_STORE}.broker.conf")
    root = tmp_path / JAVA_STORE
    write_offsets(root, {"TopicA@g1": {0: 100, 1: 498}, "%RETRY%g1@g1": {0: 0}})
    cq = json.loads((stores_dir / f"{JAVA_STORE}.cq-expected.json").read_text(encoding="utf-8"))
    max_offsets = {t: {r["queueId"]: r["maxOffset"] for r in rows} for t, rows in cq["topicStats"].items()}
    store = open_java_store(root)
    server = QueryServer(store, settings_for(store.config, http_port=0))
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            async with session.get("/api/groups/g1") as response:
                group = await response.json()
            topic_a = next(t for t in group["topics"] if t["topic"] == "TopicA")
            assert [(q["queueId"], q["consumerOffset"], q["diff"]) for q in topic_a["queues"]] == [
                (q, {0: 100, 1: 498}.get(q, 0), max_offsets["TopicA"][q] - {0: 100, 1: 498}.get(q, 0))
                for q in sorted(max_offsets["TopicA"])
            ]
            async with session.get("/metrics") as response:
                assert response.status == 200
                first = samples(await response.text())
            # a broker beside us saves new offsets: the next scrape sees them
            await asyncio.sleep(0.01)
            write_offsets(root, {"TopicA@g1": {0: 500, 1: 498, 2: 500, 3: 495}})
            async with session.get("/metrics") as response:
                second = samples(await response.text())
    finally:
        await server.stop()
        store.close()

    def value(found: dict[str, list[Any]], name: str, **labels: str) -> float:
        hits = [s.value for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(hits) == 1, (name, labels, found.get(name))
        return float(hits[0])

    for topic, queues in max_offsets.items():
        assert value(first, "rocketmq_producer_offset", topic=topic) == sum(queues.values())
        for q, high in queues.items():
            assert value(first, "rmq_query_queue_max_offset", topic=topic, queue=str(q)) == high
    info = java_expected["storeInfoAfterReload"]
    assert value(first, "rocketmq_brokeruntime_commitlog_maxoffset") == info["maxPhyOffset"]
    assert value(first, "rocketmq_brokeruntime_commitlog_minoffset") == info["minPhyOffset"]
    last_indexed = info["indexFiles"][-1]["endPhyOffset"]
    size = next(m["size"] for m in java_expected["messages"] if m["commitLogOffset"] == last_indexed)
    assert value(first, "rmq_query_index_behind_bytes") == info["maxPhyOffset"] - (last_indexed + size)
    total_a = sum(max_offsets["TopicA"].values())
    assert value(first, "rocketmq_group_diff", group="g1", topic="TopicA", msgModel="1") == total_a - 598
    assert value(first, "rocketmq_consumer_offset", group="g1", topic="TopicA") == 598
    assert value(first, "rocketmq_group_retrydiff", group="g1", topic="%RETRY%g1") == 0
    assert value(second, "rocketmq_group_diff", group="g1", topic="TopicA") == total_a - 1993
    assert "rocketmq_group_retrydiff" not in second or not [
        s for s in second["rocketmq_group_retrydiff"] if s.labels["group"] == "g1"
    ]
    assert value(second, "rmq_query_http_requests_total", route="/api/groups/{group}", status="200") == 1


def test_trace_bodies_of_the_4x_client_decode() -> None:
    """A Pub and a SubAfter context as TraceDataEncoder joins them (fields by \\x01, contexts by \\x02)."""
    pub = "\x01".join(
        ["Pub", "1700000000000", "DefaultRegion", "pg", "TopicA", "UNIQ1", "tagA", "k1", "10.0.0.1:10911",
         "12", "3", "0", "OFFID1", "true"]
    )  # fmt: skip
    after = "\x01".join(["SubAfter", "req-1", "UNIQ1", "7", "false", "k1", "0", "1700000000500"])
    events = decode_trace_body(pub + "\x02" + after + "\x02")
    assert events[0] == {
        "type": "Pub", "timestamp": 1700000000000, "regionId": "DefaultRegion", "groupName": "pg",
        "topic": "TopicA", "msgId": "UNIQ1", "tags": "tagA", "keys": "k1", "storeHost": "10.0.0.1:10911",
        "bodyLength": 12, "costTime": 3, "msgType": "Normal_Msg", "offsetMsgId": "OFFID1", "success": True,
    }  # fmt: skip
    assert events[1]["type"] == "SubAfter"
    assert (events[1]["costTime"], events[1]["success"], events[1]["timestamp"]) == (7, False, 1700000000500)
    assert decode_trace_body("Pub\x01not-a-number")[0]["type"] == "unparsed"


#: rocketmq-exporter's series that ``/metrics`` exports, with their label names in order, written by
#: hand from apache/rocketmq-exporter (commit e1ab2dd, 2025-06-05),
#: src/main/java/org/apache/rocketmq/exporter/collector/RMQMetricsCollector.java:
#: TOPIC_OFFSET_LABEL_NAMES (rocketmq_producer_offset, rocketmq_topic_retry_offset),
#: DLQ_TOPIC_OFFSET_LABEL_NAMES (rocketmq_topic_dlq_offset), GROUP_NUMS_LABEL_NAMES
#: (rocketmq_consumer_offset), GROUP_DIFF_LABEL_NAMES (rocketmq_group_diff, _retrydiff, _dlqdiff),
#: BROKER_RUNTIME_METRIC_LABEL_NAMES (the rocketmq_brokeruntime_* gauges).
EXPORTER_LABELS = {
    "rocketmq_producer_offset": ["cluster", "broker", "topic"],
    "rocketmq_topic_retry_offset": ["cluster", "broker", "topic"],
    "rocketmq_topic_dlq_offset": ["cluster", "broker", "group"],
    "rocketmq_consumer_offset": ["cluster", "broker", "topic", "group"],
    "rocketmq_group_diff": ["group", "topic", "countOfOnlineConsumers", "msgModel"],
    "rocketmq_group_retrydiff": ["group", "topic", "countOfOnlineConsumers", "msgModel"],
    "rocketmq_group_dlqdiff": ["group", "topic", "countOfOnlineConsumers", "msgModel"],
    **{
        f"rocketmq_brokeruntime_{name}": [
            "cluster",
            "brokerIP",
            "brokerHost",
            "des",
            "boottime",
            "broker_version",
        ]
        for name in (
            "commitlog_maxoffset",
            "commitlog_minoffset",
            "earliest_message_timestamp",
            "commitlog_disk_ratio",
            "consumequeue_disk_ratio",
        )
    },
}


async def test_exporter_series_have_the_exporters_names_and_label_order(tmp_path: Path) -> None:
    """Every series above is in the scrape with exactly those labels in that order (a dashboard's
    ``by (...)`` and a recording rule's label matchers see the same series), and the exporter's
    values: a DLQ topic's offset is labelled with the group, and ``rocketmq_consumer_offset`` leaves
    ``%DLQ%`` topics out, as ``MetricsCollectTask.collectConsumerOffset`` skips them."""
    from clients.testkit.jsonl_store import make_store
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    lines = [{"topic": t, "store_timestamp": 1_767_225_600_000 + i, "body": "x"}
             for i, t in enumerate(["Orders"] * 3 + ["%RETRY%g1"] * 2 + ["%DLQ%g1"])]  # fmt: skip
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=1024 * 1024)
    make_store(config, spec)
    write_offsets(tmp_path / "store", {"Orders@g1": {0: 1}, "%RETRY%g1@g1": {0: 1}, "%DLQ%g1@g1": {0: 0}})
    store = MessageStore.open(config)
    server = QueryServer(store, settings_for(store.config, http_port=0))
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            async with session.get("/metrics") as response:
                text = await response.text()
        # the order the labels are declared in (prometheus_client sorts them in the text; Prometheus
        # takes them as a set): read from the families the scrape was made of
        routes = server.http_app.app.router.routes()  # type: ignore[union-attr]
        api = next(r.handler for r in routes if r.resource and r.resource.canonical == "/metrics").__self__
        declared = {f.name: list(f.samples[0].labels) for f in api.registry.collect() if f.samples}
    finally:
        await server.stop()
        store.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, labels in EXPORTER_LABELS.items():
        assert families[name].samples, name
        for sample in families[name].samples:
            assert sorted(sample.labels) == sorted(labels), (name, sample.labels)
        assert declared[name] == labels, name
    [dlq] = families["rocketmq_topic_dlq_offset"].samples
    assert (dlq.labels["group"], dlq.value) == ("g1", 1)
    assert {s.labels["topic"] for s in families["rocketmq_consumer_offset"].samples} == {
        "Orders",
        "%RETRY%g1",
    }
    [dlq_diff] = families["rocketmq_group_dlqdiff"].samples
    assert (dlq_diff.labels["topic"], dlq_diff.labels["msgModel"], dlq_diff.value) == ("%DLQ%g1", "1", 1)


async def test_the_earliest_message_gauge_is_the_first_records_time_on_a_small_store(tmp_path: Path) -> None:
    """The broker's runtime-info rule answers -1 when 2 x maxMessageSize (8 MiB) is not readable in
    the first CommitLog file, as on every demo and test-kit store (issue 35 item 5): the gauge, whose
    help says "store time of the earliest message", shows the first record's store time instead."""
    from clients.testkit.jsonl_store import make_store
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    first = 1_767_225_600_000
    lines = [{"topic": "Orders", "store_timestamp": first + i, "body": "x"} for i in range(3)]
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=1024 * 1024)
    make_store(config, spec)
    store = MessageStore.open(config)
    server = QueryServer(store, settings_for(store.config, http_port=0))
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            async with session.get("/metrics") as response:
                text = await response.text()
    finally:
        await server.stop()
        store.close()
    [earliest] = samples(text)["rocketmq_brokeruntime_earliest_message_timestamp"]
    assert earliest.value == first


async def test_a_scrape_is_capped_counts_what_it_left_out_and_lets_the_loop_run(tmp_path: Path) -> None:
    """``--metrics-max-series``: topics (then groups) in name order until the cap, the rest counted
    in ``rmq_query_metrics_series_dropped_last``/``_total``; and a scrape of many topics lets other
    callbacks run between its slices (issue 30: one scrape held every client for minutes)."""
    from clients.testkit.jsonl_store import make_store
    from server.http import metrics
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    # named to sort before the broker's start-up topics (``startup_topics``)
    topics = [f"A{i:04d}" for i in range(3 * metrics.SLICE)]
    lines = [
        {"topic": t, "store_timestamp": 1_767_225_600_000 + i, "body": "x"} for i, t in enumerate(topics)
    ]
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=4 * 1024 * 1024)
    make_store(config, spec)
    write_offsets(tmp_path / "store", {"A0000@g1": {0: 1}})
    store = MessageStore.open(config)
    # each topic: 4 queues (the writer's least count) + its sum and last-store-time series = 6
    cap = 6 * 10 + 3
    server = QueryServer(store, settings_for(store.config, http_port=0, metrics_max_series=cap))
    await server.start()
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.http_port}") as session:
            async with session.get("/metrics") as response:
                first = samples(await response.text())
            async with session.get("/metrics") as response:
                second = samples(await response.text())
        routes = server.http_app.app.router.routes()  # type: ignore[union-attr]
        api = next(r.handler for r in routes if r.resource and r.resource.canonical == "/metrics").__self__
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        await api.collector.collect_async()
        during = ticks - before
        stop.set()
        await task
    finally:
        await server.stop()
        store.close()
    shown = sorted(s.labels["topic"] for s in first["rocketmq_producer_offset"])
    assert shown == [*topics[:10]]
    assert len(first["rmq_query_queue_max_offset"]) == 40
    # left out: 590 topics x 6 series; the start-up topics' queues (SELF_TEST_TOPIC 1, TBW102 8,
    # BenchmarkTest 1024, DefaultCluster 16, the broker's own 1, OFFSET_MOVED_EVENT 1,
    # SCHEDULE_TOPIC_XXXX 18, DefaultCluster_REPLY_TOPIC 1) + 2 series each; the group's 4 queues + 2
    left_out = (len(topics) - 10) * 6 + (1 + 8 + 1024 + 16 + 1 + 1 + 18 + 1) + 8 * 2 + 6
    assert first["rmq_query_metrics_series_dropped_last"][0].value == left_out
    assert second["rmq_query_metrics_series_dropped_total"][0].value == 2 * left_out
    assert "rocketmq_group_diff" not in first
    assert during >= 3  # the ticker ran between the scrape's slices (3 slices of topics: 3 or more)
