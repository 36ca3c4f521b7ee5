"""The compiled request path (``server.remoting.request_path``) answers exactly as the Python path.

Two dispatchers over the same Java-written store, one with the compiled path and one without it (the
reference), each behind a ``RemotingConnection`` on a recording transport: the same reads must give
the same bytes written and the same transport calls (pause, close), whatever the reads hold: plain
VIEWs of found and missing records, VIEWs the compiled path must leave to the reference (odd headers,
bad offsets, oneway, responses, a body, ROCKETMQ serialization), other codes, frames split across
reads at every byte, truncated and malformed frames, more answers than one flush, a peer that stops
reading. Run with ``RMQ_PURE_PYTHON=1`` the dispatcher has no compiled path and only the tests that
say so run.
"""

from __future__ import annotations

import asyncio
import json
import random
import struct
from collections.abc import Iterable
from typing import Any

import pytest

from clients.samples import sample_store
from protocol.codes import RequestCode
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from server.acl.config import AclConfig
from server.app import ServerSettings, build_dispatcher
from server.identity import BrokerIdentity
from server.remoting import request_path
from server.remoting.connection import FLUSH_BYTES, RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.remoting.refusal import IncompleteRequests
from server.request_stats import RequestStats
from store.message_store import MessageStore

compiled = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled request path is not in use")

VIEW = int(RequestCode.VIEW_MESSAGE_BY_ID)
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
    head = header.encode() if isinstance(header, str) else header
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


@pytest.fixture(scope="module")
def dispatchers(java_store: MessageStore) -> tuple[Dispatcher, Dispatcher]:
    """(with the compiled path when built, without it), both counting requests."""
    fast = build_dispatcher(java_store, IDENTITY, ServerSettings())
    if fast.fast_path is not None:
        fast.fast_path = CountingPath(fast.fast_path)
    reference = build_dispatcher(java_store, IDENTITY, ServerSettings())
    reference.fast_path = None
    fast.stats = RequestStats()
    reference.stats = RequestStats()
    return fast, reference


@pytest.fixture(scope="module")
def offsets(java_store_dir: Any) -> list[int]:
    return sample_store(java_store_dir).offsets


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


def same_both_ways(dispatchers: tuple[Dispatcher, Dispatcher], reads: list[bytes], **kwargs: Any) -> bytes:
    fast, reference = dispatchers
    got = serve(fast, reads, **kwargs)
    expected = serve(reference, reads, **kwargs)
    assert got[1:] == expected[1:]
    assert got[0] == expected[0]
    return got[0]


@compiled
def test_the_compiled_path_is_in_use(dispatchers: tuple[Dispatcher, Dispatcher]) -> None:
    assert dispatchers[0].fast_path is not None


def test_pure_python_has_no_compiled_path(java_store: MessageStore) -> None:
    dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
    assert (dispatcher.fast_path is not None) == request_path.COMPILED


def test_access_control_turns_it_off(java_store: MessageStore) -> None:
    """Every request must be checked first: the compiled path checks nothing, so it is not used."""
    settings = ServerSettings(acl=AclConfig())
    assert build_dispatcher(java_store, IDENTITY, settings).fast_path is None


def test_replacing_the_view_processor_drops_it(java_store: MessageStore) -> None:
    dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
    dispatcher.register(int(RequestCode.QUERY_MESSAGE), lambda request: None)
    assert (dispatcher.fast_path is not None) == request_path.COMPILED
    dispatcher.register(VIEW, lambda request: None)
    assert dispatcher.fast_path is None


@compiled
def test_many_views_found_and_missing(dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int]) -> None:
    rng = random.Random(22)
    wanted = [rng.choice(offsets) for _ in range(300)]
    wanted += [offsets[-1] + 1, 0, 1, 3, 10**17, 999_999_999_999_999_999, 2**31, offsets[-1] * 10]
    frames = [view(o, opaque=rng.randrange(-(2**31), 2**31)) for o in wanted]
    reads = [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)]
    counter = dispatchers[0].fast_path
    assert isinstance(counter, CountingPath)
    before = counter.answered
    out = same_both_ways(dispatchers, reads)
    assert counter.answered - before == len(wanted)  # every one of them answered by the compiled path
    assert out.count(b'"code":0,') >= 300 and b"can not find message by the offset" in out


@compiled
def test_counts_as_the_python_path(java_store: MessageStore, offsets: list[int]) -> None:
    stats = []
    for keep in (True, False):
        dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
        if not keep:
            dispatcher.fast_path = None
        dispatcher.stats = RequestStats()
        serve(dispatcher, [b"".join(view(o) for o in (offsets[1], offsets[2], 5, offsets[3]))])
        s = dispatcher.stats
        stats.append((s.requests, s.errors, {c: sum(b) for c, b in s.buckets.items()}))
    assert stats[0] == stats[1]
    assert stats[0][0] == {VIEW: 4}


