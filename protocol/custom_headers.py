"""Typed views of the custom headers the query server reads and writes, carried in ``extFields``.

Java's ``RemotingCommand`` fills a ``CommandCustomHeader`` from ``extFields`` by field name and
writes one back with ``String.valueOf`` of each non-null field. Numbers are Java ``Integer``/``Long``
(``Integer.parseInt``/``Long.parseLong``: an optional sign then decimal digits, in range, nothing
else), booleans are ``Boolean.parseBoolean`` (``"true"`` in any case, everything else false).

A missing ``@CFNotNull`` number raises ``HeaderFieldError`` whose text is Java's own exception
message, ``the custom field <name> is null``; a value Java could not parse raises it with
``is not a valid Java int/long: '...'`` (Java 4.9.7 logs that and continues with null, which ends in
a NullPointerException: the server answers SYSTEM_ERROR naming the field instead). Numbers of any
length are refused cheaply: digits past what a long can hold are counted, never handed to ``int``
(whose 4300-digit limit would raise a ValueError), and an error quotes at most
``QUOTED_CHARACTERS`` characters of the value.

A missing ``@CFNotNull`` *string* is not an error in 4.9.7: ``decodeCommandCustomHeader`` catches
its own "is null" exception, logs it and leaves the field null, and the broker carries on with it
(checked against the real 4.9.7 broker and name server, RELIABILITY.md). So the string fields a
request may leave out are ``None`` here, and the processors use them as Java does (``java_string``:
string concatenation turns null into ``"null"``). Over ROCKETMQ serialization an empty value is
such a null (``protocol.header_rocketmq``); over JSON it stays ``""``.

``to_ext_fields`` returns the fields in Java ``HashMap`` order, so a header built here is
byte-identical to the one the Java broker or client sends.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from protocol.errors import HeaderFieldError
from protocol.java_hashmap import as_java_hashmap

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the extField that turns QUERY_MESSAGE into a unique-key query.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"

# Java's Character.digit(c, 10) accepts every Unicode decimal digit, as does Python's \d on str.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
#: The most plain decimal digits that always fit a Java long (10**18 - 1 < 2**63 - 1).
_LONG_PLAIN_DIGITS = 18


#: Digits after the sign and leading zeros beyond which a value cannot fit a Java long (2^63 has 19).
_MAX_SIGNIFICANT_DIGITS = 19

#: How many characters of a rejected value an error message quotes (a client controls its length).
QUOTED_CHARACTERS = 40


def quote_value(value: str) -> str:
    """``repr(value)``, shortened to ``QUOTED_CHARACTERS`` characters plus the length it had."""
    if len(value) <= QUOTED_CHARACTERS:
        return repr(value)
    return f"{value[:QUOTED_CHARACTERS]!r}... ({len(value)} characters)"


@functools.cache
def _unicode_zeros() -> str:
    """Every character whose decimal value is 0 (Java's ``Character.digit`` accepts them all)."""
    return "".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.decimal(chr(c), -1) == 0)


def _significant_digits(digits: str) -> int:
    """How many digits of ``digits`` (no sign) follow its leading zeros, in any script."""
    rest = digits.lstrip("0")
    if rest and not rest.isascii():
        rest = rest.lstrip(_unicode_zeros())
    return len(rest)


def java_string(value: str | None) -> str:
    """``String.valueOf``: what Java's string concatenation makes of a field left null."""
    return "null" if value is None else value


def _required(ext_fields: Mapping[str, str] | None, name: str) -> str:
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        raise HeaderFieldError(name, "is null")
    return value


