"""REQUEST-REPLY on the wire: the header of PUSH_REPLY_MESSAGE_TO_CLIENT and the reply properties.

A 4.x producer's ``request(msg, timeout)`` sends an ordinary SEND whose properties name the
requesting client (``REPLY_TO_CLIENT``, its client id) and the request (``CORRELATION_ID``). The
consumer answers with ``MessageUtil.createReplyMessage``: a message to ``<cluster>_REPLY_TOPIC``
carrying both properties and ``MSG_TYPE=reply``, which the client sends as SEND_REPLY_MESSAGE (324,
the long SEND header) or SEND_REPLY_MESSAGE_V2 (325, the one-letter one). The broker pushes it to the
requesting client's connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326) with a
``ReplyMessageRequestHeader``: the SEND header's fields plus where the reply came from and when the
broker took it; the body is the reply's body as sent. The client matches it to its waiting request by
``CORRELATION_ID`` and answers SUCCESS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.custom_header_fields import (
    boolean_field,
    custom_header,
    int_field,
    java_parse_int,
    java_parse_long,
    long_field,
    string_field,
)

#: ``MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT``: the client id of the requester.
PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
#: ``MessageConst.PROPERTY_CORRELATION_ID``: which request a reply answers.
PROPERTY_CORRELATION_ID = "CORRELATION_ID"
#: ``MessageConst.PROPERTY_PUSH_REPLY_TIME``: put by the broker when it pushes the reply (ms).
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
#: ``MessageConst.PROPERTY_MESSAGE_TYPE``; ``MixAll.REPLY_MESSAGE_FLAG`` marks a reply.
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
REPLY_MESSAGE_FLAG = "reply"
#: ``MixAll.REPLY_TOPIC_POSTFIX``.
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


#: ``SendMessageRequestHeaderV2.decode``'s numbers, in the order it parses them.
_V2_NUMBERS = (
    ("d", False),
    ("e", False),
    ("f", False),
    ("g", True),
    ("h", False),
    ("j", False),
    ("l", False),
)


def v2_number_java_refuses(ext_fields: Mapping[str, str]) -> str | None:
    """The first value of a one-letter SEND header that ``SendMessageRequestHeaderV2.decode``
    (the reply's decode: a ``FastCodesHeader``) would throw ``NumberFormatException`` on, or None.

    That decode only logs a missing field and parses each present number with
    ``Integer.parseInt``/``Long.parseLong``, which throw: the broker then answers the bare
    SYSTEM_ERROR of an exception. (4.9.7's reflective decode of the long header catches its own
    errors and leaves the field null.)"""
    for name, is_long in _V2_NUMBERS:
        value = ext_fields.get(name)
        if value is not None and (java_parse_long(value) if is_long else java_parse_int(value)) is None:
            return value
    return None


def reply_topic(cluster: str) -> str:
    """``MixAll.getReplyTopic``: the topic replies of a cluster are sent to."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


@custom_header
@dataclass(slots=True, frozen=True)
class ReplyMessageRequestHeader:
    """``ReplyMessageRequestHeader``, fields in its declaration order (``to_ext_fields`` gives them in
    ``HashMap`` order, as the broker's JSON header carries them)."""

    producer_group: str = string_field("producerGroup", required=True)
    topic: str = string_field("topic", required=True)
    default_topic: str = string_field("defaultTopic", required=True)
    default_topic_queue_nums: int = int_field("defaultTopicQueueNums")
    queue_id: int = int_field("queueId")
    sys_flag: int = int_field("sysFlag")
    born_timestamp: int = long_field("bornTimestamp")
    flag: int = int_field("flag")
    # No Python defaults: the required fields below follow these in Java's declaration order.
    properties: str | None = string_field("properties")
    reconsume_times: int | None = int_field("reconsumeTimes", required=False)
    #: A Java ``boolean``: always sent (None only when read from a header that lacks it).
    unit_mode: bool | None = boolean_field("unitMode")
    #: The replier's address, ``ip:port``.
    born_host: str = string_field("bornHost", required=True)
    #: The broker's store host, ``ip:port``.
    store_host: str = string_field("storeHost", required=True)
    store_timestamp: int = long_field("storeTimestamp")
