"""Test harness: ``RawClient`` (the remoting protocol with nothing in between) and fixture types.

It writes frames built with ``protocol.frame.encode_frame`` and reads back exactly what the server
wrote (decoded, or as raw frame bytes), so a test sees the server's frames in the order it wrote them.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from protocol.opaque_matcher import OpaqueMatcher
from server.app import QueryServer

#: ``Long.MAX_VALUE`` as Java clients send it for an open-ended ``endTimestamp``.
JAVA_LONG_MAX = "9223372036854775807"


def key_query_fields(topic: str, key: str, max_num: int = 64) -> dict[str, str]:
    """QUERY_MESSAGE extFields for ``key`` in ``topic`` over all time, as mqadmin sends them."""
    return {
        "topic": topic,
        "key": key,
        "maxNum": str(max_num),
        "beginTimestamp": "0",
        "endTimestamp": JAVA_LONG_MAX,
    }


#: How long a test waits for one answer before failing (a hang must fail, never block the suite).
ANSWER_TIMEOUT = 5.0


class RawClient:
    """A minimal remoting client: write frames, read decoded commands, pair answers by opaque."""

    _opaques = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._decoder = FrameDecoder()
        self._ready: list[RemotingCommand] = []
        #: Requests from the server that arrived while ``call`` waited for an answer.
        self.server_requests: list[RemotingCommand] = []

    @classmethod
    async def connect(cls, host: str, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    @staticmethod
    def request(
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        flag: int = 0,
        opaque: int | None = None,
    ) -> RemotingCommand:
        return RemotingCommand(
            code=code,
            language=LanguageCode.JAVA,
            version=407,
            opaque=next(RawClient._opaques) if opaque is None else opaque,
            flag=flag,
            ext_fields=ext_fields,
            body=body,
            serialize_type=serialize_type,
        )

    async def send(self, *commands: RemotingCommand) -> None:
        self.writer.write(b"".join(encode_frame(c) for c in commands))
        await self.writer.drain()

    async def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def receive(self, timeout: float = ANSWER_TIMEOUT) -> RemotingCommand:
        """The next command the server wrote; fails on timeout or if the server closed."""
        while not self._ready:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("the server closed the connection")
            self._ready.extend(self._decoder.feed(data))
        return self._ready.pop(0)

    async def receive_frame(self, timeout: float = ANSWER_TIMEOUT) -> bytes:
        """The next whole frame exactly as the server wrote it (do not mix with ``receive``)."""
        prefix = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        rest = await asyncio.wait_for(self.reader.readexactly(int.from_bytes(prefix, "big")), timeout)
        return prefix + rest

    async def call(self, command: RemotingCommand) -> RemotingCommand:
        """Send ``command`` and return its answer; requests the server sends meanwhile (it calls its
        clients back: NOTIFY_CONSUMER_IDS_CHANGED, ...) are kept in ``server_requests``."""
        await self.send(command)
        while True:
            response = await self.receive()
            if response.is_response:
                break
            self.server_requests.append(response)
        assert response.opaque == command.opaque
        return response

    async def ask_all(self, requests: list[RemotingCommand], chunk: int = 500) -> list[RemotingCommand]:
        """Pipeline ``requests`` (``chunk`` at a time); their answers in request order.

        Paired by opaque (``protocol.opaque_matcher``), as a remoting client pairs them: an answer
        to an opaque no request waits for (unknown, or a second answer) fails with
        ``UnknownOpaqueError``, and two requests under one opaque with ``DuplicateOpaqueError``.
        """
        waiting: OpaqueMatcher[int] = OpaqueMatcher()
        answers: list[RemotingCommand | None] = [None] * len(requests)
        for start in range(0, len(requests), chunk):
            part = requests[start : start + chunk]
            for index, request in enumerate(part, start):
                waiting.expect(request.opaque, index)
            await self.send(*part)
            for _ in part:
                answer = await self.receive()
                answers[waiting.take(answer.opaque)] = answer
        return answers  # type: ignore[return-value]  # every slot was answered

    async def closed_by_server(self, timeout: float = ANSWER_TIMEOUT) -> bool:
        """True once the server has closed this connection (EOF), reading and dropping anything else."""
        try:
            while True:
                data = await asyncio.wait_for(self.reader.read(65536), timeout)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


#: ``start_server(**settings_overrides)``: a started server over the Java store.
StartServer = Callable[..., Awaitable[QueryServer]]

#: ``connect(port=None, target=None)``: a RawClient to the test server.
Connect = Callable[..., Awaitable[RawClient]]
