"""Remoting frames: ``[i32 length][i32 serializeType << 24 | headerLength][header][body]``.

``length`` counts everything after itself (header-length word, header, body). The limit is checked
the way RocketMQ's ``NettyDecoder`` (a Netty ``LengthFieldBasedFrameDecoder(16 MiB, 0, 4, 0, 4)``)
checks it: on ``length + 4``, the frame including its own length word, and as soon as the length
word has arrived, before buffering the rest.

``FrameDecoder`` is sans-IO: feed it whatever the socket delivered (split or merged frames) and it
returns the whole commands. After it raises, the stream cannot be resynchronised, so the decoder
stays failed and the connection must be closed (Java closes the channel too); the commands completed
before the bad frame in that same call ride on the error (``FrameError.decoded``) so that they can
still be answered.

``max_header_length`` (off unless given) refuses a header longer than that as soon as the frame's
two length words have arrived: decoding a header multiplies its size in Python objects (a 15 MiB
JSON header of tiny extFields becomes ~140 MB of dict), and no RocketMQ request needs a large one.
"""

from __future__ import annotations

import struct
from types import ModuleType

from protocol.accel import load
from protocol.codes import SerializeType
from protocol.command import Body, RemotingCommand
from protocol.errors import (
    CommandEncodeError,
    FrameError,
    FrameLengthError,
    HeaderLengthError,
    UnknownSerializeTypeError,
)
from protocol.header_json import decode_json_header, encode_json_header
from protocol.header_rocketmq import decode_rocketmq_header, encode_rocketmq_header

#: ``com.rocketmq.remoting.frameMaxLength``'s default: the largest frame, length word included.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

_LENGTH = struct.Struct(">i")
_PREFIX = struct.Struct(">iI")
_HEADER_LENGTH_MASK = 0xFFFFFF
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ


def _encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == _ROCKETMQ:
        return encode_rocketmq_header(cmd)
    if cmd.serialize_type == _JSON:
        return encode_json_header(cmd)
    raise CommandEncodeError(f"unknown serialize type {cmd.serialize_type!r}")


def _prefix(cmd: RemotingCommand, header: bytes, body_len: int) -> bytes:
    header_len = len(header)
    if header_len > _HEADER_LENGTH_MASK:
        raise CommandEncodeError(f"header of {header_len} bytes does not fit the 24-bit header length")
    length = 4 + header_len + body_len
    if length > 0x7FFFFFFF - 4:
        raise CommandEncodeError(f"frame of {length} bytes does not fit the 32-bit length")
    return _PREFIX.pack(length, (int(cmd.serialize_type) << 24) | header_len)


def encode_json_head(cmd: RemotingCommand, body_len: int) -> bytes | None:
    """The length words and JSON header of a frame for ``cmd`` with a body of ``body_len`` bytes.

    The reference always answers. Its compiled twin (``protocol/_frame_fast.c``) writes the common
    case (plain ASCII strings, a known language, fields in range) in one buffer and returns None for
    anything else, which then takes this path.
    """
    header = encode_json_header(cmd)
    return _prefix(cmd, header, body_len) + header


_reference_json_head = encode_json_head


def _head(cmd: RemotingCommand, body_len: int) -> bytes:
    if cmd.serialize_type == _JSON:
        head = encode_json_head(cmd, body_len)
        return head if head is not None else _reference_json_head(cmd, body_len)  # type: ignore[return-value]
    header = _encode_header(cmd)
    return _prefix(cmd, header, body_len) + header


def encode_frame(cmd: RemotingCommand) -> bytes:
    """One whole frame for ``cmd``, header in ``cmd.serialize_type``."""
    body = cmd.body
    if not body:
        return _head(cmd, 0)
    return b"".join((_head(cmd, len(body)), body))


def encode_frame_parts(cmd: RemotingCommand) -> tuple[bytes, Body | None]:
    """The frame as (length words + header, body): the body is returned as given, uncopied, so a
    large answer can go out with ``transport.writelines`` without joining it into a new buffer."""
    body = cmd.body
    body_len = len(body) if body else 0
    return _head(cmd, body_len), (body if body_len else None)


def _decode_payload(buf: memoryview, start: int, end: int) -> RemotingCommand:
    """The command in ``buf[start:end]`` (a frame without its length word)."""
    (word,) = _LENGTH.unpack_from(buf, start)
    header_len = word & _HEADER_LENGTH_MASK
    header_start = start + 4
    header_end = header_start + header_len
    if header_end > end:
        raise HeaderLengthError(f"header length {header_len} exceeds the frame's {end - header_start} bytes")
    serialize_type = (word >> 24) & 0xFF
    if serialize_type == 0:
        cmd = decode_json_header(buf[header_start:header_end])
    elif serialize_type == 1:
        cmd = decode_rocketmq_header(buf, header_start, header_end)
    else:
        raise UnknownSerializeTypeError(f"unknown serialize type {serialize_type}")
    if header_end < end:
        cmd.body = bytes(buf[header_end:end])
    return cmd


