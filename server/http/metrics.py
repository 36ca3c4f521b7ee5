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
files (no scan: queue ends and one record per index file), so a scrape costs O(topics × queues).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from protocol.codes import RequestCode
from server.http.groups import DLQ_PREFIX, RETRY_PREFIX, OffsetSource, group_json, group_names
from server.request_stats import LATENCY_BUCKETS, RequestStats
from server.store_api import IndexedStore

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
        connection_limit: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.connections = connections
        #: What the connection limit did: connections evicted (by reason) and refused, as counters.
        self.connection_limit = connection_limit
        self.max_connections = max_connections
        self.held_pulls = held_pulls
        self.query_pool_pending = query_pool_pending
        self.last_refresh = last_refresh
        self.requests = requests


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
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.broker = broker
        self.address = address
        self.runtime_info = runtime_info
        self.offsets = offsets
        self.state = state
        self.http = http

    def collect(self) -> Iterator[Metric]:
        yield from self._topics()
        yield from self._groups()
        yield from self._runtime()
        yield from self._own()

    def _topics(self) -> Iterator[Metric]:
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
        for topic in sorted(store.topics() | set(store.queue_nums())):
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
        yield from (normal, retry, dlq, queue, last)

    def _groups(self) -> Iterator[Metric]:
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
        for group in group_names(table):
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
        yield from (*diffs.values(), offset, queue_lag)

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
                family.add_metric(labels, float(table[key]))
            except (KeyError, ValueError):
                continue
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
        yield from self._requests()
        http = CounterMetricFamily(
            "rmq_query_http_requests",
            "HTTP requests answered, by route and status",
            labels=["route", "status"],
        )
        for (route, status), count in sorted(self.http.requests.items()):
            http.add_metric([route, str(status)], count)
        yield http

    def _requests(self) -> Iterator[Metric]:
        stats = self.state.requests
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
