"""Hostile input against every decoder a peer's bytes reach: only ``ProtocolError`` subclasses escape.

The other fuzz tests feed random bytes; random bytes rarely get past a length word or a magic code,
so these also mutate the real Java frames, headers, records and ids (flip, overwrite with extreme
integers, insert, delete, truncate) and chain the decoders as the server does (frame -> header ->
custom header). A decode that succeeds must hand back well-typed values; one that fails must raise
a ``ProtocolError`` (``HeaderFieldError`` for custom headers), never ``struct.error``, ``KeyError``,
``UnicodeDecodeError``, ``MemoryError``, a hang or a crash.
"""

from __future__ import annotations

import functools
import itertools
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.command import RemotingCommand
from protocol.custom_headers import (
    GetRouteInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from protocol.errors import FrameError, HeaderDecodeError, HeaderFieldError, ProtocolError
from protocol.frame import FrameDecoder, decode_frame
from protocol.header_json import decode_json_header
from protocol.header_rocketmq import decode_rocketmq_header
from protocol.message import decode_message, decode_messages, read_index_fields
from protocol.message_id import decode_offset_msg_id, parse_unique_id

CUSTOM_HEADERS = (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    GetRouteInfoRequestHeader,
)
#: Integers that break naive length handling: signs, 16/24/32-bit edges.
EXTREMES = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0xFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


@functools.cache
def _read(path: Path) -> bytes:
    return path.read_bytes()


def _golden(vectors_dir: Path, manifest: dict, kind: str) -> list[bytes]:
    out = []
    for v in manifest["vectors"]:
        name = v.get("file")
        if not name:
            continue
        if kind == "frame" and name.endswith(".encode.bin"):
            out.append(_read(vectors_dir / name))
        elif kind == "record" and name.startswith("message_encode_"):
            out.append(_read(vectors_dir / name))
    assert out, kind
    return out


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A golden input with a few random edits: the bytes a fuzzer finds past the first checks."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "int", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "int":
            width = draw(st.sampled_from([1, 2, 4]))
            value = draw(st.sampled_from(EXTREMES)) & ((1 << (8 * width)) - 1)
            data[at : at + width] = value.to_bytes(width, "big")
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            del data[at:]
    return bytes(data)


def _only_protocol_errors(decode: Callable[[], object]) -> object | None:
    try:
        return decode()
    except ProtocolError:
        return None


def _check_command(cmd: RemotingCommand) -> None:
    """A decoded command is well typed, and the custom headers built from it fail only typed."""
    assert isinstance(cmd.code, int) and isinstance(cmd.opaque, int) and isinstance(cmd.flag, int)
    assert cmd.remark is None or isinstance(cmd.remark, str)
    if cmd.ext_fields is not None:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())
    for header in CUSTOM_HEADERS:
        try:
            header.from_ext_fields(cmd.ext_fields)
        except HeaderFieldError:
            pass


# -- frames ------------------------------------------------------------------------------------------


def _feed_in_chunks(data: bytes, cuts: list[int]) -> None:
    # The server's decoder also refuses long headers early (max_header_length): fuzz both kinds.
    decoder = FrameDecoder(max_frame_length=1 << 20, max_header_length=cuts[0] % 300 if cuts else None)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    try:
        for start, end in itertools.pairwise(points):
            for cmd in decoder.feed(data[start:end]):
                _check_command(cmd)
    except FrameError as exc:
        for cmd in exc.decoded:  # the commands completed before the bad frame ride on the error
            _check_command(cmd)
        with pytest.raises(FrameError):
            decoder.feed(b"\0\0\0\x08")  # a failed stream stays failed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 1 << 12), max_size=6))
def test_frame_decoder_random_bytes(data: bytes, cuts: list[int]) -> None:
    _feed_in_chunks(data, cuts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cuts=st.lists(st.integers(0, 1 << 12), max_size=6))
def test_frame_decoder_mutated_java_frames(
    vectors_dir: Path, manifest: dict, data: st.DataObject, cuts: list[int]
) -> None:
    frames = _golden(vectors_dir, manifest, "frame")
    stream = data.draw(mutated(frames)) + data.draw(st.sampled_from(frames))
    _feed_in_chunks(stream, cuts)
    cmd = _only_protocol_errors(lambda: decode_frame(stream))
    if cmd is not None:
        assert isinstance(cmd, RemotingCommand)
        _check_command(cmd)


# -- the two header serializations -------------------------------------------------------------------


def _headers(vectors_dir: Path, manifest: dict, serialize_type: int) -> list[bytes]:
    out = []
    for frame in _golden(vectors_dir, manifest, "frame"):
        (word,) = struct.unpack_from(">i", frame, 4)
        if word >> 24 == serialize_type:
            out.append(frame[8 : 8 + (word & 0xFFFFFF)])
    assert out
    return out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
