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

from server.broker.topic_validator import admin_topic_refusal, startup_system_topics
from server.broker.writable_store import WritableStore
from store.config.config_file import compact_body_of
from store.config.topics import TopicConfig

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
    (a snapshot of the table, in its own order: a ConcurrentHashMap(1024) through its history, as its
    file is written; golden: "all topic config", and many_topics_4.9.7.json.gz, where the map grew
    and its transfer reordered buckets); texts and body kept (``CompactBody``, issue 30: at 50,000
    topics the body is megabytes, made from scratch on every request before)."""
    table = store.topics
    counter, timestamp, topics = table.ordered_snapshot()
    return compact_body_of(table, "topicConfigTable").body(counter, timestamp, topics)
