"""The compiled request path's differential tests share these: requests as the Java client writes
them, a transport that records what a connection writes, a path that counts what it answered, and
``serve``, which feeds reads to a fresh ``RemotingConnection`` over a dispatcher."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterable
from typing import Any

from protocol.codes import RequestCode
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from server.identity import BrokerIdentity
from server.remoting.connection import RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.refusal import IncompleteRequests

VIEW = int(RequestCode.VIEW_MESSAGE_BY_ID)
QUERY = int(RequestCode.QUERY_MESSAGE)
MAX = 2**63 - 1
IDENTITY = BrokerIdentity(
    cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
)


class Recorder:
    """A transport that keeps every byte written and every call that is not a write."""

    def __init__(self, pause_after_writes: int | None = None) -> None:
        self.data = bytearray()
        self.calls: list[str] = []
        self.writes = 0
        self.protocol: RemotingConnection | None = None
        self._pause_after = pause_after_writes

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("10.0.0.7", 40001) if name == "peername" else default

    def writelines(self, parts: Iterable[bytes]) -> None:
        for part in parts:
            self.data += part
        self._wrote()

    def write(self, data: bytes) -> None:
        self.data += data
        self._wrote()

    def _wrote(self) -> None:
        self.writes += 1
        if self._pause_after is not None and self.writes == self._pause_after:
            assert self.protocol is not None
            self.calls.append("paused")
            self.protocol.pause_writing()

    def is_closing(self) -> bool:
        return "close" in self.calls or "abort" in self.calls

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.calls.append("pause_reading")

    def resume_reading(self) -> None:
        self.calls.append("resume_reading")

    def close(self) -> None:
        self.calls.append("close")

    def abort(self) -> None:
        self.calls.append("abort")


def frame(header: bytes | str, body: bytes = b"", serialize_type: int = 0) -> bytes:
    head = header.encode("utf-8", "surrogatepass") if isinstance(header, str) else header
    return struct.pack(">iI", 4 + len(head) + len(body), (serialize_type << 24) | len(head)) + head + body


def view(offset: Any, opaque: int = 1, **extra: Any) -> bytes:
    """A VIEW as the Java client writes it (fastjson's key order)."""
    fields = {"offset": str(offset)} if offset is not None else {}
    header = {"code": VIEW, "extFields": fields, "flag": 0, "language": "JAVA", "opaque": opaque}
    header.update({"serializeTypeCurrentRPC": "JSON", "version": 407})
    header.update(extra)
    return frame(json.dumps(header, separators=(",", ":")))


class CountingPath:
    """The compiled path, counting the requests it answered (so a test knows it ran)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.codes = inner.codes
        self.answered = 0

    def answer(self, *args: Any) -> tuple[bytes | None, int, int]:
        out, pos, count = self.inner.answer(*args)
        self.answered += count
        return out, pos, count


def query(topic: str, key: str, opaque: int = 1, *, unique: bool | None = None, **fields: Any) -> bytes:
    """A QUERY_MESSAGE as mqadmin writes it (maxNum 64, the whole time range unless given)."""
    return frame(query_header(topic, key, opaque, unique=unique, **fields))


def query_header(topic: str, key: str, opaque: int = 1, *, unique: bool | None = None, **fields: Any) -> str:
    """The JSON header of ``query``."""
    ext = {"topic": topic, "key": key, "maxNum": "64", "beginTimestamp": "0", "endTimestamp": str(MAX)}
    if unique is not None:
        ext["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
    ext.update(fields)
    header = {"code": QUERY, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque}
    header.update({"serializeTypeCurrentRPC": "JSON", "version": 407})
    # Raw UTF-8, as fastjson writes it (json's \\u escapes are left to the reference decoder).
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False)


def serve(
    dispatcher: Dispatcher,
    reads: list[bytes],
    *,
    eof: bool = False,
    pause_after_writes: int | None = None,
    resume: bool = False,
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
) -> tuple[bytes, list[str], int]:
    """Feed ``reads`` to a fresh connection; (bytes written, other transport calls, requests left)."""

    async def run() -> tuple[bytes, list[str], int]:
        transport = Recorder(pause_after_writes)
        connection = RemotingConnection(
            dispatcher, idle_timeout=0, incomplete=IncompleteRequests(), max_frame_length=max_frame_length
        )
        transport.protocol = connection
        connection.connection_made(transport)  # type: ignore[arg-type]
        for data in reads:
            connection.data_received(data)
        if resume:
            connection.resume_writing()
        if eof:
            connection.eof_received()
        left = connection.in_flight
        connection.connection_lost(None)
        return bytes(transport.data), transport.calls, left

    return asyncio.run(run())


def split_frames(data: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        frames.append(data[pos : pos + 4 + length])
        pos += 4 + length
    return frames


#: Value bytes that are not UTF-8 (cut, a stray continuation byte, a surrogate, overlong, past
#: U+10FFFF, never UTF-8) and some that are: the reference rejects the whole header for the first.
NOT_UTF8 = [
    b"\xc3",
    b"tr\x9due",
    b"\x80",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf4\x90\x80\x80",
    b"\xff",
]
UTF8 = [b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"]
