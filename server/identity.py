"""Who this server says it is: the broker (and name server) identity every answer is built from.

The query server plays both the name server and the single master broker of one cluster, so the
route it hands out and the cluster table come from one
place.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The queue count a broker gives a topic auto-created from ``TBW102`` (``defaultTopicQueueNums``).
DEFAULT_QUEUE_NUMS = 4

#: ``PermName.PERM_READ | PermName.PERM_WRITE``, what the real broker registers for a normal topic.
DEFAULT_TOPIC_PERM = 6


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """The cluster, broker name and advertised ``host:port`` clients are routed to."""

    cluster: str
    broker_name: str
    address: str
    queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = DEFAULT_TOPIC_PERM
