"""Which topic names the broker's admin requests accept (4.9.7's ``TopicValidator``).

UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER refuse, with SYSTEM_ERROR and these remarks, a
blank name, a character outside ``[%|a-zA-Z0-9_-]``, a name over 127 characters, and the system
topics: the fixed set, every topic under ``rmq_sys_``, and those the broker registered as system
topics at start-up (its cluster and broker names, the cluster's reply topic, passed in as
``extra``). Checked in that order, as the broker does.
"""

from __future__ import annotations

from collections.abc import Collection

AUTO_CREATE_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
TOPIC_MAX_LENGTH = 127

BLANK_REMARK = "The specified topic is blank."
ILLEGAL_REMARK = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOO_LONG_REMARK = "The specified topic is longer than topic max length."

_VALID = frozenset("%-_|0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def system_topic_remark(topic: str) -> str:
    return f"The topic[{topic}] is conflict with system topic."


def is_blank(value: str | None) -> bool:
    """``UtilAll.isBlank``: null, empty or only whitespace (Java's ``Character.isWhitespace``)."""
    return value is None or value.strip() == ""


def validate_topic(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic``: None when the name is acceptable, else the broker's remark."""
    if topic is None or is_blank(topic):
        return BLANK_REMARK
    if any(ch not in _VALID for ch in topic):
        return ILLEGAL_REMARK
    # Java counts UTF-16 units; every acceptable character is one unit, so len() agrees here.
    if len(topic) > TOPIC_MAX_LENGTH:
        return TOO_LONG_REMARK
    return None


def is_system_topic(topic: str, extra: Collection[str] = ()) -> bool:
    """``TopicValidator.isSystemTopic``, with the topics the broker added to the set at start-up."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in extra


def startup_system_topics(cluster: str, broker_name: str) -> frozenset[str]:
    """The names ``TopicConfigManager``'s constructor adds to the system set besides the fixed ones."""
    return frozenset({cluster, broker_name, f"{cluster}_REPLY_TOPIC"})


def admin_topic_refusal(topic: str | None, extra: Collection[str] = ()) -> str | None:
    """Why UPDATE_AND_CREATE_TOPIC or DELETE_TOPIC_IN_BROKER refuses ``topic`` (SYSTEM_ERROR), or None."""
    remark = validate_topic(topic)
    if remark is not None:
        return remark
    assert topic is not None
    if is_system_topic(topic, extra):
        return system_topic_remark(topic)
    return None
