"""The name-server role, served on the broker's own ports: topic routes and the cluster table.

Clients are pointed at this server as their name server (``-n host:port``); every topic present in
the store routes to this one broker at its advertised address, any other topic gets TOPIC_NOT_EXIST
with the name server's remark (the Java client logs and ignores it for ``TBW102``, and reports
"not matched route info" for a user topic, exactly as against a real name server).
"""

from __future__ import annotations

import time

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import GetRouteInfoRequestHeader, java_string
from server.identity import BrokerIdentity
from server.route import cluster_info_json, topic_route_json
from server.store_api import QueryStore

#: ``FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)``, appended to the name server's remark.
_FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def topic_not_exist_remark(topic: str) -> str:
    """The name server's remark for a topic it has no route for."""
    return f"No topic route info in name server for the topic: {topic}{_FAQ_SUFFIX}"


#: How long the set of topics is reused before asking the store again (it scans directories).
TOPICS_TTL = 1.0


class NameServerProcessor:
    """GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO for a one-broker cluster."""

    __slots__ = ("_cluster_json", "_route_json", "_store", "_topics", "_topics_expire")

    def __init__(self, store: QueryStore, identity: BrokerIdentity) -> None:
        self._store = store
        self._topics: set[str] = set()
        self._topics_expire = float("-inf")
        # Every topic routes to the same broker, so one encoded route serves them all.
        self._route_json = topic_route_json(identity)
        self._cluster_json = cluster_info_json(identity)

    def get_route_info_by_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        # A null topic (missing, or empty over ROCKETMQ) names no route: "... the topic: null".
        if header.topic is None or header.topic not in self._current_topics():
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(java_string(header.topic))
            )
        return request.make_response(ResponseCode.SUCCESS, body=self._route_json)

    def _current_topics(self) -> set[str]:
        now = time.monotonic()
        if now >= self._topics_expire or not self._topics:
            self._topics = self._store.topics()
            self._topics_expire = now + TOPICS_TTL
        return self._topics

    def get_broker_cluster_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self._cluster_json)
