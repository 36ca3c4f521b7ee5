"""The topic table as the admin requests change and report it (``AdminBrokerProcessor``'s topic part).

UPDATE_AND_CREATE_TOPIC puts the config the request describes (read and write queue counts, perm,
filter type, sys flag; the request's ``order`` is not kept, as the broker does not keep it: ordered
topics are a name-server setting) after the name checks of ``topic_validator``; routes follow the
table at once. DELETE_TOPIC_IN_BROKER removes the config (``WritableStore.delete_topic`` says what
stays). GET_ALL_TOPIC_CONFIG answers ``TopicConfigSerializeWrapper`` as ``TopicConfigManager.encode()``
writes it: compact fastjson, ``dataVersion`` then ``topicConfigTable`` in the ``ConcurrentHashMap(1024)``'s
order through its history (``store.config.concurrent_map``), each config's fields sorted.
"""

from __future__ import annotations

import threading
import weakref

from server.broker.topic_validator import admin_topic_refusal, startup_system_topics
from server.broker.writable_store import WritableStore
from store.config.config_file import json_text
from store.config.topics import TopicConfig, TopicTable

#: ``TopicFilterType``'s names.
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


#: The stack frame ``RemotingHelper.exceptionSimpleDesc`` appends to the header check's exception
#: (``CreateTopicRequestHeader.checkFields``, 4.9.7), as the real broker's remark carries it.
_CHECK_FIELDS_FRAME = (
    "org.apache.rocketmq.common.protocol.header."
    + "CreateTopicRequestHeader.checkFields(CreateTopicRequestHeader.java:50)"
)


def filter_type_remark(value: str | None) -> str:
    """The broker's refusal of a missing or unknown ``topicFilterType``: its header decoder runs
    ``checkFields``, whose ``TopicFilterType.valueOf`` failure is wrapped in a RemotingCommandException
    (golden: "create topic: only the topic field")."""
    shown = "null" if value is None else value
    return (
        "org.apache.rocketmq.remoting.exception.RemotingCommandException: "
        f"topicFilterType = [{shown}] value invalid, {_CHECK_FIELDS_FRAME}"
    )


def system_topics(store: WritableStore) -> frozenset[str]:
    return startup_system_topics(store.config.broker_cluster_name, store.config.broker_name)


def header_check_refusal(filter_type: str | None, *, has_fields: bool) -> str | None:
    """Why the broker's header decoder refuses an UPDATE_AND_CREATE_TOPIC, or None.

    It runs ``checkFields`` (the filter type must be a ``TopicFilterType``) before the processor sees
    the request, but only when the request has ext fields at all (``has_fields``): without any, the
    decoder checks nothing and the processor finds the topic null (``update_topic_refusal``: "The
    specified topic is blank.", golden: "create topic: no fields"). The refusal is an exception, so
    it is answered as one (``server.remoting.reply.exception_answer``).
    """
    if has_fields and filter_type not in TOPIC_FILTER_TYPES:
        return filter_type_remark(filter_type)
    return None


def update_topic_refusal(store: WritableStore, topic: str | None) -> str | None:
    """Why UPDATE_AND_CREATE_TOPIC refuses ``topic`` once its header decoded (SYSTEM_ERROR), or None."""
    return admin_topic_refusal(topic, system_topics(store))


def update_topic(
    store: WritableStore,
    topic: str,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    filter_type: str,
    sys_flag: int | None,
    now_ms: int,
) -> TopicConfig:
    """``updateTopicConfig``: put the topic's config (saved soon: ``store.topics_saved``)."""
    config = TopicConfig(
        topic,
        read_queue_nums,
        write_queue_nums,
        perm,
        topic_filter_type=filter_type,
        topic_sys_flag=0 if sys_flag is None else sys_flag,
    )
    store.topics.put(config, now_ms)
    store.topics.save_soon()
    return config


def topic_config_wrapper_json(store: WritableStore) -> bytes:
    """``TopicConfigManager.encode()``: the GET_ALL_TOPIC_CONFIG body. Safe to call off the event loop
    (it reads a snapshot of the table); each topic's text is kept between calls while its config is
    the same object, and the whole body while the table's data version and size are unchanged
    (issue 30: at 50,000 topics the body is megabytes, made from scratch on every request before)."""
    table = store.topics
    counter, timestamp, topics = table.ordered_snapshot()
    cache = _WIRE_CACHES.get(table)
    if cache is None:
        cache = _WIRE_CACHES.setdefault(table, _WireCache())
    return cache.body(counter, timestamp, topics)


class _WireCache:
    """One table's compact texts: per topic, and the last body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[TopicConfig, str]] = {}
        self._body: tuple[tuple[int, int, int], bytes] | None = None

    def body(self, counter: int, timestamp: int, topics: dict[str, TopicConfig]) -> bytes:
        key = (counter, timestamp, len(topics))
        with self._lock:
            if self._body is not None and self._body[0] == key:
                return self._body[1]
            entries = []
            kept: dict[str, tuple[TopicConfig, str]] = {}
            known = self._entries
            # the table's own order: a ConcurrentHashMap(1024) through its history, as its file is
            # written (golden: "all topic config", whose order a HashMap's 16-64 buckets did not give;
            # many_topics_4.9.7.json.gz, where the map grew and its transfer reordered buckets)
            for name in topics:
                config = topics[name]
                found = known.get(name)
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
                f'"topicConfigTable":{{{",".join(entries)}}}}}'
            ).encode()
            self._body = (key, body)
            return body


_WIRE_CACHES: weakref.WeakKeyDictionary[TopicTable, _WireCache] = weakref.WeakKeyDictionary()
