"""Typed views of the custom headers the query server reads and writes, carried in ``extFields``.

Java's ``RemotingCommand`` fills a ``CommandCustomHeader`` from ``extFields`` by field name and
writes one back with ``String.valueOf`` of each non-null field. Numbers are Java ``Integer``/``Long``
(``Integer.parseInt``/``Long.parseLong``: an optional sign then decimal digits, in range, nothing
else), booleans are ``Boolean.parseBoolean`` (``"true"`` in any case, everything else false).

A missing ``@CFNotNull`` field raises ``HeaderFieldError`` whose text is Java's own exception
message, ``the custom field <name> is null``; a value Java could not parse raises it with
``is not a valid Java int/long: '...'`` (Java 4.9.7 logs that and continues with null, which ends in
a NullPointerException: the server answers SYSTEM_ERROR with the message instead).

``to_ext_fields`` returns the fields in Java ``HashMap`` order, so a header built here is
byte-identical to the one the Java broker or client sends.
"""

from __future__ import annotations

import re
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


def _required(ext_fields: Mapping[str, str] | None, name: str) -> str:
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        raise HeaderFieldError(name, "is null")
    return value


def _parse_integer(name: str, value: str, kind: str, bounds: tuple[int, int]) -> int:
    if len(value) < 10 and value.isascii() and value.isdigit():
        return int(value)  # the common case: at most 9 ASCII digits fit any Java int or long
    if _JAVA_INTEGER.fullmatch(value) is None:
        raise HeaderFieldError(name, f"is not a valid Java {kind}: {value!r}")
    number = int(value)
    if not bounds[0] <= number <= bounds[1]:
        raise HeaderFieldError(name, f"is not a valid Java {kind}: {value!r} is out of range")
    return number


def _required_int(ext_fields: Mapping[str, str] | None, name: str) -> int:
    return _parse_integer(name, _required(ext_fields, name), "int", _INT_RANGE)


def _required_long(ext_fields: Mapping[str, str] | None, name: str) -> int:
    return _parse_integer(name, _required(ext_fields, name), "long", _LONG_RANGE)


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
    """QUERY_MESSAGE (12) request: every field is ``@CFNotNull``."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        return cls(
            topic=_required(ext_fields, "topic"),
            key=_required(ext_fields, "key"),
            max_num=_required_int(ext_fields, "maxNum"),
            begin_timestamp=_required_long(ext_fields, "beginTimestamp"),
            end_timestamp=_required_long(ext_fields, "endTimestamp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return as_java_hashmap(
            {
                "topic": self.topic,
                "key": self.key,
                "maxNum": str(self.max_num),
                "beginTimestamp": str(self.begin_timestamp),
                "endTimestamp": str(self.end_timestamp),
            }
        )


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
        """Only ``offset``, by the same rules: all the broker reads (no header object per request)."""
        return _required_long(ext_fields, "offset")

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"offset": str(self.offset)}
        if self.topic is not None:
            fields["topic"] = self.topic
        return as_java_hashmap(fields)


@dataclass(slots=True, frozen=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105) request: ``topic`` is ``@CFNotNull``; newer clients add the
    nullable ``acceptStandardJsonOnly`` (quoted map keys in the route JSON)."""

    topic: str
    accept_standard_json_only: bool | None = None

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str] | None) -> Self:
        flag = _optional(ext_fields, "acceptStandardJsonOnly")
        return cls(
            topic=_required(ext_fields, "topic"),
            accept_standard_json_only=None if flag is None else java_parse_boolean(flag),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"topic": self.topic}
        if self.accept_standard_json_only is not None:
            fields["acceptStandardJsonOnly"] = java_boolean(self.accept_standard_json_only)
        return as_java_hashmap(fields)