#: VIEW headers the compiled path must leave to the reference (or may take: the bytes must match).
ODD_HEADERS = [
    '{"code":33,"extFields":{"offset":"007"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"-5"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"+5"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":" 5"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"1234567890123456789"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"99999999999999999999999"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":""},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"12a"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{},"flag":0,"opaque":5}',
    '{"code":33,"extFields":null,"flag":0,"opaque":5}',
    '{"code":33,"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"offset":"0","x":"1"},"opaque":5}',
    '{"code":33,"extFields":{"offset":5},"opaque":5}',
    '{"extFields":{"offset":"0"},"code":33}',
    '{"code":33,"extFields":{"offset":"0"}}',
    '{ "code":33,"extFields":{"offset":"0"},"opaque":6}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":6,"code":33}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":-0}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":01}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":2147483648}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":-2147483648}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":1.5}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"language":"PYTHON","remark":"hi"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"language":"WHATEVER","remark":null}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"language":3}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"serializeTypeCurrentRPC":"ROCKETMQ"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"unknown":1}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"flag":2}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"flag":1}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"flag":4}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7,"version":99999999999}',
    '{"code":33,"extFields":{"\\u006ffset":"0"},"opaque":7}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7}  ',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7}x',
    '{"code":33,"extFields":{"offset":"0"},"opaque":7',
    '{"code":34,"extFields":{"offset":"0"},"opaque":7}',
    '{"code":9999,"extFields":{"offset":"0"},"opaque":7}',
    '{"code":30,"extFields":{"topic":"TopicA","queueId":"0"},"opaque":8}',
    '{"code":12,"extFields":{"topic":"TopicA","key":"k-3","maxNum":"64","beginTimestamp":"0",'
    '"endTimestamp":"9223372036854775807"},"opaque":9}',
    "{}",
    "",
]


@compiled
@pytest.mark.parametrize("header", ODD_HEADERS)
def test_odd_headers_between_plain_views(
    dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int], header: str
) -> None:
    before, after = view(offsets[1], opaque=11), view(offsets[2], opaque=12)
    same_both_ways(dispatchers, [before + frame(header) + after])
    same_both_ways(dispatchers, [frame(header) + before, after])


@compiled
def test_frames_the_compiled_path_leaves_alone(
    dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int]
) -> None:
    plain = view(offsets[4], opaque=3)
    header = plain[8:]
    cases = [
        frame(header, body=b"xyz"),  # a body
        frame(header, serialize_type=1),  # ROCKETMQ serialization word, JSON text: malformed there
        view(offsets[4], opaque=3, flag=2),  # oneway: run, not answered
        view(offsets[4], opaque=3, flag=1),  # a response nobody asked for: ignored
    ]
    for case in cases:
        same_both_ways(dispatchers, [plain + case + plain])


@compiled
def test_split_across_reads_at_every_byte(
    dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int]
) -> None:
    stream = b"".join(view(o, opaque=i) for i, o in enumerate([*offsets[:3], 77]))
    for cut in range(1, len(stream)):
        same_both_ways(dispatchers, [stream[:cut], stream[cut:]])
    rng = random.Random(5)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), 4))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        same_both_ways(dispatchers, pieces)


@compiled
def test_truncated_and_malformed(dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int]) -> None:
    good = view(offsets[5], opaque=1) + view(offsets[6], opaque=2)
    partial = view(offsets[7], opaque=3)
    for cut in (1, 3, 4, 7, 8, 20, len(partial) - 1):
        same_both_ways(dispatchers, [good + partial[:cut]], eof=True)
    garbage = struct.pack(">i", -5) + b"\0" * 8
    same_both_ways(dispatchers, [good + garbage])
    same_both_ways(dispatchers, [good + struct.pack(">ii", 100, 200) + b"\0" * 100])  # header > frame
    same_both_ways(dispatchers, [good + struct.pack(">ii", 1 << 30, 10)])  # over the frame limit
    same_both_ways(dispatchers, [good + frame("{}", serialize_type=7)])  # unknown serialization
    small = view(offsets[5], opaque=1)
    same_both_ways(dispatchers, [small + small], max_frame_length=len(small) + 3)  # limit - 4 + 4
    same_both_ways(dispatchers, [small + small], max_frame_length=len(small) - 1)


@compiled
def test_answers_past_one_flush_and_a_peer_that_stops_reading(
    dispatchers: tuple[Dispatcher, Dispatcher], java_store: MessageStore, offsets: list[int]
) -> None:
    sizes = [len(java_store.view_message_copy(o, 1 << 24) or b"") for o in offsets[:50]]
    count = FLUSH_BYTES // max(1, min(sizes)) * 2 + 10
    stream = b"".join(view(offsets[i % 50], opaque=i) for i in range(count))
    out = same_both_ways(dispatchers, [stream])
    assert len(out) > FLUSH_BYTES
    # The peer stops reading at the first write: the rest waits decoded, answered once it reads.
    for resume in (False, True):
        same_both_ways(dispatchers, [stream], pause_after_writes=1, resume=resume)
        same_both_ways(dispatchers, [stream[:5000], stream[5000:]], pause_after_writes=1, resume=resume)


@compiled
def test_random_mixtures(dispatchers: tuple[Dispatcher, Dispatcher], offsets: list[int]) -> None:
    rng = random.Random(2222)
    pool = [frame(h) for h in ODD_HEADERS[:-2]]
    for _ in range(60):
        frames = [
            view(rng.choice(offsets), opaque=rng.randrange(1 << 31))
            if rng.random() < 0.7
            else rng.choice(pool)
            for _ in range(rng.randrange(1, 20))
        ]
        stream = b"".join(frames)
        cuts = sorted(rng.sample(range(1, len(stream)), min(3, len(stream) - 1)))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        same_both_ways(dispatchers, pieces, eof=rng.random() < 0.5)
