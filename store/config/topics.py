"""The broker's topic table, ``config/topics.json``: which topics exist, their queue counts and perms.

The write path needs it the way the broker does: a SEND's queue id is checked against the topic's
queue counts, an unknown topic is created from ``TBW102`` when ``autoCreateTopicEnable`` is on (queue
count ``min(client's defaultTopicQueueNums, TBW102's writeQueueNums)``, TBW102's perm without the
inherit bit). A new table starts with the topics a 4.9.7 broker creates at start-up
(``TopicConfigManager``'s constructor).

The broker persists the table on its send thread before it answers (``TopicConfigManager`` ->
``ConfigManager.persist``). Ours serves SENDs on the event loop, where rewriting and syncing the
whole file per created topic (10-50 ms at 3,000 topics) stalled every other client, so a table with
a ``TopicPersister`` is saved on that thread instead: ``save_soon`` only marks it changed, creations
that arrive while a write is under way go out together in the next one, and the SEND that created
a topic waits (off the loop) for the write that holds it before it is answered. Should that write
fail, nothing acknowledged depends on it: the records are in the CommitLog and the consume queues,
and the writable store puts every topic with records the table lacks back into it when it opens
(``StoreWriter.register_missing_topics``), as each was created at send time.

The file is written as the broker writes it (fastjson, tab-indented, sorted keys inside each topic)
through a temporary file and a rename, so a crash leaves the old table or the new one, never half.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from store.config.concurrent_map import ConcurrentMapOrder
from store.config.config_file import KeptLayout, load_config, write_config_text
from store.config.journal import ConfigJournal
from store.config.persister import ConfigPersister
from store.errors import StoreError

#: The persister of ``topics.json`` (one class saves every config file that changes often).
TopicPersister = ConfigPersister

PERM_INHERIT = 1
PERM_WRITE = 2
PERM_READ = 4

AUTO_CREATE_TOPIC = "TBW102"

#: Topics the broker writes records to but never puts into its topic table: the op records of decided
#: half messages (``TransactionalMessageBridge.putOpMessage`` hands them to the store directly, and
#: the check-back reads that queue by id, never through a config), so neither ``topics.json`` nor
#: GET_ALL_TOPIC_CONFIG lists it and its first record leaves the data version as it was (golden:
#: ``tests/server/golden/broker_config_4.9.7/topics.json`` after a run with commits and rollbacks).
UNLISTED_TOPICS = frozenset({"RMQ_SYS_TRANS_OP_HALF_TOPIC"})

#: Buckets of the broker's topic table (``new ConcurrentHashMap(1024)`` sizes its table to 2048).
TOPIC_TABLE_BUCKETS = 2048

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TopicConfig:
    """One topic's entry (``org.apache.rocketmq.common.TopicConfig``). Never changed in place once
    in a table: a change puts a new one (the table keeps each one's text in the file by identity)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    #: A 5.x broker's topic attributes (``"message.type": "FIFO"``, ...), kept as read so that a
    #: table written here does not lose them; a 4.9.7 table has none and is written without the key.
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        fields: dict[str, object] = {"attributes": dict(self.attributes)} if self.attributes else {}
        return fields | {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, object]) -> TopicConfig:
        def num(key: str, default: int) -> int:
            value = data.get(key, default)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        return cls(
            topic_name=name,
            read_queue_nums=num("readQueueNums", 16),
            write_queue_nums=num("writeQueueNums", 16),
            perm=num("perm", PERM_READ | PERM_WRITE),
            topic_filter_type=str(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=num("topicSysFlag", 0),
            order=bool(data.get("order", False)),
            attributes=topic_attributes(data),
        )

    def java_string(self) -> str:
        """``TopicConfig.toString``, which the broker puts into some remarks."""
        perm = "".join(
            (
                "R" if self.perm & PERM_READ else "-",
                "W" if self.perm & PERM_WRITE else "-",
                "X" if self.perm & PERM_INHERIT else "-",
            )
        )
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm}, topicFilterType={self.topic_filter_type}, "
            f"topicSysFlag={self.topic_sys_flag}, order={'true' if self.order else 'false'}]"
        )


def topic_attributes(entry: dict[str, object]) -> dict[str, str]:
    """A topics.json entry's ``attributes`` as strings (a 5.x broker's; empty when absent or not a map)."""
    raw = entry.get("attributes")
    if not isinstance(raw, dict):
        return {}
    return {str(k): str(v) for k, v in raw.items() if isinstance(v, str | int | bool)}


