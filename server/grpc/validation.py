"""The Proxy's input checks (``GrpcValidator`` and the client's ``Validators``), sans-IO.

Each refusal is a ``GrpcStatusError`` carrying the v2 status code the 5.x Proxy answers with and a
message in its words, so every call answers a bad request with a status in its response (never a
dropped stream or a gRPC error the clients do not read). The rules:

- topic: not blank, at most 127 characters of ``^[%|a-zA-Z0-9_-]+$`` (``Validators.checkTopic``), not a
  system topic (``TopicValidator.isSystemTopic``: the built-in set and the ``rmq_sys_`` prefix):
  ILLEGAL_TOPIC;
- consumer group: not blank, at most 255 of the same characters, not a ``CID_RMQ_SYS_`` group:
  ILLEGAL_CONSUMER_GROUP;
- tag: when not empty, not whitespace only, no ``|``, no ISO control character: ILLEGAL_MESSAGE_TAG;
- key, message group, user properties: the same whitespace and control-character rules
  (ILLEGAL_MESSAGE_KEY, ILLEGAL_MESSAGE_GROUP, ILLEGAL_MESSAGE_PROPERTY_KEY).
"""

from __future__ import annotations

import re

from server.grpc.v2 import Code


class GrpcStatusError(Exception):
    """A request the Proxy refuses: the v2 ``Code`` it answers and the status message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255

#: ``TopicValidator.SYSTEM_TOPIC_SET`` (5.x): topics no 5.x client may route to, send to or consume.
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    }
)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

#: Characters ``Character.isWhitespace`` does not count although Python's ``isspace`` does.
_NOT_JAVA_WHITESPACE = frozenset("\u00a0\u2007\u202f")


def is_blank(text: str) -> bool:
    """``StringUtils.isBlank``: empty or only (Java) whitespace."""
    return all(c.isspace() and c not in _NOT_JAVA_WHITESPACE for c in text)


def has_control_character(text: str) -> bool:
    """``CharMatcher.javaIsoControl``: a character in U+0000..U+001F or U+007F..U+009F."""
    return any(ord(c) <= 0x1F or 0x7F <= ord(c) <= 0x9F for c in text)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def validate_topic(topic: str) -> None:
    """``GrpcValidator.validateTopic``: ILLEGAL_TOPIC for a name no client may use."""
    if is_blank(topic):
        raise GrpcStatusError(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise GrpcStatusError(
            Code.ILLEGAL_TOPIC, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
        )
    if not _VALID_NAME.fullmatch(topic):
        raise GrpcStatusError(
            Code.ILLEGAL_TOPIC,
            f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if is_system_topic(topic):
        raise GrpcStatusError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def validate_consumer_group(group: str) -> None:
    """``GrpcValidator.validateConsumerGroup``: ILLEGAL_CONSUMER_GROUP."""
    if is_blank(group):
        raise GrpcStatusError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if not _VALID_NAME.fullmatch(group):
        raise GrpcStatusError(
            Code.ILLEGAL_CONSUMER_GROUP,
            f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if len(group) > GROUP_MAX_LENGTH:
        raise GrpcStatusError(
            Code.ILLEGAL_CONSUMER_GROUP,
            f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.",
        )
    if group.startswith(SYSTEM_GROUP_PREFIX):
        raise GrpcStatusError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_tag(tag: str) -> None:
    """``GrpcValidator.validateTag``: an empty tag is no tag; otherwise ILLEGAL_MESSAGE_TAG rules."""
    if not tag:
        return
    if is_blank(tag):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if has_control_character(tag):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def validate_key(key: str) -> None:
    """``SendMessageActivity.validateMessageKey``: ILLEGAL_MESSAGE_KEY."""
    if not key:
        return
    if is_blank(key):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if has_control_character(key):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def validate_message_group(group: str, max_size: int) -> None:
    """``SendMessageActivity.validateMessageGroup``: ILLEGAL_MESSAGE_GROUP (``max_size`` in UTF-8
    bytes, exclusive, as the Proxy's ``maxMessageGroupSize``; 0 = no limit)."""
    if not group:
        return
    if is_blank(group):
        raise GrpcStatusError(
            Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    if max_size > 0 and len(group.encode("utf-8", "replace")) >= max_size:
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}")
    if has_control_character(group):
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
