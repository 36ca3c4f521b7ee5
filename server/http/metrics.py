"""``/metrics``: rocketmq-exporter's series where the store gives the same value, and the server's own.

rocketmq-exporter (apache/rocketmq-exporter) asks brokers over the admin protocol; a Prometheus
already set up for it keeps its dashboards and alerts when it scrapes this server instead, for the
series computed here from the same figures the broker would give. Names and label sets follow the
exporter's ``RMQMetricsCollector``; the values are:

- ``rocketmq_producer_offset`` / ``rocketmq_topic_retry_offset`` {cluster, broker, topic} and
  ``rocketmq_topic_dlq_offset`` {cluster, broker, group}: the sum of the topic's queue max offsets
  (GET_TOPIC_STATS_INFO), for normal, ``%RETRY%`` and ``%DLQ%`` topics;
- ``rocketmq_consumer_offset`` {cluster, broker, topic, group}: the sum of the group's committed
  offsets in the topic (not for ``%DLQ%`` topics, which ``MetricsCollectTask.collectConsumerOffset``
  skips); ``rocketmq_group_diff`` / ``rocketmq_group_retrydiff`` /
  ``rocketmq_group_dlqdiff`` {group, topic, countOfOnlineConsumers, msgModel}: the sum over queues
  of queue end minus committed offset (``ConsumeStats.computeTotalDiff``), msgModel "1" (CLUSTERING,
  the exporter's only case), countOfOnlineConsumers 0 when read-only (no consumer talks to us);
- ``rocketmq_brokeruntime_*`` {cluster, brokerIP, brokerHost, des, boottime, broker_version}: the
  GET_BROKER_RUNTIME_INFO table's commitLogMaxOffset, commitLogMinOffset, earliestMessageTimeStamp,
  commitLogDiskRatio and consumeQueueDiskRatio (the exporter's brokerHost label is empty).

TPS, latency and put-time series of the exporter are the broker's own counters of its traffic, which
a reader of the store cannot know: they are left out rather than faked. The server's own series are
prefixed ``rmq_query_`` (see README). Everything is computed at scrape time from the store's mapped
files (no scan: queue ends and one record per index file), so a scrape costs O(topics × queues),
computed a slice of names at a time with the event loop let go in between (``collect_async``) and
capped at ``max_series`` per-topic and per-group series (names in order; the rest counted).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from protocol.codes import RequestCode
from server.http import DEFAULT_MAX_SERIES
from server.http.groups import DLQ_PREFIX, RETRY_PREFIX, OffsetSource, group_json, group_names
from server.loop_watchdog import LoopWatchdog
from server.request_stats import LATENCY_BUCKETS, RequestStats
from server.store_api import IndexedStore

#: Topics (or groups) computed between two yields of the event loop while a scrape is built.
SLICE = 50

#: ``MessageModel.CLUSTERING.ordinal()``, the exporter's msgModel label for the diffs it exports.
CLUSTERING = "1"

_RUNTIME_SERIES = (
    ("rocketmq_brokeruntime_commitlog_maxoffset", "commitLogMaxOffset", "CommitLog end offset (bytes)"),
    ("rocketmq_brokeruntime_commitlog_minoffset", "commitLogMinOffset", "CommitLog first offset (bytes)"),
    (
        "rocketmq_brokeruntime_earliest_message_timestamp",
        "earliestMessageTimeStamp",
        "store time (ms) of the earliest message in the CommitLog",
    ),
    (
        "rocketmq_brokeruntime_commitlog_disk_ratio",
        "commitLogDiskRatio",
        "used fraction of the CommitLog's disk partition",
    ),
    (
        "rocketmq_brokeruntime_consumequeue_disk_ratio",
        "consumeQueueDiskRatio",
        "used fraction of the consume queues' disk partition",
    ),
)
_RUNTIME_LABELS = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]


def request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return "UNKNOWN"


def index_behind_bytes(store: IndexedStore) -> int:
    """CommitLog bytes after the end of the last indexed record (``indexLastUpdatePhyoffset`` is
    where that record starts; its size is read from the CommitLog). With no index: the whole log."""
    end = store.commitlog.max_offset
    _, last = store.index_last_update()
    if last <= 0:
        return max(end - store.commitlog.min_offset, 0)
    raw = store.view_message_copy(last, 8 * 1024 * 1024)
    size = int.from_bytes(raw[:4], "big") if raw is not None and len(raw) >= 4 else 0
    return max(end - (last + size), 0)


class ServerState:
    """What the server measures of itself, read at scrape time."""

    def __init__(
        self,
        *,
        connections: Callable[[], int],
        max_connections: Callable[[], int],
        held_pulls: Callable[[], int],
        query_pool_pending: Callable[[], int],
        last_refresh: Callable[[], float | None],
        requests: RequestStats | None,
        watchdog: LoopWatchdog | None = None,
        connection_limit: Callable[[], dict[str, int]] | None = None,
        grpc_calls: Callable[[], Mapping[str, int]] | None = None,
        worker_requests: Callable[[], list[RequestStats]] | None = None,
    ) -> None:
        #: ``serve --workers``: the other processes' request counters, added to ``requests``.
        self.worker_requests = worker_requests
        self.connections = connections
        #: The gRPC port's calls by MessagingService method (empty while it is closed).
        self.grpc_calls = grpc_calls
        #: What the connection limit did: connections evicted (by reason) and refused, as counters.
        self.connection_limit = connection_limit
        self.max_connections = max_connections
        self.held_pulls = held_pulls
        self.query_pool_pending = query_pool_pending
        self.last_refresh = last_refresh
        self.requests = requests
        self.watchdog = watchdog


class HttpStats:
    """The HTTP port's own requests, by route and status."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}

    def observe(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1


class StoreCollector(Collector):
    """Every series of ``/metrics``, computed when collected."""

    def __init__(
        self,
        store: IndexedStore,
        *,
        cluster: str,
        broker: str,
        address: Callable[[], str],
        runtime_info: Callable[[], dict[str, str]],
        offsets: OffsetSource,
        state: ServerState,
        http: HttpStats,
        max_series: int = DEFAULT_MAX_SERIES,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.broker = broker
        self.address = address
        self.runtime_info = runtime_info
        self.offsets = offsets
        self.state = state
        self.http = http
        #: The most per-topic and per-group series one scrape carries (``--metrics-max-series``).
        self.max_series = max_series
        #: Series the cap left out of the last scrape, and of every scrape so far.
        self.dropped_last = 0
        self.dropped_total = 0
        self._topics_seen: object = None
        self._topics_sorted: list[str] = []

    def collect(self) -> Iterator[Metric]:
        """Every family at once (the synchronous form: tests, and a registry asked directly)."""
        families: list[Metric] = []
        for _ in self._store_steps(families):
            pass
        yield from families
        yield from self._runtime()
        yield from self._own()

    async def collect_async(self) -> list[Metric]:
        """Every family, the per-topic and per-group part computed ``SLICE`` names at a time with the
        event loop let go between slices, so a scrape of a big broker never holds the loop (issue 30:
        one scrape at 3,018 topics held every client for 375 s)."""
        families: list[Metric] = []
        for _ in self._store_steps(families):
            await asyncio.sleep(0)
        families += self._runtime()
        families += self._own()
        return families

    def _store_steps(self, out: list[Metric]) -> Iterator[None]:
        """The topics' and groups' series into ``out``, a pause after each slice; at most
        ``max_series`` of them (names in order), the rest counted as dropped."""
        budget = [self.max_series, 0]  # series left, series dropped
        yield from self._topics(out, budget)
        yield from self._groups(out, budget)
        self.dropped_last = budget[1]
        self.dropped_total += budget[1]

    def _topics(self, out: list[Metric], budget: list[int]) -> Iterator[None]:
        labels = ["cluster", "broker", "topic"]
        normal = GaugeMetricFamily(
            "rocketmq_producer_offset", "sum of the topic's queue max offsets", labels=labels
        )
        retry = GaugeMetricFamily(
            "rocketmq_topic_retry_offset", "sum of the retry topic's queue max offsets", labels=labels
        )
        dlq = GaugeMetricFamily(
            "rocketmq_topic_dlq_offset",
            "sum of the group's dead-letter topic's queue max offsets",
            labels=["cluster", "broker", "group"],
        )
        queue = GaugeMetricFamily(
            "rmq_query_queue_max_offset",
            "a queue's max offset (its next message's queue offset)",
            labels=["topic", "queue"],
        )
        last = GaugeMetricFamily(
            "rmq_query_topic_last_store_timestamp_ms",
            "store time of the topic's newest message (ms)",
            labels=["topic"],
        )
        store = self.store
        write_nums = store.write_queue_nums()  # type: ignore[attr-defined]
        for i, topic in enumerate(self._sorted_topics()):
            if i and i % SLICE == 0:
                yield
            # one series per write queue (a row of its stats), the topic's own two: counted before
            # anything is read, so what the cap leaves out costs a lookup, not the topic's stats
            if not _fits(budget, write_nums.get(topic, 0) + 2):
                continue
            stats = store.topic_stats(topic)
            total = sum(max_offset for _, _, max_offset, _ in stats)
            for queue_id, _, max_offset, _ in stats:
                queue.add_metric([topic, str(queue_id)], max_offset)
            last.add_metric([topic], max((ts for *_, ts in stats), default=0))
            if topic.startswith(RETRY_PREFIX):
                retry.add_metric([self.cluster, self.broker, topic], total)
            elif topic.startswith(DLQ_PREFIX):
                dlq.add_metric([self.cluster, self.broker, topic[len(DLQ_PREFIX) :]], total)
            else:
                normal.add_metric([self.cluster, self.broker, topic], total)
        out.extend((normal, retry, dlq, queue, last))

    def _sorted_topics(self) -> list[str]:
        """The store's topics in name order, kept until the set changes."""
        topics = self.store.topics()
        if topics is not self._topics_seen:
            self._topics_sorted = sorted(topics | set(self.store.queue_nums()))
            self._topics_seen = topics
        return self._topics_sorted

    def _groups(self, out: list[Metric], budget: list[int]) -> Iterator[None]:
        diff_labels = ["group", "topic", "countOfOnlineConsumers", "msgModel"]
        diffs = {
            "normal": GaugeMetricFamily(
                "rocketmq_group_diff", "messages the group has not consumed", labels=diff_labels
            ),
            "retry": GaugeMetricFamily(
                "rocketmq_group_retrydiff", "retry messages the group has not consumed", labels=diff_labels
            ),
            "dlq": GaugeMetricFamily(
                "rocketmq_group_dlqdiff", "dead letters the group has not consumed", labels=diff_labels
            ),
        }
        offset = GaugeMetricFamily(
            "rocketmq_consumer_offset",
            "sum of the group's committed offsets in the topic",
            labels=["cluster", "broker", "topic", "group"],
        )
        queue_lag = GaugeMetricFamily(
            "rmq_query_group_queue_diff",
            "queue max offset minus the group's committed offset",
            labels=["group", "topic", "queue"],
        )
        table = self.offsets.table()
        read_nums = self.store.queue_nums()
        for i, group in enumerate(group_names(table)):
            if i and i % SLICE == 0:
                yield
            if not _fits(budget, _group_series(table, group, read_nums)):
                continue
            online = self.offsets.online(group)
            info = group_json(self.store, table, group, online)  # type: ignore[arg-type]
            if info is None:
                continue
            for topic in info["topics"]:
                diffs[topic["kind"]].add_metric(
                    [group, topic["topic"], str(online), CLUSTERING], topic["diff"]
                )
                if topic["kind"] != "dlq":  # the exporter skips %DLQ% topics when it asks for offsets
                    offset.add_metric(
                        [self.cluster, self.broker, topic["topic"], group], topic["consumerOffset"]
                    )
                for q in topic["queues"]:
                    queue_lag.add_metric([group, topic["topic"], str(q["queueId"])], q["diff"])
        out.extend((*diffs.values(), offset, queue_lag))

    def _runtime(self) -> Iterator[Metric]:
        table = self.runtime_info()
        labels = [
            self.cluster,
            self.address(),
            "",
            table.get("brokerVersionDesc", ""),
            table.get("bootTimestamp", ""),
            table.get("brokerVersion", ""),
        ]
        for name, key, doc in _RUNTIME_SERIES:
            family = GaugeMetricFamily(name, doc, labels=_RUNTIME_LABELS)
            try:
                value = float(table[key])
            except (KeyError, ValueError):
                continue
            if key == "earliestMessageTimeStamp" and value < 0:
                # The broker's rule reads 2 x maxMessageSize at the first offset and answers -1 when
                # the first file is smaller (every test-kit and demo store): the gauge says what its
                # help says, the first record's store time, -1 only for an empty CommitLog.
                value = float(self.store.first_message_time())
            family.add_metric(labels, value)
            yield family
        behind = GaugeMetricFamily(
            "rmq_query_index_behind_bytes", "CommitLog bytes after the last indexed record"
        )
        behind.add_metric([], index_behind_bytes(self.store))
        yield behind
        stamp = GaugeMetricFamily(
            "rmq_query_index_last_update_timestamp_ms", "store time of the last indexed record (ms)"
        )
        stamp.add_metric([], self.store.index_last_update()[0])
        yield stamp
        failed = CounterMetricFamily(
            "rmq_query_files_failed_checks",
            "index and consume queue files found replaced by other bytes while served",
            labels=["kind"],
        )
        rebuilt = CounterMetricFamily(
            "rmq_query_files_rebuilt",
            "index and consume queue files rebuilt from the CommitLog after failing their checks",
            labels=["kind"],
        )
        for kind, (failed_count, rebuilt_count) in sorted(self.store.file_checks().items()):
            failed.add_metric([kind], failed_count)
            rebuilt.add_metric([kind], rebuilt_count)
        yield from (failed, rebuilt)

    def _own(self) -> Iterator[Metric]:
        state = self.state
        for name, doc, value in (
            ("rmq_query_connections", "open remoting connections (both ports)", state.connections()),
            ("rmq_query_max_connections", "remoting connections served at once", state.max_connections()),
            ("rmq_query_held_pulls", "long-polling pulls held now", state.held_pulls()),
            (
                "rmq_query_query_pool_pending",
                "key queries queued or running in the query pool",
                state.query_pool_pending(),
            ),
        ):
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], value)
            yield gauge
        if state.connection_limit is not None:
            done = state.connection_limit()
            evicted = CounterMetricFamily(
                "rmq_query_connections_evicted",
                "remoting connections closed to make room at the connection limit: 'incomplete' had no "
                "completed request, 'idle' was the longest idle and no heart-beating client's",
                labels=["reason"],
            )
            for reason in ("incomplete", "idle"):
                evicted.add_metric([reason], done.get(reason, 0))
            yield evicted
            refused = CounterMetricFamily(
                "rmq_query_connections_refused", "remoting connections answered SYSTEM_BUSY at the limit"
            )
            refused.add_metric([], done.get("refused", 0))
            yield refused
        last = state.last_refresh()
        if last is not None:
            lag = GaugeMetricFamily(
                "rmq_query_refresh_lag_seconds", "seconds since the store was last refreshed"
            )
            lag.add_metric([], max(time.monotonic() - last, 0.0))
            yield lag
        watchdog = state.watchdog
        if watchdog is not None:
            for name, doc, value in (
                (
                    "rmq_query_event_loop_max_stall_seconds",
                    "the longest time the event loop was held since the last scrape (every client waits)",
                    watchdog.take_recent_max(),
                ),
                (
                    "rmq_query_event_loop_max_stall_since_start_seconds",
                    "the longest time the event loop was held since the server started",
                    watchdog.max_stall,
                ),
            ):
                gauge = GaugeMetricFamily(name, doc)
                gauge.add_metric([], value)
                yield gauge
            stalls = CounterMetricFamily(
                "rmq_query_event_loop_stalls",
                "times the event loop was held longer than the watchdog's threshold (each logged)",
            )
            stalls.add_metric([], watchdog.stalls_over_threshold)
            yield stalls
        dropped = GaugeMetricFamily(
            "rmq_query_metrics_series_dropped_last",
            "per-topic and per-group series the last scrape left out (--metrics-max-series)",
        )
        dropped.add_metric([], self.dropped_last)
        yield dropped
        dropped_total = CounterMetricFamily(
            "rmq_query_metrics_series_dropped",
            "per-topic and per-group series left out by every scrape so far",
        )
        dropped_total.add_metric([], self.dropped_total)
        yield dropped_total
        yield from self._requests()
        http = CounterMetricFamily(
            "rmq_query_http_requests",
            "HTTP requests answered, by route and status",
            labels=["route", "status"],
        )
        for (route, status), count in sorted(self.http.requests.items()):
            http.add_metric([route, str(status)], count)
        yield http
        grpc_calls = CounterMetricFamily(
            "rmq_query_grpc_requests", "gRPC calls received, by MessagingService method", labels=["method"]
        )
        for method, count in sorted((self.state.grpc_calls() if self.state.grpc_calls else {}).items()):
            grpc_calls.add_metric([method], count)
        yield grpc_calls

    def _requests(self) -> Iterator[Metric]:
        stats = self.state.requests
        workers = self.state.worker_requests() if self.state.worker_requests is not None else []
        if stats is not None and workers:
            stats = RequestStats.combined([stats, *workers])
        requests = CounterMetricFamily(
            "rmq_query_requests", "remoting requests answered, by request code", labels=["code", "request"]
        )
        errors = CounterMetricFamily(
            "rmq_query_request_errors",
            "answers SYSTEM_ERROR, SYSTEM_BUSY, REQUEST_CODE_NOT_SUPPORTED or NO_PERMISSION",
            labels=["code", "request", "response_code"],
        )
        latency = HistogramMetricFamily(
            "rmq_query_request_duration_seconds",
            "time from a request's dispatch to its answer",
            labels=["code", "request"],
        )
        if stats is not None:
            for code, count in sorted(stats.requests.items()):
                requests.add_metric([str(code), request_name(code)], count)
            for (code, response), count in sorted(stats.errors.items()):
                errors.add_metric([str(code), request_name(code), str(response)], count)
            for code, counts in sorted(stats.buckets.items()):
                cumulative: list[tuple[str, float]] = []
                running = 0
                for bound, count in zip((*LATENCY_BUCKETS, float("inf")), counts, strict=True):
                    running += count
                    cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
                latency.add_metric([str(code), request_name(code)], cumulative, stats.sums[code])
        yield from (requests, errors, latency)


def metric_names(families: Any) -> list[str]:
    return [f.name for f in families]


def _group_series(table: Any, group: str, read_nums: Any) -> int:
    """The series ``group_json`` would give ``group``: per topic one per queue (the topic's queues
    and any the group committed beyond them) and the diff, plus the offset unless a ``%DLQ%`` topic;
    counted from the tables alone."""
    total = 0
    for topic in table.topics_of_group(group):
        committed = table.offsets.get(f"{topic}@{group}", {})
        queues = len(set(range(read_nums.get(topic, 0))) | set(committed))
        total += queues + (1 if topic.startswith(DLQ_PREFIX) else 2)
    return total


def _fits(budget: list[int], series: int) -> bool:
    """Take ``series`` from what is left; once one name does not fit, every later one is dropped too
    (the cap keeps names in order, without gaps), and counted."""
    if series <= budget[0]:
        budget[0] -= series
        return True
    budget[0] = 0
    budget[1] += series
    return False


class Families(Collector):
    """Families already computed, for rendering off the event loop (``generate_latest`` of a few
    hundred thousand series takes seconds of CPU: it runs on a thread, reading only these)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families
