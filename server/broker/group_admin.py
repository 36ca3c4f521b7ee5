"""Subscription-group configs as the admin requests change and report them.

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP takes a ``SubscriptionGroupConfig`` JSON body (fields missing
keep the broker's defaults, as fastjson leaves them) and puts it; the broker checks nothing else.
DELETE_SUBSCRIPTIONGROUP removes the config and, when the request says ``removeOffset``, the group's
committed offsets. GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers the manager as ``encode()`` writes it:
compact fastjson, ``dataVersion`` then ``subscriptionGroupTable``.
"""

from __future__ import annotations

import threading
import weakref

from protocol.errors import JsonBodyError
from protocol.json_body import decode_json_body
from server.broker.controller import BrokerController
from store.config.config_file import json_text
from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable

#: The SYSTEM_ERROR remark for a body that is not a ``SubscriptionGroupConfig`` with a name.
BAD_BODY_REMARK = "SubscriptionGroupConfig: the request body is not a JSON object with a groupName"


def decode_group_config(body: bytes | bytearray | memoryview | None) -> SubscriptionGroupConfig | None:
    """The config a request body describes; None when it is not JSON or names no group."""
    if not body:
        return None
    try:
        data = decode_json_body(body)
    except JsonBodyError:  # not UTF-8 or nested too deeply too: answered, never a traceback (issue 31)
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("groupName")
    if not isinstance(name, str) or not name:
        return None
    return SubscriptionGroupConfig.from_json(name, data)


def delete_group(broker: BrokerController, group: str, remove_offset: bool) -> None:
    """``deleteSubscriptionGroupConfig`` (+ ``removeOffset`` when asked)."""
    broker.groups.delete(group)
    if remove_offset:
        broker.offsets.remove_group(group)


def all_groups_json(broker: BrokerController) -> bytes:
    """``SubscriptionGroupManager.encode()``: the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body. Safe off the
    event loop (a snapshot of the table); each group's text kept while its config is the same object,
    the body while the data version and size are unchanged (issue 30)."""
    table = broker.groups
    counter, timestamp, groups = table.ordered_snapshot()
    cache = _WIRE_CACHES.get(table)
    if cache is None:
        cache = _WIRE_CACHES.setdefault(table, _WireCache())
    return cache.body(counter, timestamp, groups)


class _WireCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[SubscriptionGroupConfig, str]] = {}
        self._body: tuple[tuple[int, int, int], bytes] | None = None

    def body(self, counter: int, timestamp: int, groups: dict[str, SubscriptionGroupConfig]) -> bytes:
        key = (counter, timestamp, len(groups))
        with self._lock:
            if self._body is not None and self._body[0] == key:
                return self._body[1]
            entries = []
            kept: dict[str, tuple[SubscriptionGroupConfig, str]] = {}
            # the table's ConcurrentHashMap(1024) order, as its file is written (a HashMap's order
            # parted from it once the map grew: golden many_topics_4.9.7.json.gz)
            for name in groups:
                config = groups[name]
                found = self._entries.get(name)
                if found is not None and found[0] is config:
                    text = found[1]
                else:
                    fields = ",".join(f"{json_text(k)}:{json_text(v)}" for k, v in config.to_json().items())
                    text = f"{json_text(name)}:{{{fields}}}"
                kept[name] = (config, text)
                entries.append(text)
            self._entries = kept
            body = (
                f'{{"dataVersion":{{"counter":{counter},"timestamp":{timestamp}}},'
                f'"subscriptionGroupTable":{{{",".join(entries)}}}}}'
            ).encode()
            self._body = (key, body)
            return body


_WIRE_CACHES: weakref.WeakKeyDictionary[SubscriptionGroupTable, _WireCache] = weakref.WeakKeyDictionary()
