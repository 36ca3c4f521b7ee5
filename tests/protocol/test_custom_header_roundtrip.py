"""Hypothesis: the typed custom headers survive to_ext_fields -> frame -> from_ext_fields unchanged,
in both header serializations, with Java's HashMap key order and Java's number text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    GetRouteInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from protocol.frame import decode_frame, encode_frame
from protocol.java_hashmap import java_hashmap_order

# Non-empty (a zero-length ROCKETMQ string reads back as Java's null), no lone surrogates (not UTF-8).
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)

_headers = st.one_of(
    st.builds(QueryMessageRequestHeader, _text, _text, _i32, _i64, _i64),
    st.builds(QueryMessageResponseHeader, _i64, _i64),
    st.builds(ViewMessageRequestHeader, _i64, st.none() | _text),
    st.builds(GetRouteInfoRequestHeader, _text, st.none() | st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(header=_headers, serialize_type=st.sampled_from(list(SerializeType)))
def test_custom_header_round_trip(
    header: QueryMessageRequestHeader
    | QueryMessageResponseHeader
    | ViewMessageRequestHeader
    | GetRouteInfoRequestHeader,
    serialize_type: SerializeType,
) -> None:
    fields = header.to_ext_fields()
    assert all(isinstance(value, str) for value in fields.values())
    assert list(fields) == java_hashmap_order(fields)
    assert type(header).from_ext_fields(fields) == header
    request = RemotingCommand(code=12, ext_fields=fields, serialize_type=serialize_type)
    cmd = decode_frame(encode_frame(request))
    assert cmd.ext_fields == fields and list(cmd.ext_fields) == list(fields)
    assert type(header).from_ext_fields(cmd.ext_fields) == header