def _parse_integer(name: str, value: str, kind: str, bounds: tuple[int, int], plain_digits: int = 9) -> int:
    if len(value) <= plain_digits and value.isascii() and value.isdigit():
        # The common case: up to 9 ASCII digits fit any Java int, up to 18 any long (a CommitLog
        # offset or a millisecond timestamp has 10-13, so longs take this path too).
        return int(value)
    if _JAVA_INTEGER.fullmatch(value) is None:
        raise HeaderFieldError(name, f"is not a valid Java {kind}: {quote_value(value)}")
    # Leading zeros are legal in Java (Long.parseLong("000...7") is 7): only the digits after them
    # decide whether it can fit, and int() must never see thousands of them.
    if len(value) > _MAX_SIGNIFICANT_DIGITS + 1:
        sign = value[0] in "+-"
        if _significant_digits(value[1:] if sign else value) > _MAX_SIGNIFICANT_DIGITS:
            raise HeaderFieldError(name, f"is not a valid Java {kind}: {quote_value(value)} is out of range")
    number = int(value) if len(value) < 4000 else int(_strip_to_int_text(value))
    if not bounds[0] <= number <= bounds[1]:
        raise HeaderFieldError(name, f"is not a valid Java {kind}: {quote_value(value)} is out of range")
    return number


def _strip_to_int_text(value: str) -> str:
    """``value`` (a fitting number padded with thousands of leading zeros) short enough for ``int``."""
    sign = value[0] if value[0] in "+-" else ""
    digits = value[len(sign) :]
    return sign + (digits[len(digits) - _significant_digits(digits) :] or "0")


def _required_int(ext_fields: Mapping[str, str] | None, name: str) -> int:
    return _parse_integer(name, _required(ext_fields, name), "int", _INT_RANGE)


def _required_long(ext_fields: Mapping[str, str] | None, name: str) -> int:
    return _parse_integer(name, _required(ext_fields, name), "long", _LONG_RANGE, _LONG_PLAIN_DIGITS)


def _optional(ext_fields: Mapping[str, str] | None, name: str) -> str | None:
    return ext_fields.get(name) if ext_fields is not None else None


def java_parse_boolean(value: str | None) -> bool:
    """``Boolean.parseBoolean``: true only for ``"true"`` ignoring case."""
    return value is not None and value.lower() == "true"


def java_boolean(value: bool) -> str:
    """``Boolean.toString``."""
    return "true" if value else "false"


def is_unique_key_query(ext_fields: Mapping[str, str] | None) -> bool:
    """Whether a QUERY_MESSAGE asks for a unique key: the broker tests ``"true".equals(flag)``."""
    return ext_fields is not None and ext_fields.get(UNIQUE_KEY_QUERY) == "true"


def with_unique_key_query(ext_fields: Mapping[str, str], unique: bool) -> dict[str, str]:
    """``ext_fields`` plus ``_UNIQUE_KEY_QUERY`` as the Java client adds it
    (``Boolean.toString``), in Java ``HashMap`` order."""
    return as_java_hashmap({**ext_fields, UNIQUE_KEY_QUERY: java_boolean(unique)})