def _frame_problem(
    length: int, header_len: int | None, max_frame_length: int, max_header_length: int
) -> FrameError | None:
    """What is wrong with a frame's length words, if anything (``header_len`` None: not arrived yet).

    The length is judged as soon as its word has arrived and the header length as soon as its own
    has, before the rest of the frame is buffered.
    """
    if length < 0:
        return FrameLengthError(f"negative frame length {length}")
    if length < 4:
        return FrameLengthError(f"frame length {length} cannot hold the header length word")
    if length > max_frame_length - 4:
        return FrameLengthError(
            f"frame of {length + 4} bytes exceeds the maximum frame length {max_frame_length}"
        )
    if header_len is None:
        return None
    if header_len > length - 4:
        return HeaderLengthError(f"header length {header_len} exceeds the frame's {length - 4} bytes")
    if header_len > max_header_length:
        return HeaderLengthError(
            f"header length {header_len} exceeds the maximum header length {max_header_length}"
        )
    return None


def decode_frames(
    data: bytes | bytearray | memoryview, max_frame_length: int, max_header_length: int
) -> tuple[list[RemotingCommand], int]:
    """The commands of the whole frames at the start of ``data`` (flat bytes) and the position
    after the last of them (where an incomplete frame starts, if any).

    Raises the ``FrameError`` of the first bad frame, with ``decoded`` holding the commands before
    it. The compiled twin (``protocol/_frame_fast.c``) runs this loop in C and decodes the common
    JSON headers there; every other frame goes to ``_decode_payload``, bad length words to
    ``_frame_problem`` and a buffer that is not flat contiguous bytes to this function, so its
    commands and errors are this function's.
    """
    commands: list[RemotingCommand] = []
    pos = 0
    with memoryview(data) as view:
        if view.ndim != 1 or view.itemsize != 1:
            raise TypeError("decode_frames() takes a flat byte buffer")
        size = view.nbytes
        try:
            while size - pos >= 4:
                (length,) = _LENGTH.unpack_from(view, pos)
                header_len = None
                if size - pos >= 8:
                    header_len = _LENGTH.unpack_from(view, pos + 4)[0] & _HEADER_LENGTH_MASK
                problem = _frame_problem(length, header_len, max_frame_length, max_header_length)
                if problem is not None:
                    raise problem
                end = pos + 4 + length
                if end > size:
                    break
                commands.append(_decode_payload(view, pos + 4, end))
                pos = end
        except FrameError as exc:
            exc.decoded = tuple(commands)
            raise
    return commands, pos


_reference_decode_frames = decode_frames


class FrameDecoder:
    """Incremental frame decoder: ``feed(data)`` returns every command completed by ``data``."""

    __slots__ = ("_buffer", "_error", "max_frame_length", "max_header_length")

    def __init__(
        self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, max_header_length: int | None = None
    ) -> None:
        if max_frame_length < 8:
            raise ValueError("max_frame_length must leave room for the two length words")
        if max_header_length is not None and max_header_length < 0:
            raise ValueError("max_header_length must not be negative")
        self.max_frame_length = max_frame_length
        self.max_header_length = _HEADER_LENGTH_MASK if max_header_length is None else max_header_length
        self._buffer = bytearray()
        self._error: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at EOF means a truncated frame)."""
        return len(self._buffer)

    def completing(self, data: bytes | bytearray | memoryview) -> bytes | None:
        """The incomplete frame held back joined with ``data``, when ``data`` completes it, and the
        hold dropped: for a caller that decodes the whole itself and feeds back what it leaves (the
        compiled request path, which took no read that began inside a frame, so a stream whose reads
        cut frames fell back to this decoder for good). None, with nothing changed, when nothing is
        held, the stream failed, or ``data`` does not complete the frame (a big frame's pieces are
        kept here, appended, never copied again per read)."""
        buffer = self._buffer
        if not buffer or self._error is not None:
            return None
        if len(buffer) >= 4 and 4 + int.from_bytes(buffer[:4], "big", signed=True) - len(buffer) > len(data):
            return None
        joined = b"".join((buffer, data))
        self._buffer = bytearray()
        return joined

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Decode every frame ``data`` completes; raises a ``FrameError`` subclass on bad input, whose
        ``decoded`` holds the commands this call completed before the bad frame."""
        if self._error is not None:
            raise FrameError(f"the frame stream already failed: {self._error}")
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray | memoryview = buffer
        else:
            source = data
        try:
            commands, pos = decode_frames(source, self.max_frame_length, self.max_header_length)
        except FrameError as exc:
            # A fresh buffer, not clear(): the traceback may still hold views of the old one.
            self._error = exc
            self._buffer = bytearray()
            raise
        if source is buffer:
            del buffer[:pos]
        elif pos < len(source):
            buffer += memoryview(source)[pos:]
        return commands


def _bind_twin(fast: ModuleType) -> None:
    """Hand the compiled frame loop the reference pieces it calls back into: the whole reference
    for an odd buffer, ``_decode_payload`` for every frame it does not decode itself,
    ``_frame_problem`` for bad length words."""
    fast.bind(_reference_decode_frames, _decode_payload, _frame_problem, FrameError)


_fast = load("protocol._frame_fast")
if _fast is not None:
    encode_json_head = _fast.encode_json_head  # type: ignore[assignment]
    _bind_twin(_fast)
    decode_frames = _fast.decode_frames  # type: ignore[assignment]


def decode_frame(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """The one command in ``data``, which must be exactly one whole frame."""
    decoder = FrameDecoder(max_frame_length=max(DEFAULT_MAX_FRAME_LENGTH, len(data)))
    commands = decoder.feed(data)
    if len(commands) != 1 or decoder.buffered:
        raise FrameLengthError(
            f"expected exactly one whole frame, got {len(commands)} and {decoder.buffered} extra bytes"
        )
    return commands[0]
