"""Typed custom headers read from and written to extFields with Java's conventions."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.codes import ResponseCode
from protocol.custom_headers import (
    UNIQUE_KEY_QUERY,
    GetRouteInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    is_unique_key_query,
    java_boolean,
    java_parse_boolean,
    with_unique_key_query,
)
from protocol.errors import HeaderFieldError
from protocol.frame import decode_frame, encode_frame

LONG_MAX = (1 << 63) - 1


def test_query_message_request_from_the_java_vector(vectors_by_name: dict, vectors_dir: Path) -> None:
    for name in ("query_message.json", "query_message.rocketmq", "query_message_unicode.rocketmq"):
        vector = vectors_by_name[name]
        cmd = decode_frame((vectors_dir / vector["file"]).read_bytes())
        header = QueryMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        inputs = vector["inputs"]
        assert header == QueryMessageRequestHeader(
            topic=inputs["topic"],
            key=inputs["key"],
            max_num=inputs["maxNum"],
            begin_timestamp=inputs["beginTimestamp"],
            end_timestamp=inputs["endTimestamp"],
        )
        assert header.end_timestamp == LONG_MAX or name.endswith("unicode.rocketmq")


def test_query_message_request_is_written_like_the_java_client(
    vectors_by_name: dict, vectors_dir: Path
) -> None:
    for name in ("query_message.json", "query_message_uniq_false.rocketmq", "query_message_uniq_true.json"):
        vector = vectors_by_name[name]
        data = (vectors_dir / vector["file"]).read_bytes()
        request = decode_frame(data)
        fields = QueryMessageRequestHeader.from_ext_fields(request.ext_fields).to_ext_fields()
        flag = vector["inputs"].get("extra_UNIQUE_KEY_QUERY")
        if flag is None and UNIQUE_KEY_QUERY in request.ext_fields:
            flag = request.ext_fields[UNIQUE_KEY_QUERY]
        if flag is not None:
            fields = with_unique_key_query(fields, flag in (True, "true"))
        request.ext_fields = fields
        assert encode_frame(request) == data, name


def test_query_message_response_header_both_ways(vectors_by_name: dict, vectors_dir: Path) -> None:
    for name in ("resp_query_message_success.json", "resp_query_not_found.rocketmq"):
        vector = vectors_by_name[name]
        data = (vectors_dir / vector["file"]).read_bytes()
        response = decode_frame(data)
        header = QueryMessageResponseHeader.from_ext_fields(response.ext_fields)
        assert header.index_last_update_timestamp == int(vector["extFields"]["indexLastUpdateTimestamp"])
        assert header.index_last_update_phyoffset == int(vector["extFields"]["indexLastUpdatePhyoffset"])
        rebuilt = response.make_response(
            response.code, response.remark, header.to_ext_fields(), response.body
        )
        assert encode_frame(rebuilt) == data, name
    not_found = QueryMessageResponseHeader(0, 0).to_ext_fields()
    assert not_found == {"indexLastUpdatePhyoffset": "0", "indexLastUpdateTimestamp": "0"}
    assert list(not_found) == ["indexLastUpdatePhyoffset", "indexLastUpdateTimestamp"]
    assert ResponseCode.QUERY_NOT_FOUND == 22


def test_view_message_request(vectors_by_name: dict, vectors_dir: Path) -> None:
    vector = vectors_by_name["view_message_by_id.json"]
    data = (vectors_dir / vector["file"]).read_bytes()
    cmd = decode_frame(data)
    header = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert header == ViewMessageRequestHeader(offset=4412154)
    cmd.ext_fields = header.to_ext_fields()
    assert encode_frame(cmd) == data
    v5 = ViewMessageRequestHeader.from_ext_fields({"offset": "17457", "topic": "TopicA"})
    assert v5 == ViewMessageRequestHeader(offset=17457, topic="TopicA")
    assert v5.to_ext_fields() == {"offset": "17457", "topic": "TopicA"}
    assert list(v5.to_ext_fields()) == ["offset", "topic"]  # HashMap order, as the 5.x client sent it


def test_get_route_info_request(vectors_by_name: dict, vectors_dir: Path) -> None:
    vector = vectors_by_name["get_routeinfo_by_topic.rocketmq"]
    data = (vectors_dir / vector["file"]).read_bytes()
    cmd = decode_frame(data)
    header = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
    assert header == GetRouteInfoRequestHeader(topic="TopicA", accept_standard_json_only=True)
    cmd.ext_fields = header.to_ext_fields()
    assert encode_frame(cmd) == data
    old = GetRouteInfoRequestHeader.from_ext_fields({"topic": "TBW102"})
    assert old.accept_standard_json_only is None and old.to_ext_fields() == {"topic": "TBW102"}
    assert GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "TRUE"}) == (
        GetRouteInfoRequestHeader("T", True)
    )
    assert GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "yes"}) == (
        GetRouteInfoRequestHeader("T", False)
    )


_GOOD_QUERY = {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}


@pytest.mark.parametrize("field", ["maxNum", "beginTimestamp", "endTimestamp"])
def test_missing_required_field_names_it_like_java(field: str) -> None:
    fields = {k: v for k, v in _GOOD_QUERY.items() if k != field}
    with pytest.raises(HeaderFieldError) as info:
        QueryMessageRequestHeader.from_ext_fields(fields)
    assert info.value.field == field
    assert str(info.value) == f"the custom field <{field}> is null"


@pytest.mark.parametrize("field", ["topic", "key"])
def test_a_missing_string_field_is_null_as_in_java_4_9_7(field: str) -> None:
    """4.9.7's decoder logs the missing ``@CFNotNull`` string and carries on with null."""
    header = QueryMessageRequestHeader.from_ext_fields({k: v for k, v in _GOOD_QUERY.items() if k != field})
    assert getattr(header, field) is None
    assert field not in header.to_ext_fields()  # Java sends no null field


