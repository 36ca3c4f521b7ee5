"""SEND headers and batch bodies: both header forms, Java's null-field errors, bad batch bodies refused.

The captured frames themselves are covered by ``tests/server/test_send_replay.py``; these pin the
edges the capture does not reach.
"""

from __future__ import annotations

import pytest

from protocol.errors import HeaderFieldError, MessageDecodeError
from protocol.java_hashmap import JavaHashMap, java_hashmap_order
from protocol.send_message import (
    BatchItem,
    SendMessageRequestHeader,
    decode_batch_body,
    encode_batch_body,
)

HEADER = SendMessageRequestHeader(
    "g", "T", "TBW102", 4, 1, 0, 123, 0, "WAIT\x01true", 0, False, None, True, "b"
)


@pytest.mark.parametrize("v2", [True, False])
def test_header_round_trips_in_both_forms(v2: bool) -> None:
    fields = HEADER.to_ext_fields(v2=v2)
    assert ("b" in fields) == v2 and ("topic" in fields) != v2
    assert SendMessageRequestHeader.from_ext_fields(fields, v2=v2) == HEADER


def test_missing_and_malformed_fields_are_named_as_sent() -> None:
    fields = HEADER.to_ext_fields(v2=True)
    del fields["e"]
    with pytest.raises(HeaderFieldError, match="the custom field <e> is null"):
        SendMessageRequestHeader.from_ext_fields(fields, v2=True)
    fields = HEADER.to_ext_fields(v2=False)
    fields["bornTimestamp"] = "soon"
    with pytest.raises(HeaderFieldError, match="bornTimestamp"):
        SendMessageRequestHeader.from_ext_fields(fields, v2=False)


def test_batch_body_round_trip_keeps_property_bytes() -> None:
    body = encode_batch_body([(0, b"one", {"KEYS": "a"}), (7, b"", {})])
    assert decode_batch_body(body) == [BatchItem(0, b"one", b"KEYS\x01a"), BatchItem(7, b"", b"")]


@pytest.mark.parametrize("cut", [1, 10, 21, 26])
def test_truncated_batch_bodies_are_refused(cut: int) -> None:
    body = encode_batch_body([(0, b"body", {"KEYS": "a"})])
    with pytest.raises(MessageDecodeError):
        decode_batch_body(body[:cut])


def test_negative_lengths_are_refused() -> None:
    body = bytearray(encode_batch_body([(0, b"body", {"KEYS": "a"})]))
    body[16:20] = (-1).to_bytes(4, "big", signed=True)
    with pytest.raises(MessageDecodeError, match="body length -1"):
        decode_batch_body(bytes(body))


def test_hashmap_keeps_its_grown_table_after_a_remove() -> None:
    """Java's table never shrinks: after growing to 32 buckets, 12 keys still iterate in 32-bucket order."""
    keys = [f"key{i}" for i in range(1, 14)]
    grown = JavaHashMap((k, "v") for k in keys)
    grown.remove("key13")
    assert list(grown.ordered()) == [k for k in java_hashmap_order(keys) if k != "key13"]
    assert list(grown.ordered()) != java_hashmap_order(keys[:12]), "the keys must tell 16 from 32 buckets"
