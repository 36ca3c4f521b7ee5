"""The name-server role, served on the broker's own ports: topic routes, the cluster table, the topic list.

Clients are pointed at this server as their name server (``-n host:port``); every topic present in
the store routes to this one broker at its advertised address with the store's queue count for it
(``config/topics.json``, else its consumequeue directories; a topic known only from the index gets
the identity's default), any other topic gets TOPIC_NOT_EXIST with the name server's remark (the
Java client logs and ignores it for ``TBW102``, and reports "not matched route info" for a user
topic, exactly as against a real name server).

GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) lists the store's topics and the topics every 4.9.7 broker
registers for itself (``TopicConfigManager``: SELF_TEST_TOPIC, TBW102, BenchmarkTest, the cluster and
broker names, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX, ``<cluster>_REPLY_TOPIC``), in the order the
name server's ``HashSet`` gives them: copied from its 1024-bucket ``topicQueueTable`` into a default
``HashSet``, so ordered by the default set's buckets, ties by the 1024-bucket table's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import GetRouteInfoRequestHeader, java_string
from protocol.index_key import java_string_hash
from protocol.java_hashmap import hashmap_order_by_hash, java_hashmap_order
from server.identity import BrokerIdentity
from server.remoting.faq import suggest_todo
from server.remoting.route import QueueData, cluster_info_json, topic_list_json, topic_route_json
from server.store_api import ConsumeQueueStore
from server.topic_table import TopicTable


def topic_not_exist_remark(topic: str) -> str:
    """The name server's remark for a topic it has no route for."""
    return f"No topic route info in name server for the topic: {topic}{suggest_todo()}"


#: How long the store's topic table is reused before asking the store again (it scans directories).
TOPICS_TTL = 1.0

#: ``RouteInfoManager.topicQueueTable``'s initial capacity.
NAME_SERVER_TOPIC_TABLE_CAPACITY = 1024


def broker_builtin_topics(cluster: str, broker_name: str) -> list[str]:
    """The topics a 4.9.7 broker with default settings creates for itself and registers."""
    return [
        "SELF_TEST_TOPIC",
        "TBW102",
        "BenchmarkTest",
        cluster,
        broker_name,
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
        f"{cluster}_REPLY_TOPIC",
    ]


def name_server_topic_order(topics: set[str]) -> list[str]:
    """``topics`` in the order of the name server's ``TopicList`` (see the module docstring)."""
    in_table = hashmap_order_by_hash(sorted(topics), java_string_hash, NAME_SERVER_TOPIC_TABLE_CAPACITY)
    return java_hashmap_order(in_table)


class NameServerProcessor:
    """GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO and GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""

    __slots__ = (
        "_cluster_json",
        "_identity",
        "_queue_nums",
        "_routes",
        "_store",
        "_table",
        "_topic_list",
        "_topics",
        "_topics_expire",
    )

    def __init__(
        self, store: ConsumeQueueStore, identity: BrokerIdentity, topics: TopicTable | None = None
    ) -> None:
        self._store = store
        self._table = topics if topics is not None else TopicTable(store)
        self._identity = identity
        self._topics: AbstractSet[str] = frozenset()
        self._queue_nums: Mapping[str, int] = {}
        #: GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body, and the topic set it was made of.
        self._topic_list: tuple[object, bytes] = (None, b"")
        self._topics_expire = float("-inf")
        # Routes differ only in the queue count: one encoded route per count.
        self._routes: dict[int, bytes] = {}
        self._cluster_json = cluster_info_json(identity)

    def _refresh_topics(self) -> None:
        now = time.monotonic()
        if now >= self._topics_expire or not self._topics:
            self._queue_nums = self._table.queue_nums()
            # the store's topics include every topic it counts queues of, and its set is kept (a
            # new object only when a topic came or went): no copy per look
            self._topics = self._store.topics()
            self._topics_expire = now + TOPICS_TTL

    def expire_topics(self) -> None:
        """Look at the store's topics again at the next request (a writable store's table changed:
        a deleted topic must not be listed for another second)."""
        self._topics_expire = float("-inf")

    def queue_nums_of(self, topic: str) -> int | None:
        """The queue count routes advertise for ``topic``; None when the store does not hold it."""
        self._refresh_topics()
        nums = self._queue_nums.get(topic)
        if nums is None and topic in self._topics:
            nums = self._identity.queue_nums
        return nums

    def queue_data(self, topic: str) -> QueueData | None:
        """What this store's broker registers for ``topic`` with a name server of several brokers
        (``server.namesrv``); None when the store does not hold it."""
        nums = self.queue_nums_of(topic)
        return None if nums is None else QueueData(nums, nums, self._identity.perm)

    def topic_names(self) -> AbstractSet[str]:
        """Every topic the store holds."""
        self._refresh_topics()
        return self._topics

    def get_route_info_by_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        # A null topic (missing, or empty over ROCKETMQ) names no route: "... the topic: null".
        nums = None if header.topic is None else self.queue_nums_of(header.topic)
        if nums is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(java_string(header.topic))
            )
        route = self._routes.get(nums)
        if route is None:
            route = self._routes[nums] = topic_route_json(self._identity, nums)
        return request.make_response(ResponseCode.SUCCESS, body=route)

    def get_broker_cluster_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self._cluster_json)

    def get_all_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        self._refresh_topics()
        if self._topic_list[0] is not self._topics:
            identity = self._identity
            topics = self._topics | set(broker_builtin_topics(identity.cluster, identity.broker_name))
            self._topic_list = (self._topics, topic_list_json(name_server_topic_order(topics)))
        return request.make_response(ResponseCode.SUCCESS, body=self._topic_list[1])
