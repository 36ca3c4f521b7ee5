"""The incremental frame decoder: any chunking of a frame stream gives the same commands, and every
kind of bad input is a typed ``FrameError`` that leaves the decoder failed."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.errors import (
    FrameError,
    FrameLengthError,
    HeaderDecodeError,
    HeaderLengthError,
    ProtocolError,
    UnknownSerializeTypeError,
)
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, decode_frame, encode_frame


def _command(i: int, body_size: int, serialize_type: SerializeType) -> RemotingCommand:
    return RemotingCommand(
        code=12 + i,
        version=407,
        opaque=i,
        remark=f"r{i}" if i % 2 else None,
        ext_fields={"topic": "TopicA", "key": f"k-{i}"} if i % 3 else None,
        body=bytes(range(256)) * (body_size // 256) + b"x" * (body_size % 256) or None,
        serialize_type=serialize_type,
    )


commands_strategy = st.lists(
    st.builds(
        _command,
        st.integers(0, 1000),
        st.integers(0, 3000),
        st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(commands=commands_strategy, cuts=st.lists(st.integers(0, 1 << 16), max_size=20))
def test_any_split_or_merge_yields_the_same_commands(
    commands: list[RemotingCommand], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(cmd) for cmd in commands)
    points = sorted({cut % (len(stream) + 1) for cut in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for start, end in itertools.pairwise(points):
        got.extend(decoder.feed(stream[start:end]))
    assert got == commands
    assert decoder.buffered == 0


def test_byte_by_byte_and_all_at_once_agree() -> None:
    commands = [_command(i, i * 100, SerializeType(i % 2)) for i in range(10)]
    stream = b"".join(encode_frame(cmd) for cmd in commands)
    assert FrameDecoder().feed(stream) == commands
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got.extend(decoder.feed(stream[i : i + 1]))
    assert got == commands


def test_accepts_bytearray_and_memoryview_chunks() -> None:
    cmd = _command(5, 700, SerializeType.ROCKETMQ)
    frame = encode_frame(cmd)
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(frame[:10])) == []
    assert decoder.feed(memoryview(frame)[10:]) == [cmd]


def test_incomplete_frame_is_held_back() -> None:
    frame = encode_frame(_command(1, 50, SerializeType.JSON))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.buffered == len(frame) - 1
    assert len(decoder.feed(frame[-1:])) == 1
    assert decoder.buffered == 0


def test_zero_length_body_decodes_as_none() -> None:
    cmd = RemotingCommand(code=34, body=b"")
    assert decode_frame(encode_frame(cmd)).body is None


def _frame(length: int, word: int, rest: bytes = b"") -> bytes:
    return struct.pack(">iI", length, word) + rest


@pytest.mark.parametrize(
    ("data", "error", "text"),
    [
        (struct.pack(">i", -1), FrameLengthError, "negative"),
        (struct.pack(">i", 0), FrameLengthError, "cannot hold"),
        (struct.pack(">i", 3) + b"abc", FrameLengthError, "cannot hold"),
        (struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH - 3), FrameLengthError, "exceeds the maximum"),
        (_frame(4 + 10, 50, b"{}" + b"\0" * 8), HeaderLengthError, "exceeds the frame"),
        (_frame(4 + 2, (2 << 24) | 2, b"{}"), UnknownSerializeTypeError, "serialize type 2"),
        (_frame(4 + 2, (0xFF << 24) | 2, b"{}"), UnknownSerializeTypeError, "serialize type 255"),
        (_frame(4 + 3, 3, b"{x}"), HeaderDecodeError, "JSON"),
        (_frame(4 + 2, 2, b"[]"), HeaderDecodeError, "JSON"),
        (_frame(4 + 4, 4, b'"ab"'), HeaderDecodeError, "JSON"),
        (_frame(4 + 3, (1 << 24) | 3, b"\0\0\0"), HeaderDecodeError, "ROCKETMQ"),
    ],
)
def test_bad_input_raises_a_typed_frame_error(data: bytes, error: type[FrameError], text: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(error, match=text) as info:
        decoder.feed(data)
    assert isinstance(info.value, FrameError) and isinstance(info.value, ProtocolError)
    # The stream cannot be resynchronised: the decoder stays failed.
    with pytest.raises(FrameError, match="already failed"):
        decoder.feed(encode_frame(RemotingCommand(code=1)))


def test_limit_counts_the_length_word_like_netty() -> None:
    """Netty's LengthFieldBasedFrameDecoder(max, 0, 4, 0, 4) compares length + 4 with max."""
    max_len = 1024
    cmd = RemotingCommand(code=1, body=b"")
    header_len = len(encode_frame(cmd)) - 8
    fits = RemotingCommand(code=1, body=b"b" * (max_len - 8 - header_len))
    frame = encode_frame(fits)
    assert len(frame) == max_len
    assert FrameDecoder(max_frame_length=max_len).feed(frame) == [fits]
    over = encode_frame(RemotingCommand(code=1, body=b"b" * (max_len - 7 - header_len)))
    with pytest.raises(FrameLengthError):
        FrameDecoder(max_frame_length=max_len).feed(over[:4])