def test_no_ext_fields_at_all_is_a_missing_field() -> None:
    for header_type, first in (
        (QueryMessageRequestHeader, "maxNum"),
        (QueryMessageResponseHeader, "indexLastUpdateTimestamp"),
        (ViewMessageRequestHeader, "offset"),
    ):
        with pytest.raises(HeaderFieldError) as info:
            header_type.from_ext_fields(None)
        assert info.value.field == first
    assert GetRouteInfoRequestHeader.from_ext_fields(None).topic is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxNum", ""),
        ("maxNum", "abc"),
        ("maxNum", "1.5"),
        ("maxNum", " 32"),
        ("maxNum", "3_2"),
        ("maxNum", "2147483648"),
        ("maxNum", "0x10"),
        ("beginTimestamp", "9223372036854775808"),
        ("endTimestamp", "-9223372036854775809"),
        ("endTimestamp", "1e3"),
    ],
)
def test_malformed_numbers_are_header_field_errors(field: str, value: str) -> None:
    with pytest.raises(HeaderFieldError, match=f"<{field}> is not a valid Java") as info:
        QueryMessageRequestHeader.from_ext_fields({**_GOOD_QUERY, field: value})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("value", "expected"),
    [("+7", 7), ("-7", -7), ("007", 7), ("2147483647", 2147483647), ("-2147483648", -2147483648), ("٣٢", 32)],
)
def test_java_integer_syntax_is_accepted(value: str, expected: int) -> None:
    header = QueryMessageRequestHeader.from_ext_fields({**_GOOD_QUERY, "maxNum": value})
    assert header.max_num == expected


def test_long_extremes() -> None:
    header = ViewMessageRequestHeader.from_ext_fields({"offset": str(-(1 << 63))})
    assert header.offset == -(1 << 63)
    assert ViewMessageRequestHeader.from_ext_fields({"offset": str(LONG_MAX)}).offset == LONG_MAX
    with pytest.raises(HeaderFieldError):
        ViewMessageRequestHeader.from_ext_fields({"offset": "offset"})


@pytest.mark.parametrize(
    "value",
    [
        "1763846400000",
        "999999999999999999",
        "000000000000000007",
        "9223372036854775807",
        "0009223372036854775807",
    ],
)
def test_plain_digit_longs_of_every_length_parse_as_java_does(value: str) -> None:
    # 10 to 18 plain digits take the fast path; 19 and more the full Java syntax check.
    assert ViewMessageRequestHeader.offset_from({"offset": value}) == int(value)


@pytest.mark.parametrize("value", ["9223372036854775808", "99999999999999999999", "0009223372036854775808"])
def test_plain_digit_longs_past_the_range_are_refused(value: str) -> None:
    with pytest.raises(HeaderFieldError, match="out of range"):
        ViewMessageRequestHeader.offset_from({"offset": value})


def test_unique_key_query_flag() -> None:
    assert is_unique_key_query({UNIQUE_KEY_QUERY: "true"})
    assert not is_unique_key_query({UNIQUE_KEY_QUERY: "TRUE"})  # the broker compares exactly
    assert not is_unique_key_query({UNIQUE_KEY_QUERY: "false"})
    assert not is_unique_key_query({})
    assert not is_unique_key_query(None)
    assert with_unique_key_query({"topic": "T"}, True) == {UNIQUE_KEY_QUERY: "true", "topic": "T"}
    assert list(with_unique_key_query(_GOOD_QUERY, False)) == [
        UNIQUE_KEY_QUERY,
        "beginTimestamp",
        "topic",
        "maxNum",
        "endTimestamp",
        "key",
    ]


def test_java_booleans() -> None:
    assert java_boolean(True) == "true" and java_boolean(False) == "false"
    assert java_parse_boolean("True") and java_parse_boolean("true")
    assert not java_parse_boolean("1") and not java_parse_boolean(None) and not java_parse_boolean("")