@dataclass(slots=True, frozen=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12) request: every field is ``@CFNotNull``, but a 4.9.7 broker decodes a missing
    (or, over ROCKETMQ, empty) ``topic``/``key`` as null and queries ``"null"`` in its place; a null
    number ends in a NullPointerException (SYSTEM_ERROR)."""

    topic: str | None
    key: str | None
    max_num: int
    begin_timestamp: int
    end_timestamp: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            topic=_optional(ext_fields, "topic"),
            key=_optional(ext_fields, "key"),
            max_num=_required_int(ext_fields, "maxNum"),
            begin_timestamp=_required_long(ext_fields, "beginTimestamp"),
            end_timestamp=_required_long(ext_fields, "endTimestamp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "topic": self.topic,
            "key": self.key,
            "maxNum": str(self.max_num),
            "beginTimestamp": str(self.begin_timestamp),
            "endTimestamp": str(self.end_timestamp),
        }
        # Java sends no null field (makeCustomHeaderToNet skips them).
        return as_java_hashmap({name: value for name, value in fields.items() if value is not None})


@dataclass(slots=True, frozen=True)
class QueryMessageResponseHeader:
    """QUERY_MESSAGE (12) response: both fields ``@CFNotNull``; a Java client drops a broker's
    results when either is missing."""

    index_last_update_timestamp: int
    index_last_update_phyoffset: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            index_last_update_timestamp=_required_long(ext_fields, "indexLastUpdateTimestamp"),
            index_last_update_phyoffset=_required_long(ext_fields, "indexLastUpdatePhyoffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return as_java_hashmap(
            {
                "indexLastUpdateTimestamp": str(self.index_last_update_timestamp),
                "indexLastUpdatePhyoffset": str(self.index_last_update_phyoffset),
            }
        )


@dataclass(slots=True, frozen=True)
class ViewMessageRequestHeader:
    """VIEW_MESSAGE_BY_ID (33) request: ``offset`` is ``@CFNotNull``; 5.x clients add ``topic``,
    which the broker ignores."""

    offset: int
    topic: str | None = None

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            offset=_required_long(ext_fields, "offset"),
            topic=_optional(ext_fields, "topic"),
        )

    @staticmethod
    def offset_from(ext_fields: Mapping[str, str] | None) -> int:
        """Only ``offset``, by the same rules: all the broker reads (no header object per request).

        The plain-digit case of ``_parse_integer`` is repeated inline: it is every real VIEW, and
        the two calls it saves are a tenth of the in-process cost of the request."""
        value = ext_fields.get("offset") if ext_fields is not None else None
        if value is not None and len(value) <= _LONG_PLAIN_DIGITS and value.isascii() and value.isdigit():
            return int(value)
        return _required_long(ext_fields, "offset")

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"offset": str(self.offset)}
        if self.topic is not None:
            fields["topic"] = self.topic
        return as_java_hashmap(fields)


@dataclass(slots=True, frozen=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105) request: ``topic`` is ``@CFNotNull``, yet a 4.9.7 name server
    decodes a missing (or ROCKETMQ-empty) one as null and answers TOPIC_NOT_EXIST for the topic
    ``null``; newer clients add the nullable ``acceptStandardJsonOnly`` (quoted map keys in the route
    JSON)."""

    topic: str | None
    accept_standard_json_only: bool | None = None

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        flag = _optional(ext_fields, "acceptStandardJsonOnly")
        return cls(
            topic=_optional(ext_fields, "topic"),
            accept_standard_json_only=None if flag is None else java_parse_boolean(flag),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {} if self.topic is None else {"topic": self.topic}
        if self.accept_standard_json_only is not None:
            fields["acceptStandardJsonOnly"] = java_boolean(self.accept_standard_json_only)
        return as_java_hashmap(fields)


@dataclass(slots=True, frozen=True)
class QueueRequestHeader:
    """GET_MIN_OFFSET (31), GET_MAX_OFFSET (30) and GET_EARLIEST_MSG_STORETIME (32) requests: the
    three Java classes have the same two ``@CFNotNull`` fields, ``topic`` and ``queueId``."""

    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(topic=_required(ext_fields, "topic"), queue_id=_required_int(ext_fields, "queueId"))

    def to_ext_fields(self) -> dict[str, str]:
        return as_java_hashmap({"topic": self.topic, "queueId": str(self.queue_id)})


@dataclass(slots=True, frozen=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29) request: ``topic``, ``queueId``, ``timestamp``, all ``@CFNotNull``."""

    topic: str
    queue_id: int
    timestamp: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            topic=_required(ext_fields, "topic"),
            queue_id=_required_int(ext_fields, "queueId"),
            timestamp=_required_long(ext_fields, "timestamp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return as_java_hashmap(
            {"topic": self.topic, "queueId": str(self.queue_id), "timestamp": str(self.timestamp)}
        )


def offset_response_fields(offset: int) -> dict[str, str]:
    """The one-field answer of GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and
    QUERY_CONSUMER_OFFSET (``offset``, a Java ``Long``)."""
    return {"offset": str(offset)}


def timestamp_response_fields(timestamp: int) -> dict[str, str]:
    """GET_EARLIEST_MSG_STORETIME's answer (``GetEarliestMsgStoretimeResponseHeader.timestamp``)."""
    return {"timestamp": str(timestamp)}


def read_offset(ext_fields: Mapping[str, str] | None) -> int:
    """``offset`` of an offset answer (client side)."""
    return _required_long(ext_fields, "offset")


def read_timestamp(ext_fields: Mapping[str, str] | None) -> int:
    """``timestamp`` of GET_EARLIEST_MSG_STORETIME's answer (client side)."""
    return _required_long(ext_fields, "timestamp")


#: ``PullSysFlag`` bits.
PULL_COMMIT_OFFSET_FLAG = 0x1
PULL_SUSPEND_FLAG = 0x2
PULL_SUBSCRIPTION_FLAG = 0x4
PULL_CLASS_FILTER_FLAG = 0x8


@dataclass(slots=True, frozen=True)
class PullMessageRequestHeader:
    """PULL_MESSAGE (11) request: every field ``@CFNotNull`` but ``subscription`` and ``expressionType``."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            consumer_group=_required(ext_fields, "consumerGroup"),
            topic=_required(ext_fields, "topic"),
            queue_id=_required_int(ext_fields, "queueId"),
            queue_offset=_required_long(ext_fields, "queueOffset"),
            max_msg_nums=_required_int(ext_fields, "maxMsgNums"),
            sys_flag=_required_int(ext_fields, "sysFlag"),
            commit_offset=_required_long(ext_fields, "commitOffset"),
            suspend_timeout_millis=_required_long(ext_fields, "suspendTimeoutMillis"),
            sub_version=_required_long(ext_fields, "subVersion"),
            subscription=_optional(ext_fields, "subscription"),
            expression_type=_optional(ext_fields, "expressionType"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
            "maxMsgNums": str(self.max_msg_nums),
            "sysFlag": str(self.sys_flag),
            "commitOffset": str(self.commit_offset),
            "suspendTimeoutMillis": str(self.suspend_timeout_millis),
            "subVersion": str(self.sub_version),
        }
        if self.subscription is not None:
            fields["subscription"] = self.subscription
        if self.expression_type is not None:
            fields["expressionType"] = self.expression_type
        return as_java_hashmap(fields)

    @property
    def has_suspend_flag(self) -> bool:
        return bool(self.sys_flag & PULL_SUSPEND_FLAG)

    @property
    def has_subscription_flag(self) -> bool:
        return bool(self.sys_flag & PULL_SUBSCRIPTION_FLAG)


@dataclass(slots=True, frozen=True)
class PullMessageResponseHeader:
    """PULL_MESSAGE (11) response: four ``@CFNotNull`` Longs (absent on the broker's early errors)."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            suggest_which_broker_id=_required_long(ext_fields, "suggestWhichBrokerId"),
            next_begin_offset=_required_long(ext_fields, "nextBeginOffset"),
            min_offset=_required_long(ext_fields, "minOffset"),
            max_offset=_required_long(ext_fields, "maxOffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return as_java_hashmap(
            {
                "suggestWhichBrokerId": str(self.suggest_which_broker_id),
                "nextBeginOffset": str(self.next_begin_offset),
                "minOffset": str(self.min_offset),
                "maxOffset": str(self.max_offset),
            }
        )


@dataclass(slots=True, frozen=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14) request: ``consumerGroup``, ``topic``, ``queueId``, all ``@CFNotNull``."""

    consumer_group: str
    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            consumer_group=_required(ext_fields, "consumerGroup"),
            topic=_required(ext_fields, "topic"),
            queue_id=_required_int(ext_fields, "queueId"),
        )


def required_string(ext_fields: Mapping[str, str] | None, name: str) -> str:
    """A ``@CFNotNull`` String field (``GetTopicStatsInfoRequestHeader.topic``,
    ``GetConsumerListByGroupRequestHeader.consumerGroup``)."""
    return _required(ext_fields, name)
