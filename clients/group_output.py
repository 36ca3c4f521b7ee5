"""What mqadmin's group commands print, to the character (4.9.7's ``printf`` layouts).

``updateSubGroup`` ends with ``SubscriptionGroupConfig.toString()`` and no newline; the tables pad
with Java's ``%-Ns`` (left-justified, never truncated) after ``UtilAll.frontStringAtLeast`` cut the
names to 64 / 32 characters; times are ``yyyy-MM-dd HH:mm:ss`` in the local time zone (the JVM's
default, which follows ``TZ`` as Python's ``time.localtime`` does); a ``null`` prints as ``null``;
client versions print as ``MQVersion.getVersionDesc`` names them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from clients.group_admin import (
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    RollbackStats,
    SubscriptionGroupConfig,
)
from protocol.admin_bodies import QueueKey
from protocol.java_hashmap import java_hashmap_order


def _version_names() -> tuple[str, ...]:
    """``MQVersion.Version``'s constants in ordinal order: 3.0.0's pre-releases, then a SNAPSHOT and a
    release per patch version up to 5.9.9, then ``HIGHER_VERSION``."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"]
    names += [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")

    def patches(major: int, minor: int, first: int, last: int) -> None:
        for patch in range(first, last + 1):
            names.extend((f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"))

    patches(3, 0, 1, 15)
    patches(3, 1, 0, 9)
    patches(3, 2, 0, 9)
    for minor in range(3, 10):
        patches(3, minor, 1, 9)
    for major in (4, 5):
        for minor in range(10):
            patches(major, minor, 0, 9)
    names.append("HIGHER_VERSION")
    return tuple(names)


VERSION_NAMES = _version_names()


def version_desc(version: int) -> str:
    """``MQVersion.getVersionDesc``: the constant's name (the last one from the end of the list on)."""
    if version >= len(VERSION_NAMES):
        return VERSION_NAMES[-1]
    return VERSION_NAMES[version]


def java_str(value: object) -> str:
    """``String.valueOf``: ``null`` for None, ``true``/``false`` for booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def front(text: str | None, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters (``null`` stays ``null``)."""
    return "null" if text is None else text[:size]


def java_fixed2(value: float) -> str:
    """``String.format("%.2f", value)``: Java rounds the shortest decimal form half-up."""
    try:
        return str(Decimal(repr(float(value))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    except InvalidOperation:
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def local_time(millis: int) -> str:
    """``UtilAll.formatDate(new Date(millis), "yyyy-MM-dd HH:mm:ss")`` in the local time zone."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis // 1000))
    except (OverflowError, OSError, ValueError):
        return ""


# -- updateSubGroup / deleteSubGroup --------------------------------------------------------------


def subscription_group_text(config: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()`` (mqadmin prints it with no newline after)."""
    return (
        f"SubscriptionGroupConfig [groupName={config.group_name}, "
        f"consumeEnable={java_str(config.consume_enable)}, "
        f"consumeFromMinEnable={java_str(config.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={java_str(config.consume_broadcast_enable)}, "
        f"retryQueueNums={config.retry_queue_nums}, retryMaxTimes={config.retry_max_times}, "
        f"brokerId={config.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={config.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={java_str(config.notify_consumer_ids_changed_enable)}]"
    )


# -- consumerProgress ------------------------------------------------------------------------------


def consumer_progress_text(stats: ConsumeStats, client_ips: dict[QueueKey, str] | None = None) -> str:
    """``consumerProgress -g``: a row per queue (sorted by topic, broker name, queue id), then the
    summed rate and backlog. ``client_ips`` (``-s true``) adds the column of each queue's client."""
    if client_ips is None:
        header = (
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
            f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
        )
    else:
        header = (
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
            f"{'#Consumer Offset':<20}  {'#Client IP':<20} {'#Diff':<20}  #LastTime"
        )
    lines = [header]
    diff_total = 0
    for key in sorted(stats.offsets, key=lambda k: (k.topic, k.broker_name, k.queue_id)):
        wrapper = stats.offsets[key]
        diff = wrapper.broker_offset - wrapper.consumer_offset
        diff_total += diff
        last = "N/A" if wrapper.last_timestamp == 0 else local_time(wrapper.last_timestamp)
        topic, broker = front(key.topic, 64), front(key.broker_name, 32)
        if client_ips is None:
            lines.append(
                f"{topic:<64}  {broker:<32}  {key.queue_id:<4}  {wrapper.broker_offset:<20}  "
                f"{wrapper.consumer_offset:<20}  {diff:<20}  {last}"
            )
        else:
            ip = client_ips.get(key, "N/A")
            lines.append(
                f"{topic:<64}  {broker:<32}  {key.queue_id:<4}  {wrapper.broker_offset:<20}  "
                f"{wrapper.consumer_offset:<20}  {ip:<20} {diff:<20}  {last}"
            )
    lines += ["", f"Consume TPS: {java_fixed2(stats.consume_tps)}", f"Diff Total: {diff_total}"]
    return "\n".join(lines) + "\n"


GROUP_LIST_HEADER = (
    f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total"
)


def group_list_row(group: str, stats: ConsumeStats | None, cc: ConsumerConnection | None) -> str:
    """One row of ``consumerProgress`` without ``-g``: what is known of the group (an offline group,
    or one whose stats cannot be read, prints zeros as mqadmin does)."""
    tps = int(stats.consume_tps) if stats is not None else 0
    diff = stats.total_diff() if stats is not None else 0
    count = len(cc.connection_set) if cc is not None else 0
    version, kind, model = "OFFLINE", "", ""
    if cc is not None and count:
        version = version_desc(cc.min_version())
        kind = "PULL" if cc.consume_type == "CONSUME_ACTIVELY" else "PUSH"
        model = java_str(cc.message_model) if cc.consume_type == "CONSUME_PASSIVELY" else ""
    return f"{front(group, 64):<64}  {count:<6}  {version:<24} {kind:<5}  {model:<14}  {tps:<7}  {diff}"


# -- consumerConnection / producerConnection ------------------------------------------------------


def consumer_connection_text(cc: ConsumerConnection) -> str:
    """``consumerConnection``: the clients, the subscriptions (in the ``ConcurrentHashMap`` order of
    their topics), then the group's consume type, model and start point."""
    lines = [f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version"]
    for conn in cc.connection_set:
        lines.append(
            f"{java_str(conn.client_id):<36} {java_str(conn.client_addr):<22} "
            f"{java_str(conn.language):<10} {version_desc(conn.version)}"
        )
    lines += ["", "Below is subscription:", f"{'#Topic':<20} #SubExpression"]
    for topic in java_hashmap_order(cc.subscription_table):
        sub = cc.subscription_table[topic]
        lines.append(f"{java_str(sub.topic):<20} {java_str(sub.sub_string)}")
    lines += [
        "",
        f"ConsumeType: {java_str(cc.consume_type)}",
        f"MessageModel: {java_str(cc.message_model)}",
        f"ConsumeFromWhere: {java_str(cc.consume_from_where)}",
    ]
    return "\n".join(lines) + "\n"


def producer_connection_text(pc: ProducerConnection) -> str:
    """``producerConnection``: a numbered row per client."""
    return "".join(
        f"{i:04d}  {java_str(c.client_id):<32} {java_str(c.client_addr):<22} {java_str(c.language):<8} "
        f"{version_desc(c.version)}\n"
        for i, c in enumerate(pc.connection_set, start=1)
    )


# -- resetOffsetByTime -----------------------------------------------------------------------------


def reset_offset_text(
    group: str,
    topic: str,
    force: bool,
    timestamp_text: str,
    timestamp: int,
    table: Sequence[tuple[QueueKey, int]],
) -> str:
    """``resetOffsetByTime`` when the broker did the reset: the new offset of each queue."""
    lines = [
        f"rollback consumer offset by specified group[{group}], topic[{topic}], force[{java_str(force)}], "
        f"timestamp(string)[{timestamp_text}], timestamp(long)[{timestamp}]",
        f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}",
    ]
    lines += [f"{front(key.broker_name, 32):<40}  {key.queue_id:<40}  {offset:<40}" for key, offset in table]
    return "\n".join(lines) + "\n"


def reset_offset_old_text(
    group: str, topic: str, force: bool, timestamp_text: str, timestamp: int, rows: Sequence[RollbackStats]
) -> str:
    """``resetOffsetByTime`` when no consumer was online (the old client-driven reset)."""
    lines = [
        f"rollback consumer offset by specified consumerGroup[{group}], topic[{topic}], "
        f"force[{java_str(force)}], timestamp(string)[{timestamp_text}], timestamp(long)[{timestamp}]",
        f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
        f"{'#timestampOffset':<20}  {'#rollbackOffset':<20}",
    ]
    lines += [
        f"{front(r.broker_name, 32):<20}  {r.queue_id:<20}  {r.broker_offset:<20}  {r.consumer_offset:<20}  "
        f"{r.timestamp_offset:<20}  {r.rollback_offset:<20}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"
