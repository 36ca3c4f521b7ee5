"""The declaration mechanism every typed header uses: Java's field rules, applied by kind.

A toy header declares one field of each kind the real ones use; the expected values are Java's
(``Integer.parseInt``, ``Boolean.parseBoolean``, ``makeCustomHeaderToNet`` leaving nulls out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from protocol.custom_header_fields import (
    HeaderCodec,
    boolean_field,
    custom_header,
    int_field,
    java_parse_int,
    long_field,
    string_field,
)
from protocol.errors import HeaderFieldError


@custom_header
@dataclass(slots=True, frozen=True)
class Toy:
    group: str = string_field("group", required=True)
    count: int = int_field("count")
    offset: int = long_field("offset")
    note: str | None = string_field("note")
    retries: int | None = int_field("retries", required=False, default=None)
    flag: bool = boolean_field("flag", default=False)
    maybe: bool | None = boolean_field("maybe", default=None)


TOY: Any = Toy  # the decorator adds the methods at run time
GOOD = {"group": "g", "count": "7", "offset": "9223372036854775807"}


def test_missing_optional_fields_take_their_java_initial_value() -> None:
    assert TOY.from_ext_fields(GOOD) == Toy("g", 7, (1 << 63) - 1, None, None, False, None)


def test_present_fields_are_parsed_by_kind() -> None:
    fields = {**GOOD, "note": "", "retries": "-3", "flag": "True", "maybe": "yes"}
    assert TOY.from_ext_fields(fields) == Toy("g", 7, (1 << 63) - 1, "", -3, True, False)


@pytest.mark.parametrize("missing", ["group", "count", "offset"])
def test_a_missing_required_field_is_named_in_javas_words(missing: str) -> None:
    with pytest.raises(HeaderFieldError, match=f"^the custom field <{missing}> is null$"):
        TOY.from_ext_fields({k: v for k, v in GOOD.items() if k != missing})


def test_the_first_field_in_declaration_order_is_the_one_named() -> None:
    with pytest.raises(HeaderFieldError) as info:
        TOY.from_ext_fields(None)
    assert info.value.field == "group"
    with pytest.raises(HeaderFieldError) as info:
        TOY.from_ext_fields({"group": "g", "count": "x", "offset": "y"})
    assert info.value.field == "count"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("count", "2147483648", "is not a valid Java int: '2147483648' is out of range"),
        ("retries", "1.5", "is not a valid Java int: '1.5'"),
        ("offset", "9223372036854775808", "is not a valid Java long: '9223372036854775808' is out of range"),
    ],
)
def test_a_value_java_cannot_parse_is_named_with_the_value(field: str, value: str, reason: str) -> None:
    with pytest.raises(HeaderFieldError) as info:
        TOY.from_ext_fields({**GOOD, field: value})
    assert (info.value.field, info.value.reason) == (field, reason)


def test_writing_leaves_nulls_out_and_writes_java_text() -> None:
    fields = TOY(
        group="g", count=-1, offset=5, note=None, retries=None, flag=False, maybe=True
    ).to_ext_fields()
    assert fields == {"group": "g", "count": "-1", "offset": "5", "flag": "false", "maybe": "true"}
    # Java HashMap order of these five keys: buckets (h ^ h >>> 16) & 15 of String.hashCode are
    # flag 3, offset 4, maybe 5, count 8, group 15.
    assert list(fields) == ["flag", "offset", "maybe", "count", "group"]


def test_a_renamed_codec_reads_writes_and_names_fields_as_sent() -> None:
    letters = {
        "group": "G",
        "count": "C",
        "offset": "O",
        "note": "N",
        "retries": "R",
        "flag": "F",
        "maybe": "M",
    }
    codec = HeaderCodec(Toy, renamed=letters)
    header = codec.decode({"G": "g", "C": "1", "O": "2", "F": "true"})
    assert header == Toy("g", 1, 2, None, None, True, None)
    assert codec.encode(header) == {"G": "g", "C": "1", "O": "2", "F": "true"}
    with pytest.raises(HeaderFieldError, match="<O> is null"):
        codec.decode({"G": "g", "C": "1", "offset": "2"})


def test_an_undeclared_field_or_an_own_method_is_refused() -> None:
    with pytest.raises(TypeError, match="not declared"):

        @custom_header
        @dataclass(slots=True, frozen=True)
        class Plain:
            topic: str

    with pytest.raises(TypeError, match="defines to_ext_fields"):

        @custom_header
        @dataclass(slots=True, frozen=True)
        class Own:
            topic: str = string_field("topic")

            def to_ext_fields(self) -> dict[str, str]:
                return {}

    with pytest.raises(TypeError, match="cannot have a default"):
        long_field("offset", default=0)


@pytest.mark.parametrize(
    ("text", "java"),
    [
        # What JDK 17's Integer.parseInt answered for each (run by hand, see RELIABILITY.md).
        ("7", 7),
        ("+7", 7),
        ("-0", 0),
        ("003", 3),
        ("\u0663", 3),  # ARABIC-INDIC DIGIT THREE: Character.digit takes it
        ("2147483647", 2147483647),
        ("-2147483648", -2147483648),
        (" 3", None),
        ("3 ", None),
        ("1_0", None),
        ("2147483648", None),
        ("99999999999", None),
        ("", None),
        ("+", None),
        ("\U0001d7d1", None),  # MATHEMATICAL BOLD DIGIT THREE: two UTF-16 chars, neither a digit
    ],
)
def test_java_parse_int_follows_integer_parse_int(text: str, java: int | None) -> None:
    assert java_parse_int(text) == java


def test_a_header_int_outside_the_bmp_is_refused_as_java_refuses_it() -> None:
    with pytest.raises(HeaderFieldError, match="count"):
        Toy.from_ext_fields({"group": "g", "count": "\U0001d7d1", "offset": "1"})
