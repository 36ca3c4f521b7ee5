"""The Java client's ``MessageQueue`` and ``PullResult``, as mqadmin's pull-based tools use them.

``MessageQueue`` orders (``compareTo``: topic, broker name, queue id), hashes
(``MessageQueue.hashCode``, which decides the order of the ``HashSet`` that
``fetchSubscribeMessageQueues`` returns and so the order ``printMsg`` walks the queues in) and prints
(``toString``) exactly as Java's. A pull's status comes from the response code as
``MQClientAPIImpl.processPullResponse`` maps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from protocol.codes import ResponseCode
from protocol.java_hashmap import hashmap_order_by_hash
from protocol.message import MessageExt
from protocol.topic_stats import message_queue_hash


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (field order = Java's ``compareTo`` order)."""

    topic: str
    broker_name: str
    queue_id: int

    def java_hash(self) -> int:
        return message_queue_hash(self.broker_name, self.queue_id, self.topic)

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


def java_hashset_order(queues: list[MessageQueue]) -> list[MessageQueue]:
    """``queues`` (added in this order) as a default ``HashSet<MessageQueue>`` iterates them."""
    return hashmap_order_by_hash(queues, MessageQueue.java_hash)


class PullStatus(Enum):
    """``PullStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


#: ``processPullResponse``: the codes a pull may answer with; any other is an ``MQBrokerException``.
PULL_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    """What a pull returned: status, offsets, and the messages after the client's tag filter."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
