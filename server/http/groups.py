"""Consumer groups' committed offsets and lag, from the file a live broker saves or the live table.

Read-only (``serve`` beside a running broker, or over a copied store), the offsets are
``config/consumerOffset.json``, which the broker rewrites every 5 s: the table is re-read when the
file's size, modification time or inode change, so a page or a scrape sees what the broker last
saved, never more than one flush behind. Under ``--writable`` the ``BrokerController``'s own table
is read instead (the file lags it by up to a flush).

Per queue, as the broker's GET_CONSUME_STATS reports it: ``brokerOffset`` is the queue's end,
``consumerOffset`` the committed offset (0 when the group committed none for that queue), ``diff``
their difference (``ConsumeStats.computeTotalDiff`` adds these). The queues of a topic are its
queue ids in the store, plus any the table names beyond them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from server.store_api import ConsumeQueueStore, ConsumerOffsetTable

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX`` and ``DLQ_GROUP_TOPIC_PREFIX``.
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


class OffsetTable(Protocol):
    """``ConsumerOffsetTable``'s reading side: ``topic@group`` -> {queue id: offset}, indexed by group."""

    offsets: dict[str, dict[int, int]]

    def sorted_groups(self) -> list[str]: ...

    def topics_of_group(self, group: str) -> set[str]: ...


class OffsetSource(Protocol):
    def table(self) -> OffsetTable: ...

    def online(self, group: str) -> int:
        """Consumers of ``group`` connected now (0 when this server cannot know)."""
        ...


class FileOffsets:
    """``config/consumerOffset.json``, re-read when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._table: OffsetTable = ConsumerOffsetTable(path)

    def table(self) -> OffsetTable:
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            # load falls back to the .bak copy, as the broker does, for a file cut mid-write
            self._table = ConsumerOffsetTable.load(self.path)
            self._stamp = stamp
        return self._table

    def online(self, group: str) -> int:
        return 0


class LiveOffsets:
    """The writable server's ``BrokerController``: its offsets and its connected consumers."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def table(self) -> OffsetTable:
        return self._broker.offsets  # type: ignore[no-any-return]

    def online(self, group: str) -> int:
        info = self._broker.consumers.get(group)
        return 0 if info is None else len(info.channels())


def split_key(key: str) -> tuple[str, str]:
    """``topic@group`` -> (topic, group)."""
    topic, _, group = key.partition("@")
    return topic, group


def group_names(table: OffsetTable) -> list[str]:
    """The groups with committed offsets, sorted (kept by the table until a group appears or goes)."""
    return table.sorted_groups()


def group_json(
    store: ConsumeQueueStore, table: OffsetTable, group: str, online: int
) -> dict[str, Any] | None:
    """One group's topics and queues with committed offsets and diffs; None when it has no offsets."""
    topics = sorted(table.topics_of_group(group))
    if not topics:
        return None
    queue_nums = store.queue_nums()
    out = []
    for topic in topics:
        committed = table.offsets.get(f"{topic}@{group}", {})
        queue_ids = sorted(set(range(queue_nums.get(topic, 0))) | set(committed))
        queues = []
        for queue_id in queue_ids:
            broker_offset = max(store.max_offset(topic, queue_id), 0)
            consumer_offset = max(committed.get(queue_id, 0), 0)
            queues.append(
                {
                    "queueId": queue_id,
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "committed": queue_id in committed,
                    "diff": broker_offset - consumer_offset,
                }
            )
        out.append(
            {
                "topic": topic,
                "kind": "retry"
                if topic.startswith(RETRY_PREFIX)
                else "dlq"
                if topic.startswith(DLQ_PREFIX)
                else "normal",
                "queues": queues,
                "diff": sum(q["diff"] for q in queues),
                "consumerOffset": sum(q["consumerOffset"] for q in queues),
            }
        )
    return {
        "group": group,
        "onlineConsumers": online,
        "topics": out,
        "diff": sum(t["diff"] for t in out if t["kind"] == "normal"),
        "dlqTopic": DLQ_PREFIX + group,
    }