json_headers = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values,
        "language": json_values,
        "version": json_values,
        "opaque": json_values,
        "flag": json_values,
        "remark": json_values,
        "extFields": json_values,
        "serializeTypeCurrentRPC": json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_json_header_hostile(vectors_dir: Path, manifest: dict, data: st.DataObject) -> None:
    import msgspec

    raw = data.draw(
        st.binary(max_size=300)
        | mutated(_headers(vectors_dir, manifest, 0))
        | json_headers.map(lambda d: msgspec.json.encode(d))
    )
    cmd = _only_protocol_errors(lambda: decode_json_header(raw))
    if cmd is not None:
        assert isinstance(cmd, RemotingCommand)
        _check_command(cmd)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rocketmq_header_hostile(vectors_dir: Path, manifest: dict, data: st.DataObject) -> None:
    raw = data.draw(st.binary(max_size=300) | mutated(_headers(vectors_dir, manifest, 1)))
    pad = data.draw(st.binary(max_size=8))
    buf = memoryview(pad + raw + pad)  # decoded in place inside a larger buffer, as the frame does
    try:
        cmd = decode_rocketmq_header(buf, len(pad), len(pad) + len(raw))
    except HeaderDecodeError:
        return
    _check_command(cmd)


# -- custom headers ----------------------------------------------------------------------------------

field_names = st.sampled_from(
    [
        "topic",
        "key",
        "maxNum",
        "beginTimestamp",
        "endTimestamp",
        "offset",
        "_UNIQUE_KEY_QUERY",
        "indexLastUpdateTimestamp",
        "indexLastUpdatePhyoffset",
    ]
) | st.text(max_size=10)
field_values = st.sampled_from(
    [
        *["", "0", "-0", "+1", "0x10", "1e3", " 1", "1 ", "9223372036854775808", "-9223372036854775809"],
        *["2147483648", "-2147483649", "\u0661", "\uff11", "NaN", "true", "TRUE"],
    ]
) | st.text(max_size=24)


@settings(max_examples=400, deadline=None)
@given(st.none() | st.dictionaries(field_names, field_values, max_size=8))
def test_custom_headers_hostile(ext_fields: dict[str, str] | None) -> None:
    for header in CUSTOM_HEADERS:
        try:
            parsed = header.from_ext_fields(ext_fields)
        except HeaderFieldError as exc:
            assert exc.field, "the error names the field"
            continue
        # Whatever parses writes back out as Java strings that parse to the same header.
        assert header.from_ext_fields(parsed.to_ext_fields()) == parsed


# -- the message decoder -----------------------------------------------------------------------------


@st.composite
def real_store_record(draw: st.DrawFn, stores_dir: Path) -> bytes:
    """One whole record from the Java store (any compression, IPv6 hosts, transactions)."""
    path = draw(st.sampled_from(sorted((stores_dir / "java-4.9.7-a" / "commitlog").iterdir())[:3]))
    data = _read(path)
    pos = 0
    for _ in range(draw(st.integers(0, 40))):
        size = int.from_bytes(data[pos : pos + 4], "big")
        if size <= 0 or pos + size >= len(data):
            break
        pos += size
    size = int.from_bytes(data[pos : pos + 4], "big")
    return data[pos : pos + size]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_message_decoder_mutated_records(
    vectors_dir: Path, manifest: dict, stores_dir: Path, data: st.DataObject
) -> None:
    seeds = _golden(vectors_dir, manifest, "record")
    seed = data.draw(st.sampled_from(seeds) | real_store_record(stores_dir))
    raw = data.draw(mutated([seed]))
    offset = data.draw(st.sampled_from([0, 0, 0, 1, len(raw), -1]))
    for decode in (
        lambda: decode_message(raw, offset, check_crc=True),
        lambda: decode_message(memoryview(raw), offset, read_body=False, decompress=False),
        lambda: read_index_fields(raw, offset),
    ):
        msg = _only_protocol_errors(decode)
        if msg is not None and hasattr(msg, "properties"):
            assert isinstance(msg.topic, str)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in msg.properties.items())
    decoded = decode_messages(raw + seed)
    assert isinstance(decoded, list) and len(decoded) <= 2


# -- ids -----------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_ids_mutated(manifest: dict, data: st.DataObject) -> None:
    ids = next(v for v in manifest["vectors"] if v["name"] == "message_ids")
    seeds = sorted({s for s in _strings(ids) if len(s) in (32, 56)})
    assert seeds
    text = data.draw(st.sampled_from(seeds))
    at = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.text(max_size=3))
    cut = data.draw(st.integers(0, 3))
    candidate = text[:at] + edit + text[at + cut :]
    for parse in (decode_offset_msg_id, parse_unique_id):
        _only_protocol_errors(lambda p=parse: p(candidate))  # type: ignore[misc]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
