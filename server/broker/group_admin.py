"""Subscription-group configs as the admin requests change and report them.

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP takes a ``SubscriptionGroupConfig`` JSON body (fields missing
keep the broker's defaults, as fastjson leaves them) and puts it; the broker checks nothing else.
DELETE_SUBSCRIPTIONGROUP removes the config and, when the request says ``removeOffset``, the group's
committed offsets. GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers the manager as ``encode()`` writes it:
compact fastjson, ``dataVersion`` then ``subscriptionGroupTable``.
"""

from __future__ import annotations

from protocol.errors import JsonBodyError
from protocol.json_body import decode_json_body
from server.broker.controller import BrokerController
from store.config.config_file import compact_body_of
from store.config.subscription_groups import SubscriptionGroupConfig

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
    event loop (a snapshot of the table, in its ConcurrentHashMap(1024) order as its file is written:
    a HashMap's order parted from it once the map grew, golden many_topics_4.9.7.json.gz); texts
    and body kept (``CompactBody``, issue 30)."""
    table = broker.groups
    counter, timestamp, groups = table.ordered_snapshot()
    return compact_body_of(table, "subscriptionGroupTable").body(counter, timestamp, groups)
