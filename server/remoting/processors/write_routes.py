"""Routes in writable mode: each topic of the topic table with its own queue counts and perm.

A read-only server routes every topic it finds in the store the same way (``name_server``). With the
write path on, the topic table decides, as the broker's registration with the name server does:
``TBW102`` (perm 7, 8 queues) is routed while auto-create is on, so a producer sending to a new
topic first gets TOPIC_NOT_EXIST for it, then takes TBW102's route and the broker creates the topic
on the first SEND; afterwards the new topic has its own route. Topics found only in the records (a
store written elsewhere) keep the read-only answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set as AbstractSet

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import GetRouteInfoRequestHeader, java_string
from server.broker.writable_store import WritableStore
from server.identity import BrokerIdentity
from server.remoting.processors.name_server import NameServerProcessor, topic_not_exist_remark
from server.remoting.route import QueueData, topic_route_json


class WritableRoutes:
    """GET_ROUTEINFO_BY_TOPIC from the topic table, falling back to the read-only name server."""

    __slots__ = ("_fallback", "_identity", "_store")

    def __init__(self, store: WritableStore, identity: BrokerIdentity, fallback: NameServerProcessor) -> None:
        self._store = store
        self._identity = identity
        self._fallback = fallback

    def get_route_info_by_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        config = self._store.topic_config(header.topic)
        if config is None:
            if header.topic in self._store.deleted_topics:
                # Deleted by DELETE_TOPIC_IN_BROKER: gone from the name server too.
                return request.make_response(
                    ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(java_string(header.topic))
                )
            return self._fallback.get_route_info_by_topic(request)
        identity = dataclasses.replace(self._identity, perm=config.perm)
        body = topic_route_json(identity, config.read_queue_nums, config.write_queue_nums)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def queue_data(self, topic: str) -> QueueData | None:
        """What this broker registers for ``topic`` with a name server (``server.namesrv``): the
        topic table's counts and perm, else the read-only answer for a topic found in the records;
        None for a topic it does not hold (or deleted)."""
        config = self._store.topic_config(topic)
        if config is not None:
            return QueueData(config.read_queue_nums, config.write_queue_nums, config.perm)
        if topic in self._store.deleted_topics:
            return None
        nums = self._fallback.queue_nums_of(topic)
        return None if nums is None else QueueData(nums, nums, self._identity.perm)

    def topic_names(self) -> AbstractSet[str]:
        """Every topic this broker holds (its store's)."""
        return self._store.reader.topics()

    def get_all_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER from the store's topics as they are now: the writable
        store keeps them current in O(1) per change, so the read-only side's one-second reuse would
        only list a topic just deleted (or miss one just created)."""
        self._fallback.expire_topics()
        return self._fallback.get_all_topic_list(request)
