"""The consumer- and producer-group requests of ``DefaultMQAdminExt``, as mqadmin's group commands make them.

``GroupAdmin`` adds to ``QueryAdmin`` what ``updateSubGroup``, ``deleteSubGroup``,
``consumerProgress``, ``consumerConnection``, ``producerConnection`` and ``resetOffsetByTime`` send:
the cluster table from the name server (to find a cluster's masters), subscription-group create and
delete, consume stats, the connection lists, and the offset reset (the broker-driven one, and the old
client-driven one mqadmin falls back to when the group has no consumer online).

Which broker is asked is Java's rule: a group's brokers are those of its retry topic
(``%RETRY%<group>``) and each broker group is reached at ``selectBrokerAddr`` (its master, else a
replica). Where Java picks one broker group at random (the connection lists) this asks the first one
the route names: with one broker group, as in a test, it is the same broker. The verdicts are Java's
too: an empty consume-stats table or connection list is ``CONSUMER_NOT_ONLINE`` (206) as a client
error, an empty producer list a client error with Java's message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from clients.admin import QueryAdmin
from clients.errors import ClientError, TransportError, UsageError
from clients.response_errors import broker_error, client_error, expect_success
from clients.route import BrokerData
from protocol.admin_bodies import (
    OffsetWrapper,
    QueueKey,
    decode_consume_stats,
    decode_reset_offset_body,
    queue_map_keys,
)
from protocol.codes import LanguageCode, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueueRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    read_offset,
)
from protocol.java_hashmap import as_java_hashmap, hashmap_order_by_hash, java_hashmap_order
from protocol.topic_stats import decode_topic_stats

_T = TypeVar("_T")
_V = TypeVar("_V")

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX`` and ``DLQ_GROUP_TOPIC_PREFIX``.
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
#: ``CommandUtil``'s message for a cluster the name server does not know.
#: ``examineProducerConnectionInfo``'s message when the group has no producer online.
NO_PRODUCER_MESSAGE = "Not found the producer group connection"
UNKNOWN_CLUSTER_MESSAGE = (
    "Make sure the specified clusterName exists or the name server connected to is correct."
)


# -- bodies ------------------------------------------------------------------------------------


class ClusterInfo(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """GET_BROKER_CLUSTER_INFO's answer: broker groups by name, broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = msgspec.field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = msgspec.field(default_factory=dict)


