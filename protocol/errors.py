"""Every error the ``protocol`` package raises: typed, so callers choose the RocketMQ answer.

The server maps a ``FrameError`` to closing the one connection (the stream cannot be resynchronised),
a ``HeaderFieldError`` to SYSTEM_ERROR with a remark naming the field, and message/id errors to
clear answers or command-line messages. Nothing else may escape a decoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocol.command import RemotingCommand


class ProtocolError(ValueError):
    """Base of every error raised while decoding or encoding RocketMQ bytes."""


class FrameError(ProtocolError):
    """The frame stream is unusable; the connection it came from must be closed.

    ``decoded`` holds the whole commands that ``FrameDecoder.feed`` completed in the same call
    before it met the bad frame: they arrived intact, so a server can still answer them before it
    closes the connection (a client that pipelines a good request and then garbage in one write
    gets its answer).
    """

    decoded: tuple[RemotingCommand, ...] = ()


class FrameLengthError(FrameError):
    """The frame's total length is negative, too small to hold a header, or over the limit."""


class HeaderLengthError(FrameError):
    """The header length field points past the end of the frame."""


class UnknownSerializeTypeError(FrameError):
    """The serialization type byte is neither JSON (0) nor ROCKETMQ (1)."""


class HeaderDecodeError(FrameError):
    """The header bytes cannot be decoded in the declared serialization."""


class ConnectionStateError(RuntimeError):
    """An event that a connection's state does not allow (``protocol.connection_state``): a bug in
    the code driving the state machine or in its transport, never something a peer can cause."""


class OpaqueError(ProtocolError):
    """A request/response pairing by opaque that cannot be (``protocol.opaque_matcher``)."""


class UnknownOpaqueError(OpaqueError):
    """An answer whose opaque no request is waiting for (never sent, answered already, expired)."""


class DuplicateOpaqueError(OpaqueError):
    """A request registered under an opaque another request is still waiting on."""


class CommandEncodeError(ProtocolError):
    """A command cannot be put on the wire: a field out of its Java range, a string that is not valid
    Unicode, or a header/frame longer than the length fields can describe."""


class HeaderFieldError(ProtocolError):
    """A custom header field (in ``extFields``) is missing or malformed."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"the custom field <{field}> {reason}")
        self.field = field
        self.reason = reason


class JsonBodyError(ProtocolError):
    """A request body that is not the JSON expected: malformed, not UTF-8, the wrong shape, or
    nested deeper than the decoder goes (``protocol.json_body``)."""


class MessageDecodeError(ProtocolError):
    """A CommitLog message record is truncated or inconsistent."""


class CompressionError(ProtocolError):
    """A compressed body cannot be decompressed (corrupt data or the codec library is missing)."""


class CodecUnavailableError(CompressionError):
    """The body is LZ4 or ZSTD and that codec's library is not installed here: the record is intact,
    only this process cannot read it. Kept apart from corrupt data so that callers which, like Java,
    silently stop at a corrupt record can still tell the user which package to install."""


class MessageIdError(ProtocolError):
    """A message id (offset id or unique id) is not well formed."""


class MessageEncodeError(ProtocolError):
    """A message cannot be written as a CommitLog record (a field does not fit its on-disk width)."""
