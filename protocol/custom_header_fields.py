"""How Java's ``RemotingCommand`` reads a ``CommandCustomHeader`` from ``extFields`` and writes one back.

Every typed header (``protocol.custom_headers``, ``protocol.send_message``) is a dataclass whose fields
are declared here (``string_field``, ``int_field``, ``long_field``, ``boolean_field``); ``custom_header``
gives it ``from_ext_fields``/``to_ext_fields`` that follow the rules below, so each rule is written once.

Reading (``decodeCommandCustomHeader``): a field is found by its Java name. Numbers are Java
``Integer``/``Long`` (``Integer.parseInt``/``Long.parseLong``: an optional sign then decimal digits,
in range, nothing else), booleans are ``Boolean.parseBoolean`` (``"true"`` in any case, everything
else false).

A missing ``@CFNotNull`` number raises ``HeaderFieldError`` whose text is Java's own exception
message, ``the custom field <name> is null``; a value Java could not parse raises it with
``is not a valid Java int/long: '...'`` (Java 4.9.7 logs that and continues with null, which ends in
a NullPointerException: the server answers SYSTEM_ERROR naming the field instead). Numbers of any
length are refused cheaply: digits past what a long can hold are counted, never handed to ``int``
(whose 4300-digit limit would raise a ValueError), and an error quotes at most
``QUOTED_CHARACTERS`` characters of the value.

A missing ``@CFNotNull`` *string* is not an error in 4.9.7: ``decodeCommandCustomHeader`` catches
its own "is null" exception, logs it and leaves the field null, and the broker carries on with it
(checked against the real 4.9.7 broker and name server, RELIABILITY.md). So a string field is
``None`` when missing unless declared ``required`` (a processor that cannot go on without it), and
the processors use a null as Java does (``java_string``: string concatenation turns null into
``"null"``). Over ROCKETMQ serialization an empty value is such a null (``protocol.header_rocketmq``);
over JSON it stays ``""``. A missing optional field keeps the Java field's initial value (null, or
the declared ``default``, e.g. ``false`` for ``SendMessageRequestHeader.batch``).

Writing (``makeCustomHeaderToNet``): ``String.valueOf`` of each non-null field, none for a null one,
in Java ``HashMap`` order, so a header built here is byte-identical to the one the Java broker or
client sends.

Writing over ROCKETMQ serialization differs for the headers that are ``FastCodesHeader`` in 4.9.7
(``SendMessageResponseHeader``, ``PullMessageResponseHeader``): their ``encode`` writes their own
fields first, in declaration order, then the ext fields added beside them in HashMap order
(``RocketMQSerializable.rocketMQProtocolEncode``); ``fast_codes_order`` puts them so. Over JSON they
are one HashMap (golden: ``tests/server/golden/consume_side_broker_4.9.7.json``, the SEND and PULL
answers of both runs).

The decoder of each header is generated once from its declaration (as ``dataclasses`` generates
``__init__``): a request pays for one call per field, not for a loop over the declaration. The
QUERY_MESSAGE and VIEW_MESSAGE_BY_ID headers are parsed per request at >100k requests/s.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import types
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from protocol.codes import SerializeType
from protocol.errors import HeaderFieldError
from protocol.java_hashmap import as_java_hashmap

# Java's Character.digit(c, 10) accepts every Unicode decimal digit of the BMP, as does Python's \d
# on str; parseInt reads UTF-16 chars, so a digit outside the BMP (a surrogate pair, e.g. U+1D7D1)
# is two non-digits to Java, while \d alone would take it.
_JAVA_INTEGER = re.compile(r"[+-]?(?:(?![\U00010000-\U0010FFFF])\d)+")
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
#: The most plain decimal digits that always fit a Java int (10**9 - 1 < 2**31 - 1).
_INT_PLAIN_DIGITS = 9
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


def java_string(value: str | None) -> str:
    """``String.valueOf``: what Java's string concatenation makes of a field left null."""
    return "null" if value is None else value


def java_parse_boolean(value: str | None) -> bool:
    """``Boolean.parseBoolean``: true only for ``"true"`` ignoring case."""
    return value is not None and value.lower() == "true"


def java_boolean(value: bool) -> str:
    """``Boolean.toString``."""
    return "true" if value else "false"


# -- Java Integer / Long ---------------------------------------------------------------------------


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


def _strip_to_int_text(value: str) -> str:
    """``value`` (a fitting number padded with thousands of leading zeros) short enough for ``int``."""
    sign = value[0] if value[0] in "+-" else ""
    digits = value[len(sign) :]
    return sign + (digits[len(digits) - _significant_digits(digits) :] or "0")


def parse_java_integer(
    name: str, value: str, kind: str, bounds: tuple[int, int], plain_digits: int = _INT_PLAIN_DIGITS
) -> int:
    """``Integer.parseInt``/``Long.parseLong`` of field ``name`` (``kind`` "int" or "long", in
    ``bounds``); ``HeaderFieldError`` naming the field for anything Java would not parse."""
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


