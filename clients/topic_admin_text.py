"""What mqadmin 4.9.7 prints for its topic and cluster commands, character for character.

``topicRoute`` prints the decoded ``TopicRouteData`` again with fastjson's ``toJson(true)`` (tabs,
bean fields in name order, a ``Map<Long, String>``'s keys bare, its first entry on the brace's line);
``topicRoute -l`` and ``clusterList`` are ``printf`` tables (Java's ``%-Ns`` is Python's ``<N``);
``topicList`` prints the name server's list as the ``HashSet`` fastjson decodes it into iterates it
(``protocol.java_hashmap``). The ``clusterList`` figures the broker measures (TPS, the hours since
the earliest message, the disk ratio) are printed as Java formats them; their values are the
broker's and the moment's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from clients.topic_admin import ClusterInfo
from protocol.java_hashmap import java_hashmap_order

#: ``TopicRouteSubCommand.FORMAT``.
_ROUTE_ROW = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}\n"
_CLUSTER_ROW = "{:<16}  {:<22}  {:<4}  {:<22} {:<16} {:>19} {:>19} {:>10} {:>5} {:>6}\n"


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _long_map(addrs: Mapping[int, str], level: int) -> str:
    """fastjson's pretty ``Map<Long, String>``: bare keys, the first entry on the brace's line."""
    if not addrs:
        return "{}"
    tabs = "\t" * (level + 1)
    entries = [f"{key}:{_json_string(value)}" for key, value in sorted(addrs.items())]
    return "{" + (",\n" + tabs).join(entries) + "\n" + tabs + "}"


def _bean(fields: Sequence[tuple[str, str]], level: int) -> str:
    tabs = "\t" * (level + 1)
    inner = ",\n".join(f'{tabs}"{name}":{value}' for name, value in fields)
    return "{\n" + inner + "\n" + "\t" * level + "}"


def _bean_list(items: Sequence[str], level: int) -> str:
    if not items:
        return "[]"
    tabs = "\t" * (level + 1)
    return "[\n" + ",\n".join(tabs + item for item in items) + "\n" + "\t" * level + "]"


def _plain_value(value: Any) -> str:
    """A value fastjson writes the same compact or pretty (strings, numbers, empty containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _json_string(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def route_json_text(route: Mapping[str, Any]) -> str:
    """``TopicRouteData.toJson(true)`` of a decoded route (``topicRoute``'s output, no newline)."""
    brokers = [
        _bean(
            [
                (
                    "brokerAddrs",
                    _long_map({int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()}, 2),
                ),
                ("brokerName", _plain_value(b.get("brokerName"))),
                *([("cluster", _plain_value(b["cluster"]))] if b.get("cluster") is not None else []),
            ],
            2,
        )
        for b in route.get("brokerDatas") or []
    ]
    queues = [
        _bean(
            [
                ("brokerName", _plain_value(q.get("brokerName"))),
                ("perm", str(int(q.get("perm", 0)))),
                ("readQueueNums", str(int(q.get("readQueueNums", 0)))),
                ("topicSysFlag", str(int(q.get("topicSysFlag", 0)))),
                ("writeQueueNums", str(int(q.get("writeQueueNums", 0)))),
            ],
            2,
        )
        for q in route.get("queueDatas") or []
    ]
    fields = [("brokerDatas", _bean_list(brokers, 1))]
    fields.append(("filterServerTable", _plain_value(route.get("filterServerTable") or {})))
    if route.get("orderTopicConf") is not None:
        fields.append(("orderTopicConf", _plain_value(route["orderTopicConf"])))
    fields.append(("queueDatas", _bean_list(queues, 1)))
    return _bean(fields, 0)


def _java_map_text(addrs: Mapping[int, str]) -> str:
    """``HashMap<Long, String>.toString()`` (small ids: in ascending order)."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(addrs.items())) + "}"


def route_table_text(route: Mapping[str, Any]) -> str:
    """``topicRoute -l``: one row per broker (by name), a rule of 158 dashes, the totals."""
    queue_by_broker = {q.get("brokerName"): q for q in route.get("queueDatas") or []}
    out = [
        _ROUTE_ROW.format("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    ]
    total_read = total_write = 0
    for broker in sorted(route.get("brokerDatas") or [], key=lambda b: str(b.get("brokerName"))):
        name = broker.get("brokerName")
        queue = queue_by_broker.get(name) or {}
        read, write = int(queue.get("readQueueNums", 0)), int(queue.get("writeQueueNums", 0))
        total_read += read
        total_write += write
        addrs = {int(k): str(v) for k, v in (broker.get("brokerAddrs") or {}).items()}
        out.append(
            _ROUTE_ROW.format(
                str(broker.get("cluster")),
                str(name),
                _java_map_text(addrs),
                read,
                write,
                int(queue.get("perm", 0)),
            )
        )
    out.append("-" * 158 + "\n")
    out.append(_ROUTE_ROW.format("Total:", len(queue_by_broker), "", total_read, total_write, ""))
    return "".join(out)


def topic_list_text(topics: Sequence[str]) -> str:
    """``topicList``: one topic a line, in the decoded ``HashSet``'s order."""
    return "".join(f"{topic}\n" for topic in java_hashmap_order(dict.fromkeys(topics)))


def front_at_least(text: str, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: the first ``size`` characters."""
    return text[:size]


def topic_list_cluster_header() -> str:
    return "{:<20}  {:<48}  {:<48}\n".format("#Cluster Name", "#Topic", "#Consumer Group")


def topic_list_cluster_row(cluster: str, topic: str, group: str) -> str:
    cluster, topic, group = front_at_least(cluster, 20), front_at_least(topic, 64), front_at_least(group, 64)
    return f"{cluster:<20}  {topic:<64}  {group:<64}\n"


def _java_fixed(value: float, digits: int) -> str:
    """Java's ``%.Nf`` (HALF_UP on the decimal expansion, where Python rounds the binary value)."""
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def cluster_list_header() -> str:
    return _CLUSTER_ROW.format(
        "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version",
        "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE",
    )  # fmt: skip


def cluster_list_row(
    cluster: str, broker_name: str, broker_id: int, addr: str, stats: Mapping[str, str] | None, now_ms: int
) -> str:
    """One broker's row of ``clusterList`` from its runtime stats (None: they could not be fetched,
    printed as Java's defaults)."""
    table = stats or {}

    def get(key: str) -> str:
        return str(table[key]) if key in table else ("null" if stats is not None else "")

    def first_number(key: str) -> float:
        text = table.get(key)
        try:
            return float(text.split(" ")[0]) if text else 0.0
        except ValueError:
            return 0.0

    hour = 0.0
    earliest = table.get("earliestMessageTimeStamp")
    if earliest:
        try:
            hour = (now_ms - int(earliest)) / 1000.0 / 60.0 / 60.0
        except ValueError:
            hour = 0.0
    space = 0.0
    ratio = table.get("commitLogDiskRatio")
    if ratio:
        try:
            space = float(ratio)
        except ValueError:
            space = 0.0

    def tps(key: str, queue: str, wait: str) -> str:
        return f"{_java_fixed(first_number(key), 2):>9}({get(queue)},{get(wait)}ms)"

    in_tps = tps("putTps", "sendThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills")
    out_tps = tps("getTransferedTps", "pullThreadPoolQueueSize", "pullThreadPoolQueueHeadWaitTimeMills")
    return _CLUSTER_ROW.format(
        cluster, broker_name, str(broker_id), addr, get("brokerVersionDesc"),
        in_tps, out_tps, get("pageCacheLockTimeMills"), _java_fixed(hour, 2), _java_fixed(space, 4),
    )  # fmt: skip


def cluster_list_rows(info: ClusterInfo) -> list[tuple[str, str, int, str]]:
    """(cluster, broker name, broker id, address) in ``printClusterBaseInfo``'s order: clusters as
    the decoded ``HashMap`` iterates them, broker names sorted, ids ascending."""
    rows = []
    for cluster in java_hashmap_order(info.clusters):
        for name in sorted(set(info.clusters[cluster])):
            broker = info.brokers.get(name)
            if broker is None:
                continue
            for broker_id, addr in sorted(broker[1].items()):
                rows.append((cluster, name, broker_id, addr))
    return rows