def read_topic_attributes(path: Path) -> dict[str, dict[str, str]]:
    """topic -> its attributes, for the listed topics (``read_listed_topics``) that have any (empty
    if there are none: the read side then treats every topic as a 4.9.7 one)."""
    found = {name: topic_attributes(entry) for name, entry in read_listed_topics(path).items()}
    return {name: attrs for name, attrs in found.items() if attrs}


def read_listed_topics(path: Path) -> dict[str, dict[str, object]]:
    """topic -> its entry (the file's JSON object) in the table a broker opened on this store holds:
    ``topics.json``, else its ``.bak`` when the file is missing, empty or not the broker's JSON (as
    ``ConfigManager.load`` falls back to ``loadBak``), then the journal's changes newer than that
    copy's data version replayed in order (``store/config/journal.py``), as ``TopicTable.load``
    does for a writable store. A read-only reader must use this, not the file alone: a writable
    server holds the changes of its last moments only in the journal until its next whole write
    (which a kill -9 never makes). Empty when neither copy nor the journal has a topic; nothing is
    written, and a copy or journal that cannot be read is logged and passed over, never raised."""
    try:
        loaded = load_config(path, _parse_entries)
    except StoreError as exc:
        log.warning("no topic table read from %s: %s", path, exc)
        loaded = None
    entries, counter = loaded if loaded is not None else ({}, 0)
    try:
        changes = ConfigJournal(path).read()
    except StoreError as exc:
        log.warning("the journal of %s not replayed: %s", path, exc)
        changes = []
    for change in changes:
        version = change["v"]
        assert isinstance(version, int)
        if version <= counter:
            continue  # a whole write already holds it
        name = change.get("put")
        if isinstance(name, str):
            entry = change["c"]
            assert isinstance(entry, dict)
            entries[name] = entry
        else:
            entries.pop(str(change["del"]), None)
        counter = version
    return entries


def _parse_entries(data: object) -> tuple[dict[str, dict[str, object]], int]:
    """A topics file's entries as they are and its data version counter (``_parse_topics`` without
    building a ``TopicConfig`` per topic: a read-only server reads the table whenever it changes)."""
    table = data.get("topicConfigTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise StoreError("no topicConfigTable object")
    version = data.get("dataVersion") if isinstance(data, dict) else None
    counter = version.get("counter", 0) if isinstance(version, dict) else 0
    entries = {str(name): entry for name, entry in table.items() if isinstance(entry, dict)}
    return entries, counter if isinstance(counter, int) and not isinstance(counter, bool) else 0


def startup_topics(cluster: str, broker_name: str, *, auto_create: bool = True) -> list[TopicConfig]:
    """The topics a 4.9.7 broker puts into a fresh table (``TopicConfigManager``'s constructor).

    ``RMQ_SYS_TRANS_HALF_TOPIC`` is not one of them: the broker creates it (one queue, read-write,
    bumping the table's data version) when its transaction check first looks for it
    (``TransactionalMessageBridge.selectTopicConfig``), ours likewise (``transactions.system_topic``)."""
    rw = PERM_READ | PERM_WRITE
    topics = [TopicConfig("SELF_TEST_TOPIC", 1, 1, rw)]
    if auto_create:
        topics.append(TopicConfig(AUTO_CREATE_TOPIC, 8, 8, rw | PERM_INHERIT))
    topics += [
        TopicConfig("BenchmarkTest", 1024, 1024, rw),
        TopicConfig(cluster, 16, 16, rw | PERM_INHERIT),
        TopicConfig(broker_name, 1, 1, rw | PERM_INHERIT),
        TopicConfig("OFFSET_MOVED_EVENT", 1, 1, rw),
        TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, rw),
        TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1, rw),
    ]
    return topics