def java_parse_int(value: str) -> int | None:
    """``Integer.parseInt(value)``, or None where Java throws ``NumberFormatException`` (a space, an
    underscore, a digit outside the BMP, nothing but a sign, out of int range, empty).

    For message properties (``DELAY``, ``REAL_QID``) that the broker reads with ``Integer.parseInt``:
    Python's ``int`` takes ``" 3"``, ``"1_0"`` and any size, so it must never decide them.
    """
    try:
        return parse_java_integer("", value, "int", _INT_RANGE)
    except HeaderFieldError:
        return None


def java_parse_long(value: str) -> int | None:
    """``Long.parseLong(value)``, or None where Java throws ``NumberFormatException`` (the rules of
    ``java_parse_int`` over the long range): for the 5.x timer properties (``TIMER_DELIVER_MS``) and
    the reply headers' longs."""
    try:
        return parse_java_integer("", value, "long", _LONG_RANGE, _LONG_PLAIN_DIGITS)
    except HeaderFieldError:
        return None


# -- one field read from extFields -----------------------------------------------------------------
# Each reader takes (ext_fields, name[, missing]). The required number readers repeat the plain-digit
# test of ``parse_java_integer`` inline: they run per request, and the call saved is a third of a VIEW.


def required_string(ext_fields: Mapping[str, str] | None, name: str) -> str:
    """A string field the processor cannot do without: missing is ``the custom field <name> is null``."""
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        raise HeaderFieldError(name, "is null")
    return value


def optional_string(
    ext_fields: Mapping[str, str] | None, name: str, missing: str | None = None
) -> str | None:
    """A string field (``missing`` when absent: Java leaves the field as it was initialised)."""
    value = ext_fields.get(name) if ext_fields is not None else None
    return missing if value is None else value


def required_int(ext_fields: Mapping[str, str] | None, name: str) -> int:
    """A ``@CFNotNull`` Java ``Integer``."""
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        raise HeaderFieldError(name, "is null")
    if len(value) <= _INT_PLAIN_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    return parse_java_integer(name, value, "int", _INT_RANGE)


def required_long(ext_fields: Mapping[str, str] | None, name: str) -> int:
    """A ``@CFNotNull`` Java ``Long``."""
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        raise HeaderFieldError(name, "is null")
    if len(value) <= _LONG_PLAIN_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    return parse_java_integer(name, value, "long", _LONG_RANGE, _LONG_PLAIN_DIGITS)


def optional_int(ext_fields: Mapping[str, str] | None, name: str, missing: int | None = None) -> int | None:
    """A nullable Java ``Integer``: ``missing`` when absent, else parsed as strictly as a required one."""
    value = ext_fields.get(name) if ext_fields is not None else None
    return missing if value is None else parse_java_integer(name, value, "int", _INT_RANGE)


def optional_long(ext_fields: Mapping[str, str] | None, name: str, missing: int | None = None) -> int | None:
    """A nullable Java ``Long``: ``missing`` when absent, else parsed as strictly as a required one."""
    value = ext_fields.get(name) if ext_fields is not None else None
    if value is None:
        return missing
    return parse_java_integer(name, value, "long", _LONG_RANGE, _LONG_PLAIN_DIGITS)


def optional_boolean(
    ext_fields: Mapping[str, str] | None, name: str, missing: bool | None = None
) -> bool | None:
    """A Java ``Boolean``: ``missing`` when absent, else ``Boolean.parseBoolean``."""
    value = ext_fields.get(name) if ext_fields is not None else None
    return missing if value is None else java_parse_boolean(value)


# -- declarations ----------------------------------------------------------------------------------

STRING: Final = "string"
INT: Final = "int"
LONG: Final = "long"
BOOLEAN: Final = "boolean"

#: (kind, required) -> the reader of such a field. A required boolean has no use in these headers.
_READERS: dict[tuple[str, bool], Callable[..., Any]] = {
    (STRING, True): required_string,
    (STRING, False): optional_string,
    (INT, True): required_int,
    (INT, False): optional_int,
    (LONG, True): required_long,
    (LONG, False): optional_long,
    (BOOLEAN, False): optional_boolean,
}

#: kind -> ``String.valueOf`` of a non-null value of that kind.
_WRITERS: dict[str, Callable[[Any], str]] = {STRING: str, INT: str, LONG: str, BOOLEAN: java_boolean}

