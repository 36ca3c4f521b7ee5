"""``config/consumerOffset.json``: each consumer group's committed offset per queue.

The broker's ``ConsumerOffsetManager`` keeps ``topic@group`` -> queue id -> the next offset the
group will consume, and saves it every ``flushConsumerOffsetInterval`` (5 s) and at shutdown. A
consumer commits by UPDATE_CONSUMER_OFFSET or with a pull's commit-offset flag; a restarted consumer
asks QUERY_CONSUMER_OFFSET and goes on from there. The file is kept as the broker writes it (fastjson,
tab-indented, queue ids as bare integer keys) so that a real broker opened on this store resumes every
group where it stood, and the other way round.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from store.config.config_file import concurrent_map_order, json_text, load_config, write_config_text
from store.errors import StoreError

log = logging.getLogger(__name__)

#: Buckets of the broker's offset table (``new ConcurrentHashMap(512)`` sizes its table to 1024).
OFFSET_TABLE_BUCKETS = 1024

#: Keys copied per hold of the table's lock by a save's snapshot: the event loop's commits take the
#: same lock, and the whole copy at 50,000 groups held it (and them) 130 ms.
SNAPSHOT_SLICE = 512

#: ``MixAll``'s separator between topic and group in the table's keys.
TOPIC_GROUP_SEPARATOR = "@"


def _parse_offsets(data: object) -> dict[str, dict[int, int]]:
    table = data.get("offsetTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise StoreError("no offsetTable object")
    offsets: dict[str, dict[int, int]] = {}
    try:
        for key, queues in table.items():
            if isinstance(queues, dict):
                offsets[str(key)] = {int(q): o for q, o in queues.items() if isinstance(o, int)}
    except ValueError as exc:
        raise StoreError(f"a queue id that is not a number: {exc}") from exc
    return offsets


class ConsumerOffsetTable:
    """``topic@group`` -> {queue id: offset}, loaded from and saved to ``consumerOffset.json``.

    Indexed by group and by topic as well (issue 30): which topics a group committed in, and which
    groups committed in a topic, are O(answer), not a scan of every key (8,000 groups made a scrape
    that asked per group take 39 s). ``offsets`` is read by others but changed only here.
    """

    def __init__(self, path: Path, offsets: dict[str, dict[int, int]] | None = None) -> None:
        self.path = path
        self.offsets: dict[str, dict[int, int]] = offsets if offsets is not None else {}
        #: Bumped by every change; ``save`` notes which change it wrote.
        self.changes = 0
        self._saved = 0
        self._lock = threading.Lock()
        #: Held by a save from its snapshot to its rename (the broker's ``persist`` is
        #: ``synchronized``): of two saves at once (the periodic flush still under way when the stop
        #: saves) the later snapshot is the one left on disk, and ``_saved`` never goes back.
        self._save_lock = threading.Lock()
        #: group -> topics, topic -> groups, of the keys in ``offsets``.
        self._by_group: dict[str, set[str]] = {}
        self._by_topic: dict[str, set[str]] = {}
        #: Bumped when a group appears or goes (for callers that keep a sorted list of them).
        self.groups_version = 0
        self._sorted: tuple[int, list[str]] = (-1, [])
        for key in self.offsets:
            self._index(key)

    def _index(self, key: str) -> None:
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        if group not in self._by_group:
            self.groups_version += 1
        self._by_group.setdefault(group, set()).add(topic)
        self._by_topic.setdefault(topic, set()).add(group)

    def _unindex(self, topic: str, group: str) -> None:
        topics = self._by_group.get(group)
        if topics is not None:
            topics.discard(topic)
            if not topics:
                del self._by_group[group]
                self.groups_version += 1
        groups = self._by_topic.get(topic)
        if groups is not None:
            groups.discard(group)
            if not groups:
                del self._by_topic[topic]

    def groups(self) -> list[str]:
        """Every group with a committed offset (a snapshot, unordered)."""
        with self._lock:
            return list(self._by_group)

    def has_group(self, group: str) -> bool:
        return group in self._by_group

    def group_count(self) -> int:
        return len(self._by_group)

    def sorted_groups(self) -> list[str]:
        """Every group with a committed offset, sorted; kept until a group appears or goes, so a page
        of groups or a scrape costs what it returns, not a sort per call. Do not change it."""
        if self._sorted[0] != self.groups_version:
            with self._lock:
                self._sorted = (self.groups_version, sorted(self._by_group))
        return self._sorted[1]

    @classmethod
    def load(cls, path: Path) -> ConsumerOffsetTable:
        """The table at ``path`` (or its ``.bak``, as the broker falls back); empty when neither exists."""
        offsets = load_config(path, _parse_offsets)
        return cls(path, offsets if offsets is not None else {})

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when the group committed none for that queue."""
        queues = self.offsets.get(self.key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self.key(topic, group)
        with self._lock:
            queues = self.offsets.get(key)
            if queues is None:
                queues = self.offsets[key] = {}
                # The key is split as a reader splits it (at the first separator), so a group or
                # topic holding "@" is indexed under the names ``split_key`` gives.
                self._index(key)
            queues[queue_id] = offset
            self.changes += 1

    def queues(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offsets.get(self.key(topic, group), {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups that committed an offset in ``topic`` (``whichGroupByTopic``). A key is split at
        its first "@" (topic names cannot hold one), as every reader of the table splits it."""
        with self._lock:
            return set(self._by_topic.get(topic, ()))

    def topics_of_group(self, group: str) -> set[str]:
        """Topics ``group`` committed offsets in (``whichTopicByConsumer``)."""
        with self._lock:
            return set(self._by_group.get(group, ()))

    def remove_group(self, group: str) -> None:
        with self._lock:
            for topic in list(self._by_group.get(group, ())):
                self.offsets.pop(self.key(topic, group), None)
                self._unindex(topic, group)
            self.changes += 1

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for group in list(self._by_topic.get(topic, ())):
                self.offsets.pop(self.key(topic, group), None)
                self._unindex(topic, group)
            self.changes += 1

    @property
    def dirty(self) -> bool:
        return self.changes != self._saved

    def snapshot(self) -> dict[str, list[tuple[int, int]]]:
        """``topic@group`` -> its (queue id, offset) pairs in queue order, for a save on its own
        thread. The lock is held for the list of entries, then for ``SNAPSHOT_SLICE`` entries' copies
        at a time, so a commit on the event loop waits for one slice, not the whole table. What a
        commit changes meanwhile is in the copy or not (the save is of ``changes`` as they stood
        before it began, the later ones marked unsaved); an entry removed meanwhile is written once
        more, and dropped by the next save, as when the removal comes just after a whole copy."""
        with self._lock:
            entries = list(self.offsets.items())
        snapshot: dict[str, list[tuple[int, int]]] = {}
        for start in range(0, len(entries), SNAPSHOT_SLICE):
            with self._lock:
                for key, queues in entries[start : start + SNAPSHOT_SLICE]:
                    snapshot[key] = sorted(queues.items())
        return snapshot

    def text(self) -> str:
        """The file's text, as fastjson pretty-prints the manager."""
        snapshot = self.snapshot()
        # The broker's maps are ConcurrentHashMaps: queue ids (a 64-bucket map each) iterate in
        # order, the ``topic@group`` keys in the bucket order of its 1024-bucket table.
        order = concurrent_map_order(snapshot, OFFSET_TABLE_BUCKETS)
        entries = [(key, ",".join(f"{q}:{o}" for q, o in snapshot[key])) for key in order]
        if not entries:
            return '{\n\t"offsetTable":{}\n}'
        body = ",".join(
            f"\n\t\t{json_text(key)}:" + (f"{{{queues}\n\t\t}}" if queues else "{}")
            for key, queues in entries
        )
        return '{\n\t"offsetTable":{' + body + "\n\t}\n}"

    def save(self) -> None:
        """Write the table if it changed since the last save (the broker's periodic persist)."""
        with self._save_lock:
            upto = self.changes
            if upto == self._saved:
                return
            write_config_text(self.path, self.text())
            self._saved = upto
