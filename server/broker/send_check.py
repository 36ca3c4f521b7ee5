"""The checks a SEND passes before its records are made, and the header they are made from.

``AbstractSendMessageProcessor.msgCheck`` in the broker's order: the topic name (blank, characters,
length), the topics nobody may send to, the topic's config (an unknown topic is created from the
request's default topic when auto-create is on, else TOPIC_NOT_EXIST), the queue id. A refusal is a
``PutRefused`` with the broker's response code and remark, as the store's own refusals in
``put_message`` are, so the processor answers both the same way. Then ``SendMessageProcessor``'s
two rewrites of the header: a negative queue id becomes a random writable queue, and a MULTI_TAG
topic sets the multi-tags sysFlag bit.

These are the broker's decisions, not how it is asked: they live here, beside what the SEND then
stores, with the topic table of the writable store, and the processor only decodes and answers.
"""

from __future__ import annotations

import dataclasses
import random
import re

from protocol.codes import ResponseCode
from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutRefused
from server.broker.writable_store import WritableStore
from store.config.topics import TopicConfig

#: ``TopicValidator``: topic names are ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters.
_VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")
_TOPIC_MAX_LENGTH = 127
#: Topics a producer may not send to (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
BLANK_TOPIC_REMARK = "The specified topic is blank."
_FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_MULTI_TAGS_FLAG = 0x2


def check_send(store: WritableStore, header: SendMessageRequestHeader, born: tuple[str, int]) -> TopicConfig:
    """``msgCheck``: the topic's config (created now if the broker would), or ``PutRefused``."""
    topic = header.topic
    if not topic.strip():
        raise PutRefused(ResponseCode.SYSTEM_ERROR, BLANK_TOPIC_REMARK)
    if not _VALID_TOPIC.fullmatch(topic):
        raise PutRefused(
            ResponseCode.SYSTEM_ERROR,
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if len(topic) > _TOPIC_MAX_LENGTH:
        raise PutRefused(ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length.")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise PutRefused(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    config = store.topic_config(topic)
    if config is None:
        config = store.create_topic_in_send(topic, header.default_topic, header.default_topic_queue_nums)
        if config is None:
            raise PutRefused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ_SUFFIX}"
            )
    if header.queue_id >= max(config.write_queue_nums, config.read_queue_nums):
        raise PutRefused(
            ResponseCode.SYSTEM_ERROR,
            f"request queueId[{header.queue_id}] is illegal, {config.java_string()} "
            f"Producer: {born[0]}:{born[1]}",
        )
    return config


def header_to_store(header: SendMessageRequestHeader, config: TopicConfig) -> SendMessageRequestHeader:
    """The header the records are made from: the queue chosen (a negative id: a random writable
    queue) and the multi-tags bit of a MULTI_TAG topic set; ``queue_id`` is the one answered."""
    queue_id = header.queue_id
    if queue_id < 0:
        queue_id = random.randrange(99_999_999) % max(1, config.write_queue_nums)
    sys_flag = header.sys_flag
    if config.topic_filter_type == "MULTI_TAG":
        sys_flag |= _MULTI_TAGS_FLAG
    if queue_id != header.queue_id or sys_flag != header.sys_flag:
        header = dataclasses.replace(header, queue_id=queue_id, sys_flag=sys_flag)
    return header
