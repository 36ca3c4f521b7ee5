"""What QueryRoute and SendMessage know of a topic: its queue counts, perm and 5.x message type.

With ``--writable`` the topic table decides (``config/topics.json`` as the writable store keeps it,
attributes included), as the remoting routes do; a topic found only in the records, and every topic
of a read-only store, gets the read-only answer: the store's queue counts (``topics.json``, else the
consume queue directories) with the broker's default perm, and the ``message.type`` attribute of
``topics.json`` when it has one. A topic in neither is not found (the Proxy's TOPIC_NOT_FOUND: a 5.x
client never gets the TBW102 route to create topics with, as the Proxy does not give it either).
"""

from __future__ import annotations

import time
from typing import Protocol

from server.broker.writable_store import WritableStore
from server.grpc.conversion import topic_message_type
from server.grpc.route import TopicRouteConfig
from server.topic_table import TopicTable

#: Seconds the read-only attribute table is reused (as ``server.topic_table``'s queue counts).
ATTRIBUTES_TTL = 1.0


class TopicSource(Protocol):
    """The read side's calls used here (``store.MessageStore``)."""

    def queue_nums(self) -> dict[str, int]: ...

    def topic_attributes(self) -> dict[str, dict[str, str]]: ...


class GrpcTopics:
    """Topic configs for the gRPC calls, from the writable table or the read-only store."""

    def __init__(self, store: TopicSource, perm: int, writable: WritableStore | None = None) -> None:
        self._store = store
        self._perm = perm
        self._writable = writable
        self._queues = TopicTable(store)
        self._attributes: dict[str, dict[str, str]] = {}
        self._attributes_expire = float("-inf")

    def _read_only_attributes(self, topic: str) -> dict[str, str]:
        now = time.monotonic()
        if now >= self._attributes_expire:
            self._attributes = self._store.topic_attributes()
            self._attributes_expire = now + ATTRIBUTES_TTL
        return self._attributes.get(topic, {})

    def get(self, topic: str) -> TopicRouteConfig | None:
        if self._writable is not None:
            config = self._writable.topic_config(topic)
            if config is not None:
                return TopicRouteConfig(
                    config.read_queue_nums,
                    config.write_queue_nums,
                    config.perm,
                    topic_message_type(config.attributes),
                )
        nums = self._queues.queue_nums().get(topic)
        if nums is None:
            return None
        return TopicRouteConfig(nums, nums, self._perm, topic_message_type(self._read_only_attributes(topic)))
