"""``RouteInfoManager`` for brokers that live in this process: who is registered, and what each holds.

The real name server learns a broker's topics from its registrations (every 30 s, and at once when
a topic is created or deleted) and forgets the broker when its channel closes. Brokers here share
the process, so instead of copies each registration keeps a live view of the broker's topic table
(``BrokerRoutes``): a topic created, auto-created or deleted on a broker is in the merged answers
at once, as a registration sent at that moment would put it. ``unregister`` is the channel closing
(``onChannelDestroy``): the broker's address, its queue data in every topic, and topics left with
no queue data at all are gone from the answers; ``register`` again brings them back.

The answers are the name server's: a route lists, for every registered broker holding the topic,
its ``QueueData`` and its ``BrokerData``; the cluster table lists every registered broker under its
cluster; the topic list is the union of what every broker registered (its table and the topics a
4.9.7 broker creates for itself). Maps and lists follow the order of the name server's ``HashMap``
of broker names, so a client or a golden-data comparison sees the same order.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from protocol.java_hashmap import java_hashmap_order
from server.identity import BrokerIdentity
from server.remoting.processors.name_server import broker_builtin_topics, name_server_topic_order
from server.remoting.route import QueueData, cluster_table_json, merged_route_json, topic_list_json


class BrokerRoutes(Protocol):
    """A broker's topic table as it registers it with the name server."""

    def queue_data(self, topic: str) -> QueueData | None:
        """The topic's queue counts and perm on this broker; None when it does not hold the topic."""
        ...

    def topic_names(self) -> AbstractSet[str]:
        """Every topic this broker holds."""
        ...


@dataclass(frozen=True, slots=True)
class Registration:
    identity: BrokerIdentity
    routes: BrokerRoutes


class NameRegistry:
    """The registered brokers by name, and the name server's answers merged over them."""

    __slots__ = ("_brokers",)

    def __init__(self) -> None:
        self._brokers: dict[str, Registration] = {}

    def register(self, identity: BrokerIdentity, routes: BrokerRoutes) -> None:
        """``registerBroker``: ``identity``'s broker serves ``routes`` from now on (again)."""
        self._brokers[identity.broker_name] = Registration(identity, routes)
        self._reorder()

    def unregister(self, broker_name: str) -> bool:
        """``onChannelDestroy``: forget the broker; False if it was not registered."""
        return self._brokers.pop(broker_name, None) is not None

    def _reorder(self) -> None:
        names = java_hashmap_order(sorted(self._brokers))
        self._brokers = {name: self._brokers[name] for name in names}

    @property
    def broker_names(self) -> list[str]:
        """Registered broker names, in the name server's map order."""
        return list(self._brokers)

    def identity(self, broker_name: str) -> BrokerIdentity | None:
        registration = self._brokers.get(broker_name)
        return None if registration is None else registration.identity

    def route(self, topic: str) -> bytes | None:
        """``pickupTopicRouteData``: the topic's route over every broker holding it, None if none does."""
        held: list[tuple[BrokerIdentity, QueueData]] = []
        for registration in self._brokers.values():
            data = registration.routes.queue_data(topic)
            if data is not None:
                held.append((registration.identity, data))
        return merged_route_json(held) if held else None

    def holders(self, topic: str) -> list[str]:
        """The registered brokers holding ``topic`` (the ones its route names)."""
        return [name for name, r in self._brokers.items() if r.routes.queue_data(topic) is not None]

    def cluster_info(self) -> bytes:
        """``getAllClusterInfo``: every registered broker, and each cluster's broker names."""
        return cluster_table_json([r.identity for r in self._brokers.values()])

    def clusters(self) -> dict[str, list[str]]:
        """Cluster name → its registered broker names."""
        table: dict[str, list[str]] = {}
        for registration in self._brokers.values():
            table.setdefault(registration.identity.cluster, []).append(registration.identity.broker_name)
        return table

    def topic_names(self, cluster: str | None = None) -> set[str]:
        """Every topic a registered broker (of ``cluster``, when given) holds or made for itself."""
        topics: set[str] = set()
        for registration in self._brokers.values():
            identity = registration.identity
            if cluster is not None and identity.cluster != cluster:
                continue
            topics |= registration.routes.topic_names()
            topics.update(broker_builtin_topics(identity.cluster, identity.broker_name))
        return topics

    def topic_list(self, cluster: str | None = None) -> bytes:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER's (or GET_TOPICS_BY_CLUSTER's) ``TopicList``."""
        return topic_list_json(name_server_topic_order(self.topic_names(cluster)))


def registered(names: Iterable[str]) -> str:
    """``broker-a, broker-b`` for messages."""
    return ", ".join(names) or "none"
