"""``config/subscriptionGroup.json``: the broker's consumer-group settings (``SubscriptionGroupManager``).

A group's config says whether it may consume at all, by broadcast, how many retry queues its
``%RETRY%`` topic gets and after how many redeliveries a message goes to its ``%DLQ%`` topic. The
broker creates one on first sight of a group (``autoCreateSubscriptionGroup``, on by default; system
groups always), starts with its fixed system groups, bumps a data version per change and saves the
whole table on every change. Kept here as the broker writes it (fastjson, tab-indented, fields
sorted), so that a real broker started on this store sees the same groups.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from store.config.concurrent_map import ConcurrentMapOrder
from store.config.config_file import (
    KeptLayout,
    json_text,
    load_config,
    write_config_text,
)
from store.config.persister import ConfigPersister
from store.errors import StoreError

#: Buckets of the broker's group table (``new ConcurrentHashMap(1024)`` sizes its table to 2048).
GROUP_TABLE_BUCKETS = 2048

#: ``MixAll``'s system consumer groups, which the broker always has (``SubscriptionGroupManager.init``).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
)
#: ``MixAll.CID_RMQ_SYS_PREFIX``: groups under it count as system groups (created even without
#: auto-creation).
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` with the broker's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: 5.x's ``consumeMessageOrderly``: the group consumes FIFO (its pops lock their queue). A 4.x
    #: broker has no such field, so it is written only when set: a 4.x file stays as 4.x writes it.
    consume_message_orderly: bool = False

    #: JSON field name -> attribute, in fastjson's (sorted) order.
    FIELDS = (
        ("brokerId", "broker_id"),
        ("consumeBroadcastEnable", "consume_broadcast_enable"),
        ("consumeEnable", "consume_enable"),
        ("consumeFromMinEnable", "consume_from_min_enable"),
        ("groupName", "group_name"),
        ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable"),
        ("retryMaxTimes", "retry_max_times"),
        ("retryQueueNums", "retry_queue_nums"),
        ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
    )

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {name: getattr(self, attr) for name, attr in self.FIELDS}
        if self.consume_message_orderly:
            data["consumeMessageOrderly"] = True
            data = dict(sorted(data.items()))
        return data

    @classmethod
    def from_json(cls, name: str, data: dict[str, object]) -> SubscriptionGroupConfig:
        """A config from its JSON object; fields missing or of the wrong type keep the default."""
        config = cls(name)
        for json_name, attr in cls.FIELDS:
            value = data.get(json_name)
            default = getattr(config, attr)
            if attr == "group_name":
                if isinstance(value, str) and value:
                    config.group_name = value
            elif isinstance(default, bool):
                if isinstance(value, bool):
                    setattr(config, attr, value)
            elif isinstance(value, int) and not isinstance(value, bool):
                setattr(config, attr, value)
        if isinstance(data.get("consumeMessageOrderly"), bool):
            config.consume_message_orderly = bool(data["consumeMessageOrderly"])
        return config


def _entry_text(name: str, config: SubscriptionGroupConfig) -> str:
    """One group as fastjson pretty-prints it inside the table (its fields sorted)."""
    fields = ",\n".join(f"\t\t\t{json_text(k)}:{json_text(v)}" for k, v in config.to_json().items())
    return f"\t\t{json_text(name)}:{{\n{fields}\n\t\t}}"


def is_system_group(group: str) -> bool:
    """``MixAll.isSysConsumerGroup``."""
    return group.startswith(SYSTEM_GROUP_PREFIX)


def _startup_groups() -> dict[str, SubscriptionGroupConfig]:
    return {name: SubscriptionGroupConfig(name) for name in SYSTEM_GROUPS}


def _parse_groups(data: object) -> tuple[dict[str, SubscriptionGroupConfig], int, int]:
    """The file's groups and data version (counter, timestamp)."""
    table = data.get("subscriptionGroupTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise StoreError("no subscriptionGroupTable object")
    groups = {
        str(name): SubscriptionGroupConfig.from_json(str(name), entry)
        for name, entry in table.items()
        if isinstance(entry, dict)
    }
    counter, timestamp = _data_version(data)
    return groups, counter, timestamp


def _data_version(data: dict[str, object]) -> tuple[int, int]:
    version = data.get("dataVersion")
    version = version if isinstance(version, dict) else {}
    counter = version.get("counter", 0)
    timestamp = version.get("timestamp", 0)
    return (
        counter if isinstance(counter, int) else 0,
        timestamp if isinstance(timestamp, int) else 0,
    )


class SubscriptionGroupTable:
    """The groups, their data version, and the file they are saved to."""

    def __init__(
        self,
        path: Path,
        groups: dict[str, SubscriptionGroupConfig],
        counter: int = 0,
        timestamp: int = 0,
        order: ConcurrentMapOrder | None = None,
    ) -> None:
        self.path = path
        self.groups = groups
        self.counter = counter
        self.timestamp = timestamp
        self._lock = threading.Lock()
        #: Puts (True) and removals (False) since the file's text was last made, and its layout.
        self._events: list[tuple[bool, str]] = []
        self._layout: KeptLayout[SubscriptionGroupConfig] = KeptLayout(_entry_text)
        #: The broker's map's iteration order through this table's history (its file and
        #: GET_ALL_SUBSCRIPTIONGROUP_CONFIG are written in it).
        self.order = order if order is not None else ConcurrentMapOrder(GROUP_TABLE_BUCKETS, groups)
        self._text_lock = threading.Lock()
        #: Held by a save from its text to its rename: of two saves at once the later text is the
        #: one left on disk (the broker's ``persist`` is ``synchronized``).
        self._save_lock = threading.Lock()
        #: Set while a ``ConfigPersister`` saves this table: changes are then saved on its thread.
        self.persister: ConfigPersister | None = None

    @classmethod
    def load(cls, path: Path) -> SubscriptionGroupTable:
        """The table at ``path`` over the system groups (the broker's start-up set, then the file).

        The file's data version is not kept: 4.9.7's ``decode`` copies the table only, so the
        manager's version is the one made with it (counter 0, the time it was made) until the next
        change (golden: ``many_topics_4.9.7.json.gz``'s ``afterRestart``, and the consume-side
        recording's foreign files, both counter 0 whatever the file said)."""
        groups = _startup_groups()
        made_ms = time.time_ns() // 1_000_000
        loaded = load_config(path, _parse_groups)
        if loaded is None:
            return cls(path, groups, 0, made_ms)
        table, _counter, _timestamp = loaded
        groups.update(table)
        # the broker's constructor puts the system groups, then ``decode`` ``putAll``s fastjson's map
        # of the file into the table
        order = ConcurrentMapOrder.loaded(GROUP_TABLE_BUCKETS, _startup_groups(), table)
        return cls(path, groups, 0, made_ms, order)

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.groups.get(group)

    def snapshot(self) -> tuple[int, int, dict[str, SubscriptionGroupConfig]]:
        """(counter, timestamp, a copy of the groups), taken together: for a reader on another thread.
        A config is never changed in place once in the table (a change ``put``s a new one)."""
        with self._lock:
            return self.counter, self.timestamp, dict(self.groups)

    def _ordered(self) -> dict[str, SubscriptionGroupConfig]:
        """The entries in the map model's order (under ``_lock``). Should the dict have been
        changed behind the model (edited directly, not through this table), the model is made
        again from the dict as it is rather than failing."""
        self.order, entries = self.order.ordered(self.groups, GROUP_TABLE_BUCKETS)
        return entries

    def ordered_snapshot(self) -> tuple[int, int, dict[str, SubscriptionGroupConfig]]:
        """``snapshot`` with the groups in the broker's map order (GET_ALL_SUBSCRIPTIONGROUP_CONFIG's)."""
        with self._lock:
            return self.counter, self.timestamp, self._ordered()

    def _bump(self) -> None:
        self.counter += 1
        self.timestamp = time.time_ns() // 1_000_000

    def find(self, group: str, *, auto_create: bool) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the group's config, created (and saved) when missing and
        auto-creation is on or the group is a system group; None otherwise."""
        config = self.groups.get(group)
        if config is None and (auto_create or is_system_group(group)):
            with self._lock:
                config = self.groups[group] = SubscriptionGroupConfig(group)
                self.order.put(group)
                self._bump()
                self._events.append((True, group))
            self.save_soon()
        return config

    def put(self, config: SubscriptionGroupConfig) -> None:
        """``updateSubscriptionGroupConfig``: add or replace, then save."""
        with self._lock:
            self.groups[config.group_name] = config
            self.order.put(config.group_name)
            self._bump()
            self._events.append((True, config.group_name))
        self.save_soon()

    def delete(self, group: str) -> bool:
        """``deleteSubscriptionGroupConfig``: True if it existed (then saved)."""
        with self._lock:
            if self.groups.pop(group, None) is None:
                return False
            self.order.remove(group)
            self._bump()
            self._events.append((False, group))
        self.save_soon()
        return True

    def text(self) -> str:
        """The file's text, from the kept layout brought up to date (``KeptLayout``: a change at
        50,000 groups formats that group, not all of them)."""
        with self._text_lock:
            with self._lock:
                counter, timestamp = self.counter, self.timestamp
                events, self._events = self._events, []
                now = {name: self.groups.get(name) for _, name in events}
                buckets = self.order.buckets
                whole = None
                if not self._layout.follows(events, len(self.groups), buckets):
                    whole = self._ordered()
                    buckets = self.order.buckets  # the model made again, should it have been
            if whole is not None:
                self._layout.rebuild(whole, buckets)
            else:
                self._layout.apply(events, now)
            return (
                "{\n"
                '\t"dataVersion":{\n'
                f'\t\t"counter":{counter},\n'
                f'\t\t"timestamp":{timestamp}\n'
                "\t},\n"
                '\t"subscriptionGroupTable":{\n' + ",\n".join(self._layout.texts) + "\n\t}\n}"
            )

    def save_soon(self) -> None:
        """Save the table: by its persister when it has one (batched, off the caller's thread), else now."""
        persister = self.persister
        if persister is not None:
            persister.request()
        else:
            self.save()

    def saved(self) -> Future[None]:
        """Done once every change so far is on disk (at once without a persister: saved already)."""
        persister = self.persister
        if persister is None:
            done: Future[None] = Future()
            done.set_result(None)
            return done
        return persister.saved(persister.requested)

    def save(self) -> None:
        with self._save_lock:
            write_config_text(self.path, self.text())
