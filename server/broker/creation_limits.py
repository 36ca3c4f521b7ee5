"""How many topics and groups clients may make the broker create by themselves (issue 31, item 3).

A heartbeat creates its groups' subscription configs and ``%RETRY%`` topics, a SEND to an unknown
topic creates it from TBW102, an offset update of an unknown group adds it to the offset table: all
without an operator. Unbounded, one unauthenticated client planted 8,000 groups in 0.2 s (kept in
``consumerOffset.json`` across restarts), and heartbeats 84k groups and ``%RETRY%`` topics (a 16 MB
``topics.json``). The real broker has no such bound; ours refuses what passes it, the way the broker
refuses what it may not create:

- past ``max_groups`` groups in a table, or ``per_connection`` creations by one connection, a
  group is not created (as with ``autoCreateSubscriptionGroup=false``): the heartbeat is answered,
  its pulls get SUBSCRIPTION_GROUP_NOT_EXIST, an offset update SUBSCRIPTION_GROUP_NOT_EXIST;
- past ``max_topics`` topics, or the connection's share, a topic is not auto-created: a SEND gets
  TOPIC_NOT_EXIST as for a topic TBW102 may not create, a heartbeat's ``%RETRY%`` topic is skipped.

What an operator asks for (UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) and what a
table already holds are never counted against a client. Sans-IO: connections are ids the caller
gives (None: a caller that has none, counted against the broker-wide bounds only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Defaults: far above what a real cluster's broker holds (thousands, tens of thousands on busy
#: ones), low enough that a table stays a few MB.
DEFAULT_MAX_TOPICS = 100_000
DEFAULT_MAX_GROUPS = 100_000
#: A real client creates a handful (its groups and their retry topics): a thousand is generous.
DEFAULT_MAX_PER_CONNECTION = 1_000

#: One log line per this many refusals at most (the first is always said).
_LOG_EVERY = 1000


@dataclass(frozen=True, slots=True)
class CreationLimits:
    max_topics: int = DEFAULT_MAX_TOPICS
    max_groups: int = DEFAULT_MAX_GROUPS
    per_connection: int = DEFAULT_MAX_PER_CONNECTION


class CreationBudget:
    """Counts what each connection created; says whether one more creation is allowed."""

    def __init__(self, limits: CreationLimits | None = None) -> None:
        self.limits = limits or CreationLimits()
        self._by_connection: dict[int, int] = {}
        #: Creations refused so far (also a metric's value).
        self.refused = 0

    def allow(self, kind: str, name: str, connection: int | None, held: int) -> bool:
        """May ``connection`` create one more ``kind`` ("topic" or "group") named ``name``, the table
        holding ``held`` now? True: the caller creates it and calls ``created``."""
        cap = self.limits.max_topics if kind == "topic" else self.limits.max_groups
        if held >= cap:
            self._refuse(kind, name, f"the broker holds {held} ({kind} limit {cap})")
            return False
        if connection is not None and self._by_connection.get(connection, 0) >= self.limits.per_connection:
            self._refuse(
                kind, name, f"this connection created {self.limits.per_connection} topics and groups already"
            )
            return False
        return True

    def created(self, connection: int | None) -> None:
        if connection is not None:
            self._by_connection[connection] = self._by_connection.get(connection, 0) + 1

    def forget(self, connection: int) -> None:
        """The connection closed."""
        self._by_connection.pop(connection, None)

    def _refuse(self, kind: str, name: str, why: str) -> None:
        self.refused += 1
        if self.refused % _LOG_EVERY == 1:
            log.warning(
                "not creating %s %r a client asked for: %s (%d refused so far; serve --max-topics, "
                "--max-groups, --max-auto-create-per-connection)",
                kind,
                name,
                why,
                self.refused,
            )