def test_oversized_frame_fails_before_its_body_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameLengthError):
        decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH))
    assert decoder.buffered == 0


def test_good_frames_before_a_bad_one_ride_on_the_error() -> None:
    """feed() still raises for the chunk (the stream is lost), but the commands completed before the
    bad frame arrived intact: they come with the error so that a server can answer them first."""
    first, second = RemotingCommand(code=1, opaque=7), RemotingCommand(code=2, opaque=8)
    decoder = FrameDecoder()
    with pytest.raises(FrameLengthError) as info:
        decoder.feed(encode_frame(first) + encode_frame(second) + struct.pack(">i", -5))
    assert info.value.decoded == (first, second)
    with pytest.raises(FrameError, match="already failed") as again:
        decoder.feed(encode_frame(first))
    assert again.value.decoded == ()


def test_frames_from_earlier_calls_are_not_repeated_on_the_error() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(RemotingCommand(code=1))) == [RemotingCommand(code=1)]
    with pytest.raises(HeaderDecodeError) as info:
        decoder.feed(_frame(4 + 3, 3, b"{x}"))
    assert info.value.decoded == ()


def test_a_header_over_max_header_length_fails_before_the_frame_arrives() -> None:
    decoder = FrameDecoder(max_header_length=1024)
    with pytest.raises(HeaderLengthError, match="maximum header length 1024"):
        decoder.feed(_frame(4 + 1_000_000, 1025))
    assert decoder.buffered == 0
    ok = RemotingCommand(code=1, ext_fields={"k": "v" * 900})
    assert FrameDecoder(max_header_length=1024).feed(encode_frame(ok)) == [ok]


def test_a_header_longer_than_its_frame_fails_before_the_frame_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(HeaderLengthError, match="exceeds the frame"):
        decoder.feed(_frame(4 + 1_000_000, 1_000_001))
    assert decoder.buffered == 0


def test_decode_frame_wants_exactly_one_frame() -> None:
    frame = encode_frame(RemotingCommand(code=1))
    with pytest.raises(FrameLengthError):
        decode_frame(frame + frame)
    with pytest.raises(FrameLengthError):
        decode_frame(frame[:-1])


def test_max_header_length_must_be_sane() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_header_length=-1)


def test_max_frame_length_must_be_sane() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_length=4)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_a_full_16_mib_frame_arrives_in_socket_sized_chunks(serialize_type: SerializeType) -> None:
    """The largest frame the default limit allows (length word included), fed 64 KiB at a time."""
    empty = len(encode_frame(RemotingCommand(code=0, serialize_type=serialize_type)))
    body = b"\xab" * (DEFAULT_MAX_FRAME_LENGTH - empty)
    cmd = RemotingCommand(code=0, body=body, serialize_type=serialize_type)
    frame = encode_frame(cmd)
    assert len(frame) == DEFAULT_MAX_FRAME_LENGTH
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    view = memoryview(frame)
    for pos in range(0, len(frame), 64 * 1024):
        got.extend(decoder.feed(view[pos : pos + 64 * 1024]))
    assert got == [cmd]
    assert decoder.buffered == 0


def test_completing_joins_the_held_part_only_with_the_read_that_completes_it() -> None:
    """``completing``: None (nothing changed) while nothing is held or the read does not complete the
    held frame; else the held bytes and the read as one, the hold dropped, so feeding back what the
    caller leaves decodes the rest as before."""
    stream = encode_frame(_command(1, 600, SerializeType.JSON)) + encode_frame(
        _command(2, 10, SerializeType.JSON)
    )
    first = len(encode_frame(_command(1, 600, SerializeType.JSON)))
    decoder = FrameDecoder()
    assert decoder.completing(stream) is None
    assert decoder.feed(stream[:2]) == [] and decoder.buffered == 2
    joined = decoder.completing(stream[2:5])  # under 4 bytes held: joined (cheap), still incomplete
    assert joined == stream[:5] and decoder.buffered == 0
    assert decoder.feed(joined) == []
    assert decoder.completing(stream[5 : first - 1]) is None and decoder.buffered == 5  # short by 1
    decoder.feed(stream[5:300])
    joined = decoder.completing(memoryview(stream)[300 : first + 7])
    assert joined == stream[: first + 7] and decoder.buffered == 0
    commands = decoder.feed(joined[first:]) + decoder.feed(stream[first + 7 :])
    assert [c.opaque for c in commands] == [2]
