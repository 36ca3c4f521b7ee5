"""Where a consumer group stands in its topics (``AdminBrokerProcessor.getConsumeStats``).

``mqadmin consumerProgress`` asks this per broker: for each topic (the one named, or every topic
the group committed offsets in) and each of its read queues, the queue's end (``brokerOffset``),
the group's committed offset (``consumerOffset``, 0 when none) and the store time of the last
message it consumed (``lastTimestamp``, left 0 when it consumed none). As the broker does, a topic
without a config is skipped, and so is a topic the group's online members do not subscribe when
they subscribe others (a group with no member online shows every topic it has offsets in).
"""

from __future__ import annotations

from protocol.admin_bodies import OffsetWrapper, QueueKey
from server.broker.controller import BrokerController
from server.broker.topic_validator import is_blank


def consume_stats_topics(broker: BrokerController, group: str, topic: str | None) -> list[str]:
    """The topics reported: ``topic``, or when blank every topic the group has offsets in."""
    if topic is None or is_blank(topic):
        return sorted(broker.offsets.topics_of_group(group))
    return [topic]


def consume_stats(
    broker: BrokerController, group: str, topic: str | None, broker_name: str
) -> list[tuple[QueueKey, OffsetWrapper]]:
    """The ``ConsumeStats`` rows of ``group``, queue by queue in the order the broker adds them."""
    reader = broker.store.reader
    online = broker.consumers.get(group)
    subscribed = online.subscriptions if online is not None else {}
    rows: list[tuple[QueueKey, OffsetWrapper]] = []
    for name in consume_stats_topics(broker, group, topic):
        config = broker.store.topic_config(name)
        if config is None:
            continue
        if name not in subscribed and subscribed:
            continue
        for queue_id in range(config.read_queue_nums):
            broker_offset = max(reader.max_offset(name, queue_id), 0)
            consumer_offset = max(broker.offsets.query(group, name, queue_id), 0)
            last = 0
            if consumer_offset - 1 >= 0:
                stored = reader.message_store_timestamp(name, queue_id, consumer_offset - 1)
                if stored > 0:
                    last = stored
            rows.append(
                (QueueKey(name, broker_name, queue_id), OffsetWrapper(broker_offset, consumer_offset, last))
            )
    return rows
