"""Arbitrary bytes and strings never escape the decoders as anything but a ``ProtocolError``."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.message import MAGIC_CODE_V1, MAGIC_CODE_V2, decode_message, decode_messages, read_index_fields
from protocol.message_id import decode_offset_msg_id, parse_unique_id


@st.composite
def record_like(draw: st.DrawFn) -> bytes:
    """Random bytes behind a plausible size and magic, so the decoder gets past the first checks."""
    tail = draw(st.binary(min_size=0, max_size=400))
    size = draw(st.one_of(st.just(len(tail) + 8), st.integers(-(2**31), 2**31 - 1)))
    magic = draw(st.sampled_from([MAGIC_CODE_V1, MAGIC_CODE_V2]))
    return struct.pack(">ii", size, magic) + tail


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300) | record_like(), st.integers(-4, 64))
def test_random_bytes_raise_only_protocol_errors(data: bytes, offset: int) -> None:
    for decode in (
        lambda: decode_message(data, offset, check_crc=True),
        lambda: decode_message(memoryview(data), offset, read_body=False),
        lambda: read_index_fields(data, offset),
    ):
        try:
            decode()
        except ProtocolError:
            pass
    assert isinstance(decode_messages(data), list)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60) | st.text("0123456789abcdefABCDEFxg ", min_size=30, max_size=58))
def test_random_ids_raise_only_id_errors(text: str) -> None:
    for parse in (decode_offset_msg_id, parse_unique_id):
        try:
            parse(text)
        except ProtocolError:
            pass
