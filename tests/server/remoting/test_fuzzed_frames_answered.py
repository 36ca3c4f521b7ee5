"""Issue 31 item 8: every fuzzed frame gets an answer from ``serve --writable``, and no traceback is logged.

Two causes were found. (1) Bodies nested ~1000 levels deep (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42,
CHECK_CLIENT_CONFIG 46, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200) made msgspec raise RecursionError,
which reached the dispatcher's catch-all: SYSTEM_ERROR with a traceback per request. They are now
the processors' own bad-body answers (``protocol.json_body``). (2) The SEND_MESSAGE_V2 (310),
UPDATE_AND_CREATE_TOPIC (17) and DELETE_TOPIC_IN_BROKER (215) frames that got no answer carried a lone
surrogate escape (``\\ud800``) in a JSON header, which msgspec refuses: the header was undecodable,
so the connection was closed. fastjson reads it, and the broker answers (an illegal topic name, an
unknown topic, ...); the escape is now read as Java stores it (``?``). The same holds for text that is
not UTF-8 in a JSON or ROCKETMQ header (read as U+FFFD, as ``new String(bytes, UTF_8)``). A frame whose header
is no header at all still closes the connection, as the broker's ``NettyDecoder`` does.

Each frame goes on a connection of its own to a ``serve --writable`` child on port 0, with 5 s to
answer; the child is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder
from server.broker.group_admin import BAD_BODY_REMARK
from tests.support.serve_process import kill_if_running, start_writable

ANSWER_TIMEOUT = 5.0
DEEP_ARRAY = b"[" * 5000 + b"]" * 5000
DEEP_OBJECT = b'{"a":' * 5000 + b"1" + b"}" * 5000


def json_frame(code: int, fields: dict[str, str] | None, body: bytes = b"", opaque: int = 7) -> bytes:
    """A JSON-serialized request; ``json.dumps`` writes a lone surrogate as its ``\\udXXX`` escape."""
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 399}
    if fields is not None:
        header["extFields"] = fields
    head = json.dumps(header).encode("ascii")
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def rocketmq_frame(code: int, pairs: list[tuple[bytes, bytes]], opaque: int = 7) -> bytes:
    """A ROCKETMQ-serialized request whose ext field bytes are given as they are (any bytes)."""
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in pairs)
    head = struct.pack(">hBhiii", code, 0, 399, opaque, 0, 0) + struct.pack(">i", len(ext)) + ext
    return struct.pack(">ii", 4 + len(head), (1 << 24) | len(head)) + head


def v2(**over: str) -> dict[str, str]:
    fields = {"a": "pg", "b": "FuzzTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    fields.update({"h": "0", "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"})
    fields.update(over)
    return fields


#: (case, frame, the answer's code, a piece of its remark) for each frame.
SE, OK = ResponseCode.SYSTEM_ERROR, ResponseCode.SUCCESS
FRAMES = [
    ("310 topic with a lone surrogate", json_frame(310, v2(b="Fuzz\ud800")), SE, "illegal"),
    ("310 group with a lone surrogate", json_frame(310, v2(a="\udc00pg")), OK, None),
    ("310 properties with a lone surrogate", json_frame(310, v2(i="KEYS\x01k\ud800")), OK, None),
    ("17 topic with a lone surrogate", json_frame(17, {"topic": "T\ud800", "readQueueNums": "1",
        "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}), SE, None),
    ("215 topic a lone surrogate", json_frame(215, {"topic": "\ud800"}), None, None),
    ("310 ROCKETMQ topic not UTF-8", rocketmq_frame(310, [(k.encode(), v.encode()) for k, v in v2().items()
        if k != "b"] + [(b"b", b"Fuzz\xff\xfe")]), SE, "illegal"),
    ("17 ROCKETMQ topic not UTF-8", rocketmq_frame(17, [(b"topic", b"\xc3"), (b"readQueueNums", b"1"),
        (b"writeQueueNums", b"1"), (b"perm", b"6"), (b"topicFilterType", b"SINGLE_TAG")]),
        SE, None),
    ("215 ROCKETMQ topic not UTF-8", rocketmq_frame(215, [(b"topic", b"\xed\xa0\x80")]), None, None),
    ("41 nested array", json_frame(41, None, DEEP_ARRAY), SE, "LockBatchRequestBody"),
    ("42 nested object", json_frame(42, None, DEEP_OBJECT), SE, "UnlockBatchRequestBody"),
    ("46 nested array", json_frame(46, None, DEEP_ARRAY), SE, "CheckClientRequestBody"),
    ("200 nested object", json_frame(200, None, DEEP_OBJECT), SE, BAD_BODY_REMARK),
    ("200 nested array", json_frame(200, None, DEEP_ARRAY), SE, BAD_BODY_REMARK),
]  # fmt: skip


async def _answer(port: int, frame: bytes) -> object:
    """The one answer to ``frame``, or the string ``"closed"`` / ``"silent"``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        decoder = FrameDecoder()
        while True:
            data = await asyncio.wait_for(reader.read(65536), ANSWER_TIMEOUT)
            if not data:
                return "closed"
            commands = decoder.feed(data)
            if commands:
                return commands[0]
    except TimeoutError:
        return "silent"
    finally:
        writer.close()


async def test_every_fuzzed_frame_is_answered_without_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    server, port = await start_writable(tmp_path / "store", log=log)
    try:
        outcomes = await asyncio.gather(*(_answer(port, frame) for _, frame, _, _ in FRAMES))
        # The server still serves after all of them.
        after = await _answer(port, json_frame(RequestCode.GET_BROKER_CLUSTER_INFO, None))
    finally:
        await kill_if_running(server)
    for (case, _, code, remark), outcome in zip(FRAMES, outcomes, strict=True):
        assert not isinstance(outcome, str), f"{case}: {outcome}"
        assert outcome.opaque == 7, case
        if code is not None:
            assert outcome.code == code, (case, outcome.code, outcome.remark)
        if remark is not None:
            assert remark in (outcome.remark or ""), (case, outcome.remark)
    assert not isinstance(after, str) and after.code == ResponseCode.SUCCESS
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "RecursionError" not in text, text[-3000:]