class Connection(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """One client of a group (``Connection``)."""

    client_id: str | None = None
    client_addr: str | None = None
    language: str | None = None
    version: int = 0


class SubscriptionEntry(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """The part of ``SubscriptionData`` mqadmin prints."""

    topic: str | None = None
    sub_string: str | None = None


class ConsumerConnection(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """GET_CONSUMER_CONNECTION_LIST's answer (enum values kept as the names the broker wrote)."""

    connection_set: list[Connection] = msgspec.field(default_factory=list)
    subscription_table: dict[str, SubscriptionEntry] = msgspec.field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None

    def min_version(self) -> int:
        """``computeMinVersion``: the oldest client version among the connections."""
        return min((c.version for c in self.connection_set), default=2**31 - 1)


class ProducerConnection(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """GET_PRODUCER_CONNECTION_LIST's answer."""

    connection_set: list[Connection] = msgspec.field(default_factory=list)


class _TopicList(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    topic_list: list[str] = msgspec.field(default_factory=list)


@dataclass(slots=True)
class ConsumeStats:
    """``ConsumeStats`` merged over the group's brokers: a row per queue and the summed rate."""

    offsets: dict[QueueKey, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def total_diff(self) -> int:
        """``computeTotalDiff``: messages stored but not yet consumed, over every queue."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offsets.values())


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` as ``updateSubGroup`` builds it (its defaults, then the flags).

    mqadmin turns ``consumeBroadcastEnable`` and ``consumeFromMinEnable`` off unless asked, unlike
    the class's own defaults; the others keep the class defaults.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = False
    consume_broadcast_enable: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def body(self) -> bytes:
        """The request body: the bean as fastjson writes it (properties in name order)."""
        fields = {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }
        return msgspec.json.encode(fields)


@dataclass(frozen=True, slots=True)
class RollbackStats:
    """One queue of the old (client-driven) reset: where it was, what the time maps to, where it is."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def _decode(
    body: bytes | bytearray | memoryview | None, kind: type[_T], what: str, addr: str, code: int
) -> _T:
    """A JSON answer body as ``kind``; an undecodable one is the broker's error, naming ``what``."""
    try:
        return msgspec.json.decode(bytes(body or b"{}"), type=kind)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise broker_error(code, f"undecodable {what}: {exc}", addr) from exc


def table_size_for(cap: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at least ``cap``."""
    size = 1
    while size < cap:
        size *= 2
    return size


def putall_capacity(batch_sizes: Sequence[int]) -> int:
    """The table size of a new ``HashMap`` after ``putAll`` of maps of these sizes, in turn.

    The first ``putAll`` into an empty map sizes the table for the batch (``s / 0.75 + 1``), not the
    default 16; later puts grow it as usual. The iteration order of the merged map depends on it.
    """
    capacity = 0
    size = 0
    for batch in batch_sizes:
        if batch == 0:
            continue
        if capacity == 0:
            capacity = table_size_for(int(batch / 0.75 + 1.0))
        elif batch > capacity * 0.75:
            capacity *= 2
        for _ in range(batch):
            size += 1
            if size > capacity * 0.75:
                capacity *= 2
    return capacity or 16


class GroupAdmin(QueryAdmin):
    """mqadmin's group commands' requests (see the module docstring)."""

    # -- name server ------------------------------------------------------------------------------

    async def _namesrv_call(
        self, code: int, ext_fields: dict[str, str] | None = None
    ) -> tuple[str, RemotingCommand]:
        """One request to the first name server that can be reached (as ``invokeSync(null, ...)``)."""
        if not self.namesrv_addrs:
            raise UsageError("no name server address given (use -n host:port or NAMESRV_ADDR)")
        last: TransportError | None = None
        for addr in self.namesrv_addrs:
            try:
                response = await self.client.invoke(addr, code, ext_fields, timeout=self.timeout)
            except TransportError as exc:
                last = exc
                continue
            return addr, response
        assert last is not None
        raise last

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (``examineBrokerClusterInfo``)."""
        addr, response = await self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response.code, response.remark, addr)
        return _decode(response.body, ClusterInfo, "cluster info", addr, response.code)

    async def cluster_masters(self, cluster: str) -> list[str] | None:
        """``fetchMasterAddrByClusterName``: the masters of ``cluster`` in Java's ``HashSet`` order, or
        ``None`` when the name server does not know the cluster (mqadmin prints a warning then)."""
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            return None
        masters: list[str] = []
        for name in names:
            data = info.broker_addr_table.get(name)
            addr = data.broker_addrs.get(0) if data is not None else None
            if addr and addr not in masters:
                masters.append(addr)
        return java_hashmap_order(masters)

    async def all_topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER, in the order Java's ``HashSet`` of them iterates."""
        addr, response = await self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if response.code != ResponseCode.SUCCESS or response.body is None:
            raise client_error(response.code, response.remark or "no topic list")
        topics = _decode(response.body, _TopicList, "topic list", addr, response.code)
        return java_hashmap_order(dict.fromkeys(topics.topic_list))

    async def delete_topic_in_namesrv(self, addr: str, topic: str, cluster: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV for ``topic`` of ``cluster`` on one name server."""
        fields = as_java_hashmap({"topic": topic, "clusterName": cluster})
        response = await self.client.invoke(
            addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, timeout=self.timeout
        )
        if response.code != ResponseCode.SUCCESS:
            raise client_error(response.code, response.remark or "")

    # -- broker: subscription groups and topics --------------------------------------------------

    async def _broker_call(
        self, addr: str, code: int, ext_fields: dict[str, str] | None, body: bytes | None = None
    ) -> None:
        """A request whose non-SUCCESS answer is a client error, as Java's admin calls raise it."""
        response = await self.client.invoke(addr, code, ext_fields, body, timeout=self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise client_error(response.code, f"{response.remark} (broker {addr})")

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the config in the body, no header."""
        await self._broker_call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.body())

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool) -> None:
        """DELETE_SUBSCRIPTIONGROUP."""
        fields = DeleteSubscriptionGroupRequestHeader(group, remove_offset).to_ext_fields()
        await self._broker_call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER."""
        fields = DeleteTopicRequestHeader(topic).to_ext_fields()
        await self._broker_call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, fields)

    # -- consume stats and connections ------------------------------------------------------------

    async def _group_broker_addrs(self, group: str) -> list[str]:
        route = await self.get_route(RETRY_PREFIX + group)
        return [a for a in (b.select_broker_addr() for b in route.broker_datas) if a]

    async def consume_stats_of(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS of one broker (three times the timeout, as Java)."""
        fields = GetConsumeStatsRequestHeader(group, topic).to_ext_fields()
        response = await self.client.invoke(
            addr, RequestCode.GET_CONSUME_STATS, fields, timeout=self.timeout * 3
        )
        expect_success(response, addr)
        body = bytes(response.body or b"")
        tps = consume_tps_of(body)
        try:
            offsets = decode_consume_stats(body)
        except (msgspec.DecodeError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise broker_error(response.code, f"undecodable consume stats: {exc}", addr) from exc
        if tps is None:
            raise broker_error(response.code, "undecodable consume stats: no consumeTps", addr)
        return ConsumeStats(offsets, tps)

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """``examineConsumeStats``: every broker of the group's retry topic, merged; empty is
        ``CONSUMER_NOT_ONLINE``."""
        result = ConsumeStats()
        for addr in await self._group_broker_addrs(group):
            stats = await self.consume_stats_of(addr, group, topic)
            result.offsets.update(stats.offsets)
            result.consume_tps += stats.consume_tps
        if not result.offsets:
            raise client_error(
                ResponseCode.CONSUMER_NOT_ONLINE,
                "Not found the consumer group consume stats, because return offset table is empty, "
                "maybe the consumer not consume any message",
            )
        return result

    async def consumer_connection(self, group: str, addr: str | None = None) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST of ``addr``, or of the group's (first) broker; nobody online is
        ``CONSUMER_NOT_ONLINE``."""
        if addr is None:
            addrs = await self._group_broker_addrs(group)
            addr = addrs[0] if addrs else None
        cc = ConsumerConnection()
        if addr:
            fields = GetConsumerConnectionListRequestHeader(group).to_ext_fields()
            response = await self.client.invoke(
                addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, fields, timeout=self.timeout
            )
            expect_success(response, addr)
            cc = _decode(response.body, ConsumerConnection, "consumer connection", addr, response.code)
        if not cc.connection_set:
            raise client_error(ResponseCode.CONSUMER_NOT_ONLINE, "Not found the consumer group connection")
        return cc

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST of the topic's (first) broker."""
        route = await self.get_route(topic)
        addrs = [a for a in (b.select_broker_addr() for b in route.broker_datas) if a]
        pc = ProducerConnection()
        if addrs:
            fields = GetProducerConnectionListRequestHeader(group).to_ext_fields()
            response = await self.client.invoke(
                addrs[0], RequestCode.GET_PRODUCER_CONNECTION_LIST, fields, timeout=self.timeout
            )
            expect_success(response, addrs[0])
            pc = _decode(response.body, ProducerConnection, "producer connection", addrs[0], response.code)
        if not pc.connection_set:
            raise ClientError(NO_PRODUCER_MESSAGE)
        return pc

    async def queue_allocation(self, group: str) -> dict[QueueKey, str]:
        """Which online client holds each queue: GET_CONSUMER_RUNNING_INFO of every connection (the
        broker asks the client), its ``mqTable``'s queues mapped to the client id's address part."""
        cc = await self.consumer_connection(group)
        addrs = await self._group_broker_addrs(group)
        result: dict[QueueKey, str] = {}
        if not addrs:
            return result
        for conn in cc.connection_set:
            client_id = conn.client_id or ""
            fields = GetConsumerRunningInfoRequestHeader(group, client_id, False).to_ext_fields()
            response = await self.client.invoke(
                addrs[0], RequestCode.GET_CONSUMER_RUNNING_INFO, fields, timeout=self.timeout * 3
            )
            if response.code != ResponseCode.SUCCESS or response.body is None:
                raise client_error(response.code, response.remark or "")
            try:
                keys = queue_map_keys(bytes(response.body))
            except (UnicodeDecodeError, msgspec.DecodeError) as exc:
                raise broker_error(response.code, f"undecodable running info: {exc}", addrs[0]) from exc
            for key, _ in keys:
                result[key] = client_id.split("@")[0]
        return result

    # -- offset reset ------------------------------------------------------------------------------

    async def reset_offset_by_timestamp(
        self, topic: str, group: str, timestamp: int, force: bool, cplus: bool
    ) -> list[tuple[QueueKey, int]]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every broker of ``topic`` (``-c``: sent as a C++ client,
        which the broker answers without asking consumers); the merged table in Java's order."""
        route = await self.get_route(topic)
        fields = ResetOffsetRequestHeader(topic, group, timestamp, force).to_ext_fields()
        batches: list[list[tuple[QueueKey, int]]] = []
        for broker in route.broker_datas:
            addr = broker.select_broker_addr()
            if not addr:
                continue
            request = self.client.make_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            if cplus:
                request.language = LanguageCode.CPP
            conn = await self.client.connection(addr)
            response = await conn.request(request, self.timeout)
            if response.code != ResponseCode.SUCCESS or response.body is None:
                raise client_error(response.code, response.remark or "")
            try:
                table = decode_reset_offset_body(bytes(response.body))
            except (ValueError, UnicodeDecodeError) as exc:
                raise broker_error(response.code, f"undecodable reset offset body: {exc}", addr) from exc
            batches.append(list(table.items()))
        return merged_queue_map(batches)

    async def reset_offset_old(
        self, group: str, topic: str, timestamp: int, force: bool
    ) -> list[RollbackStats]:
        """``resetOffsetByTimestampOld``: the client reads each queue's offsets and writes the new one
        itself (UPDATE_CONSUMER_OFFSET), for a group with no consumer online."""
        route = await self.get_route(topic)
        read_nums = {q.broker_name: q.read_queue_nums for q in route.queue_datas or []}
        stats: list[RollbackStats] = []
        for broker in route.broker_datas:
            addr = broker.select_broker_addr()
            if not addr:
                continue
            consumed = await self.consume_stats_of(addr, group)
            queues = [
                (key, wrapper) for key, wrapper in _hashmap_items(consumed.offsets) if key.topic == topic
            ]
            if not queues:
                rows = await self._topic_stats_of(addr, topic)
                for queue_id in range(read_nums.get(broker.broker_name, 0)):
                    key = QueueKey(topic, broker.broker_name, queue_id)
                    if key not in rows:
                        raise client_error(ResponseCode.SYSTEM_ERROR, f"no stats of {key} on {addr}")
                    min_offset, max_offset = rows[key]
                    queues.append((key, OffsetWrapper(max_offset, min_offset)))
            for key, wrapper in queues:
                stats.append(await self._rollback_one(addr, group, key, wrapper, timestamp, force))
        return stats

    async def _topic_stats_of(self, addr: str, topic: str) -> dict[QueueKey, tuple[int, int]]:
        response = await self.client.invoke(
            addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, timeout=self.timeout
        )
        expect_success(response, addr)
        return {
            QueueKey(r.topic, r.broker_name, r.queue_id): (r.min_offset, r.max_offset)
            for r in decode_topic_stats(bytes(response.body or b""))
        }

    async def _rollback_one(
        self, addr: str, group: str, key: QueueKey, wrapper: OffsetWrapper, timestamp: int, force: bool
    ) -> RollbackStats:
        if timestamp == -1:
            fields = QueueRequestHeader(key.topic, key.queue_id).to_ext_fields()
            code = RequestCode.GET_MAX_OFFSET
        else:
            fields = SearchOffsetRequestHeader(key.topic, key.queue_id, timestamp).to_ext_fields()
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
        response = await self.client.invoke(addr, code, fields, timeout=self.timeout)
        expect_success(response, addr)
        reset = read_offset(response.ext_fields)
        rollback = wrapper.consumer_offset
        if force or reset <= wrapper.consumer_offset:
            rollback = reset
            header = UpdateConsumerOffsetRequestHeader(group, key.topic, key.queue_id, reset)
            response = await self.client.invoke(
                addr, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), timeout=self.timeout
            )
            expect_success(response, addr)
        return RollbackStats(
            key.broker_name, key.queue_id, wrapper.broker_offset, wrapper.consumer_offset, reset, rollback
        )


def consume_tps_of(body: bytes) -> float | None:
    """The ``consumeTps`` of a ConsumeStats body (whose map keys are JSON objects, so the body is not
    valid JSON as a whole); 0.0 for an empty body, ``None`` when it cannot be read."""
    if not body:
        return 0.0
    text = body.decode("utf-8", errors="replace")
    at = text.find('"consumeTps":')
    if at < 0:
        return 0.0 if text.startswith("{") else None
    start = at + len('"consumeTps":')
    end = start
    while end < len(text) and text[end] not in ",}":
        end += 1
    try:
        value = float(text[start:end])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _hashmap_items(table: dict[QueueKey, OffsetWrapper]) -> list[tuple[QueueKey, OffsetWrapper]]:
    """A decoded ``HashMap<MessageQueue, ...>``'s entries in the order Java iterates them."""
    return merged_queue_map([list(table.items())], fresh=True)


def merged_queue_map(
    batches: Iterable[list[tuple[QueueKey, _V]]], *, fresh: bool = False
) -> list[tuple[QueueKey, _V]]:
    """Entries of ``HashMap<MessageQueue, V>`` maps merged with ``putAll`` into a new map (or, with
    ``fresh``, one map filled by puts from 16 buckets), in the order the result iterates."""
    merged: dict[QueueKey, _V] = {}
    sizes: list[int] = []
    for batch in batches:
        sizes.append(len(batch))
        for key, value in batch:
            merged[key] = value
    capacity = None if fresh else putall_capacity(sizes)
    return hashmap_order_by_hash(list(merged.items()), lambda item: item[0].java_hash(), capacity)