_SPEC = "java_field"


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one dataclass field sits in ``extFields``: its Java name, kind, and whether missing is an error."""

    name: str
    kind: str
    required: bool


def _declare(name: str, kind: str, required: bool, default: Any) -> Any:
    if (kind, required) not in _READERS:
        raise TypeError(f"no reader for a {'required' if required else 'optional'} {kind} field")
    if required and default is not dataclasses.MISSING:
        raise TypeError(f"required field {name} cannot have a default")
    return dataclasses.field(default=default, metadata={_SPEC: FieldSpec(name, kind, required)})


def string_field(name: str, *, required: bool = False, default: Any = dataclasses.MISSING) -> Any:
    """A ``String`` field: ``None`` when missing (4.9.7), unless ``required``."""
    return _declare(name, STRING, required, default)


def int_field(name: str, *, required: bool = True, default: Any = dataclasses.MISSING) -> Any:
    """An ``Integer`` field (``@CFNotNull`` unless ``required=False``: then ``None`` when missing)."""
    return _declare(name, INT, required, default)


def long_field(name: str, *, required: bool = True, default: Any = dataclasses.MISSING) -> Any:
    """A ``Long`` field (``@CFNotNull`` unless ``required=False``: then ``None`` when missing)."""
    return _declare(name, LONG, required, default)


def boolean_field(name: str, *, default: Any = dataclasses.MISSING) -> Any:
    """A ``Boolean`` field: ``default`` (else ``None``) when missing, ``Boolean.parseBoolean`` otherwise."""
    return _declare(name, BOOLEAN, False, default)


# -- the codec of one header class -----------------------------------------------------------------


class HeaderCodec:
    """``extFields`` <-> one header class, under its Java names or a renaming (the one-letter names of
    ``SendMessageRequestHeaderV2``); an error names the field as the request did."""

    def __init__(self, cls: type, renamed: Mapping[str, str] | None = None) -> None:
        namespace: dict[str, object] = {}
        calls: list[str] = []
        self._writes: list[tuple[str, str, Callable[[Any], str]]] = []
        for i, f in enumerate(dataclasses.fields(cls)):
            spec = f.metadata.get(_SPEC)
            if not isinstance(spec, FieldSpec) or not f.init:
                raise TypeError(f"{cls.__name__}.{f.name} is not declared as a Java header field")
            name = renamed[spec.name] if renamed is not None else spec.name
            namespace[f"read{i}"] = _READERS[spec.kind, spec.required]
            call = f"read{i}(ext_fields, {name!r}"
            if not spec.required and f.default is not dataclasses.MISSING and f.default is not None:
                namespace[f"missing{i}"] = f.default
                call += f", missing{i}"
            calls.append(call + ")")
            self._writes.append((f.name, name, _WRITERS[spec.kind]))
        # One positional call per field, in declaration order (which is also the order Java reads
        # them in, so the first missing or bad field is the one named).
        source = f"def from_ext_fields(cls, ext_fields):\n    return cls({', '.join(calls)})\n"
        exec(compile(source, f"<{cls.__name__} decoder>", "exec"), namespace)
        generated = namespace["from_ext_fields"]
        generated.__doc__ = f"{cls.__name__} from extFields, as Java reads it (``custom_header_fields``)."
        generated.__qualname__ = f"{cls.__name__}.from_ext_fields"
        #: ``from_ext_fields(cls, ext_fields)``, to be a classmethod of the header.
        self.from_ext_fields: Callable[[type, Mapping[str, str] | None], Any] = generated  # type: ignore[assignment]
        #: The same, bound to ``cls``.
        self.decode: Callable[[Mapping[str, str] | None], Any] = types.MethodType(generated, cls)  # type: ignore[arg-type]

    def values(self, header: object) -> dict[str, str]:
        """``String.valueOf`` of each non-null field, in declaration order (not yet Java's order)."""
        fields: dict[str, str] = {}
        for attr, name, write in self._writes:
            value = getattr(header, attr)
            if value is not None:
                fields[name] = write(value)
        return fields

    def encode(self, header: object) -> dict[str, str]:
        """The header's extFields as Java sends them: no null field, in Java ``HashMap`` order."""
        return as_java_hashmap(self.values(header))


_Header = TypeVar("_Header", bound=type)


def custom_header(cls: _Header) -> _Header:
    """Give a header dataclass (every field declared above) ``from_ext_fields(ext_fields)`` and
    ``to_ext_fields()``."""
    for method in ("from_ext_fields", "to_ext_fields"):
        if method in vars(cls):
            raise TypeError(f"{cls.__name__} defines {method}: use a HeaderCodec for a header so shaped")
    codec = HeaderCodec(cls)

    def to_ext_fields(self: object) -> dict[str, str]:
        return codec.encode(self)

    to_ext_fields.__doc__ = "The extFields Java would send for this header: no null field, HashMap order."
    to_ext_fields.__qualname__ = f"{cls.__name__}.to_ext_fields"
    cls.from_ext_fields = classmethod(codec.from_ext_fields)  # type: ignore[attr-defined]
    cls.to_ext_fields = to_ext_fields  # type: ignore[attr-defined]
    return cls


def fast_codes_order(fields: dict[str, str], fast_keys: Sequence[str], serialize_type: int) -> dict[str, str]:
    """An answer's ext fields in the order the broker writes them for a ``FastCodesHeader``: over
    ROCKETMQ the header's ``fast_keys`` first (those present, in ``encode``'s order), then the rest in
    the order given; over JSON unchanged."""
    if serialize_type != SerializeType.ROCKETMQ:
        return fields
    ordered = {key: fields[key] for key in fast_keys if key in fields}
    ordered.update((key, value) for key, value in fields.items() if key not in ordered)
    return ordered