class TopicTable:
    """``config/topics.json`` loaded, changed and saved (atomically) like the broker's manager."""

    def __init__(
        self,
        path: Path,
        topics: dict[str, TopicConfig],
        counter: int,
        timestamp: int,
        order: ConcurrentMapOrder | None = None,
    ) -> None:
        self.path = path
        self.topics = topics
        self.counter = counter
        self.timestamp = timestamp
        #: Guards ``topics``, ``counter`` and ``timestamp`` against a ``TopicPersister`` taking its
        #: snapshot on another thread while the event loop adds a topic.
        self._lock = threading.Lock()
        #: Serializes whole writes of the file (the persister's and a synchronous ``save``).
        self._save_lock = threading.Lock()
        #: Set while a ``TopicPersister`` writes this table: ``save_soon`` then only notifies it.
        self.persister: ConfigPersister | None = None
        #: Puts (True) and removals (False) since the last write, and the file's kept layout.
        self._events: list[tuple[bool, str]] = []
        self._layout: KeptLayout[TopicConfig] = KeptLayout(_entry_text)
        #: The broker's map's iteration order through this table's history (its file and
        #: GET_ALL_TOPIC_CONFIG are written in it).
        self.order = order if order is not None else ConcurrentMapOrder(TOPIC_TABLE_BUCKETS, topics)
        #: Told of every topic put (its read and write queue counts) or removed (None), so a reader
        #: of the counts (``TopicCounts.table_changed``) stays current in O(1) per change.
        self.listener: Callable[[str, tuple[int, int] | None], None] | None = None
        #: Changes made since the file was written whole are appended here first (``write_journal``),
        #: so a creation is durable in one small fsync; ``save`` empties it.
        self.journal = ConfigJournal(path)
        #: Changes not yet in the journal: (counter after it, timestamp, topic, config or None).
        self._unjournaled: list[tuple[int, int, str, TopicConfig | None]] = []
        #: How many journal changes ``load`` replayed over the file (a writable store then writes
        #: the table whole at once).
        self.replayed = 0

    @classmethod
    def load(cls, path: Path) -> TopicTable:
        """The table at ``path`` (or its ``.bak``, as the broker falls back); empty when neither exists."""
        loaded = load_config(path, _parse_topics)
        if loaded is None:
            table = cls(path, {}, 0, 0)
        else:
            topics, counter, timestamp = loaded
            # the broker's ``decode``: fastjson's map of the file, ``putAll`` into the table
            table = cls(
                path, topics, counter, timestamp, ConcurrentMapOrder.loaded(TOPIC_TABLE_BUCKETS, (), topics)
            )
        table._replay(table.journal.read())
        return table

    def _replay(self, changes: list[dict[str, object]]) -> None:
        """Apply the journal's changes newer than the file's data version, in order (``journal``)."""
        for change in changes:
            version, stamp = change["v"], change["t"]
            assert isinstance(version, int) and isinstance(stamp, int)
            if version <= self.counter:
                continue
            name = change.get("put")
            if isinstance(name, str):
                entry = change["c"]
                assert isinstance(entry, dict)
                self.put(TopicConfig.from_json(name, entry), stamp)
            else:
                self.remove(str(change["del"]), stamp)
            # the version the change had (a removal of a topic already gone would not bump it)
            self.counter = version
            self.replayed += 1
        self._unjournaled = []

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def seed(self, configs: list[TopicConfig], now_ms: int) -> None:
        """The topics ``TopicConfigManager``'s constructor puts into a fresh table: no new data
        version (the broker's counter starts at 0, its timestamp when the table was made, and only
        its changes bump it; golden: "all topic config" of ``consume_side_broker_4.9.7.json``)."""
        with self._lock:
            self.timestamp = now_ms
            for config in configs:
                self.topics[config.topic_name] = config
                self.order.put(config.topic_name)
                self._events.append((True, config.topic_name))
        for config in configs:
            self._tell(config.topic_name, config)

    def put(self, config: TopicConfig, now_ms: int) -> None:
        """Add or replace a topic and bump the data version (saved by ``save`` or ``save_soon``)."""
        with self._lock:
            self.topics[config.topic_name] = config
            self.order.put(config.topic_name)
            self.counter += 1
            self.timestamp = now_ms
            self._events.append((True, config.topic_name))
            self._unjournaled.append((self.counter, now_ms, config.topic_name, config))
        self._tell(config.topic_name, config)

    def remove(self, topic: str, now_ms: int) -> TopicConfig | None:
        """``deleteTopicConfig``: drop a topic and bump the data version (saved by the caller); the
        removed config, or None when there was none (then nothing changes)."""
        with self._lock:
            old = self.topics.pop(topic, None)
            if old is not None:
                self.order.remove(topic)
                self.counter += 1
                self.timestamp = now_ms
                self._events.append((False, topic))
                self._unjournaled.append((self.counter, now_ms, topic, None))
        if old is not None:
            self._tell(topic, None)
        return old

    def snapshot(self) -> tuple[int, int, dict[str, TopicConfig]]:
        """(counter, timestamp, a copy of the topics), taken together: for a reader on another thread."""
        with self._lock:
            return self.counter, self.timestamp, dict(self.topics)

    def _ordered(self) -> dict[str, TopicConfig]:
        """The entries in the map model's order (under ``_lock``). Should the dict have been
        changed behind the model (edited directly, not through this table), the model is made
        again from the dict as it is rather than failing."""
        self.order, entries = self.order.ordered(self.topics, TOPIC_TABLE_BUCKETS)
        return entries

    def ordered_snapshot(self) -> tuple[int, int, dict[str, TopicConfig]]:
        """``snapshot`` with the topics in the broker's map order (GET_ALL_TOPIC_CONFIG's)."""
        with self._lock:
            return self.counter, self.timestamp, self._ordered()

    def queue_counts(self) -> dict[str, tuple[int, int]]:
        """topic -> (read, write) queue counts of every topic now (a snapshot)."""
        with self._lock:
            return {name: (c.read_queue_nums, c.write_queue_nums) for name, c in self.topics.items()}

    def _tell(self, topic: str, config: TopicConfig | None) -> None:
        listener = self.listener
        if listener is not None:
            listener(topic, None if config is None else (config.read_queue_nums, config.write_queue_nums))

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, now_ms: int, *, auto_create: bool
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: the new topic, or None when the default topic forbids it."""
        default = self.topics.get(default_topic)
        if default is None:
            return None
        perm = default.perm
        if default_topic == AUTO_CREATE_TOPIC and not auto_create:
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            return None
        nums = max(0, min(client_queue_nums, default.write_queue_nums))
        config = TopicConfig(
            topic, nums, nums, perm & ~PERM_INHERIT, topic_filter_type=default.topic_filter_type
        )
        self.put(config, now_ms)
        self.save_soon()
        return config

    def save_soon(self) -> None:
        """Save the table: by its ``TopicPersister`` when it has one (off the caller's thread, batched
        with other changes), else at once."""
        persister = self.persister
        if persister is not None:
            persister.request()
        else:
            self.save()

    def save(self) -> None:
        """Write the table as the broker does, through a temporary file and a rename."""
        with self._save_lock:
            with self._lock:
                counter, timestamp = self.counter, self.timestamp
                events, self._events = self._events, []
                # the whole write holds them: no need to journal them any more
                self._unjournaled = []
                changed = {name: self.topics.get(name) for _, name in events}
                size, buckets = len(self.topics), self.order.buckets
                whole = None
                if not self._layout.follows(events, size, buckets):
                    whole = self._ordered()
                    buckets = self.order.buckets  # the model made again, should it have been
            if whole is not None:
                self._layout.rebuild(whole, buckets)
            else:
                self._layout.apply(events, changed)
            self._write(counter, timestamp)
            self.journal.clear()

    def write_journal(self) -> None:
        """Append the changes made since the last journal append or whole write to the journal,
        fsynced: once this returns they survive a crash (``journal``), before the file is rewritten."""
        with self._save_lock:
            with self._lock:
                pending, self._unjournaled = self._unjournaled, []
            lines = [
                _ENCODE(
                    {"v": v, "t": t, "put": name, "c": config.to_json()}
                    if config is not None
                    else {"v": v, "t": t, "del": name}
                )
                for v, t, name, config in pending
            ]
            self.journal.append(lines)

    def _write(self, counter: int, timestamp: int) -> None:
        head = f'{{\n\t"dataVersion":{{\n\t\t"counter":{counter},\n\t\t"timestamp":{timestamp}\n\t}},\n'
        body = ",\n".join(self._layout.texts)
        write_config_text(self.path, f'{head}\t"topicConfigTable":{{\n{body}\n\t}}\n}}')


def _entry_text(name: str, config: TopicConfig) -> str:
    """One topic as fastjson pretty-prints it inside the table (its fields sorted)."""
    body = ",\n".join(f"\t\t\t{_json(k)}:{_json(v)}" for k, v in config.to_json().items())
    return f"\t\t{_json(name)}:{{\n{body}\n\t\t}}"


def _parse_topics(data: object) -> tuple[dict[str, TopicConfig], int, int]:
    """The file's topics and data version (counter, timestamp)."""
    table = data.get("topicConfigTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise StoreError("no topicConfigTable object")
    topics = {
        str(name): TopicConfig.from_json(str(name), entry)
        for name, entry in table.items()
        if isinstance(entry, dict)
    }
    version = data.get("dataVersion")
    version = version if isinstance(version, dict) else {}
    counter, timestamp = version.get("counter", 0), version.get("timestamp", 0)
    return (
        topics,
        counter if isinstance(counter, int) and not isinstance(counter, bool) else 0,
        timestamp if isinstance(timestamp, int) and not isinstance(timestamp, bool) else 0,
    )


_ENCODE = msgspec.json.encode


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode("utf-8")
