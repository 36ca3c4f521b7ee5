"""A store with many topics, subscription groups and committed offsets, built in seconds (issue 30).

``benchmarks.metadata_scale`` serves such a store to see what each request costs when the broker
holds tens of thousands of topics and groups. A broker's ``config/`` reaches that size over months of
creations; here it is written at once, by the project's own tables, so the files are in the broker's
layout (``topics.json`` by ``TopicTable``, ``subscriptionGroup.json`` by ``SubscriptionGroupTable``,
``consumerOffset.json`` by ``ConsumerOffsetTable``) and each is saved once, not once per entry:

* ``topics`` topics named ``scale-topic-NNNNNN`` with 4 read and write queues, over the topics a
  4.9.7 broker creates at start-up (``startup_topics``, the cluster and broker name ``serve --store``
  takes by default);
* ``groups`` subscription groups ``scale-group-NNNNNN`` over the system groups;
* one offset entry per group: group ``i`` committed the 4 queues of topic ``i mod topics``;
* ``message_topics`` of the topics (spread over the range) hold ``messages_per_topic`` messages,
  written by ``StoreWriter`` over their 4 queues and indexed, so their consume queues exist and the
  offsets of those topics are real.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig
from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable
from store.config.topics import TopicConfig, TopicTable, startup_topics
from store.write.writer import StoreWriter

QUEUES = 4


def topic_name(index: int) -> str:
    return f"scale-topic-{index:06d}"


def group_name(index: int) -> str:
    return f"scale-group-{index:06d}"


@dataclass(frozen=True, slots=True)
class ScaleStore:
    """What was built: the store root and the names a benchmark asks about."""

    root: Path
    topics: int
    groups: int
    #: Topics that hold messages (their consume queues exist), in index order.
    message_topics: tuple[str, ...]
    seconds: float


def message_topic_indexes(topics: int, count: int) -> list[int]:
    """``count`` topic indexes spread evenly over ``range(topics)`` (all of them when fewer)."""
    count = min(count, topics)
    if count <= 0:
        return []
    step = topics / count
    return sorted({int(i * step) for i in range(count)})


def build_store(
    root: Path,
    topics: int,
    groups: int,
    *,
    message_topics: int = 200,
    messages_per_topic: int = 4,
) -> ScaleStore:
    """Write the store at ``root`` (a new or empty directory); see the module docstring."""
    started = time.perf_counter()
    config = StoreConfig.for_store(root)
    config_dir = root / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    with_messages = [topic_name(i) for i in message_topic_indexes(topics, message_topics)]
    # Messages first: the writer registers each topic it writes in topics.json (a few hundred saves
    # of a small table), and the whole table is written once after.
    ends: dict[str, int] = {}
    if with_messages:
        with StoreWriter(config) as writer:
            for topic in with_messages:
                for n in range(messages_per_topic):
                    writer.append(topic, b"scale-%d" % n, keys=f"{topic}-{n}", queue_id=n % QUEUES)
                ends[topic] = messages_per_topic
            writer.index()
    now_ms = time.time_ns() // 1_000_000
    table = TopicTable.load(config_dir / "topics.json")
    existing = set(table.topics)
    seed = [
        t
        for t in startup_topics(config.broker_cluster_name, config.broker_name)
        if t.topic_name not in existing
    ]
    table.seed(seed, now_ms)
    for i in range(topics):
        name = topic_name(i)
        table.topics[name] = TopicConfig(name, QUEUES, QUEUES)
    table.counter += topics
    table.save()

    group_table = SubscriptionGroupTable.load(config_dir / "subscriptionGroup.json")
    for i in range(groups):
        name = group_name(i)
        group_table.groups[name] = SubscriptionGroupConfig(name)
    group_table.counter += groups
    group_table.timestamp = now_ms
    group_table.save()

    offsets = ConsumerOffsetTable.load(config_dir / "consumerOffset.json")
    for i in range(groups):
        topic = topic_name(i % topics) if topics else "scale-topic-none"
        # Each queue of a topic with messages holds ceil((n - q) / QUEUES) of them: commit one.
        committed = 1 if topic in ends else 0
        offsets.offsets[ConsumerOffsetTable.key(topic, group_name(i))] = dict.fromkeys(
            range(QUEUES), committed
        )
    offsets.changes += 1
    offsets.save()
    return ScaleStore(root, topics, groups, tuple(with_messages), time.perf_counter() - started)
