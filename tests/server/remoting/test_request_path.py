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
from typing import Any

import pytest

from clients.samples import sample_store
from protocol.codes import RequestCode
from server.acl.config import AclConfig
from server.app import ServerSettings, build_dispatcher
from server.remoting import request_path
from server.remoting.connection import FLUSH_BYTES, RemotingConnection
from server.remoting.dispatch import Dispatcher
from server.request_stats import RequestStats
from store.message_store import MessageStore
from tests.support.request_path import (
    IDENTITY,
    MAX,
    NOT_UTF8,
    QUERY,
    UTF8,
    VIEW,
    CountingPath,
    Recorder,
    frame,
    query,
    query_header,
    serve,
    split_frames,
    view,
)

compiled = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled request path is not in use")


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
def keys(java_store_dir: Any) -> list[tuple[str, str]]:
    samples = sample_store(java_store_dir)
    return samples.keys + samples.unique_keys


@pytest.fixture(scope="module")
def offsets(java_store_dir: Any) -> list[int]:
    return sample_store(java_store_dir).offsets


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


@pytest.mark.parametrize("code", [VIEW, QUERY])
def test_replacing_a_processor_it_stands_for_drops_it(java_store: MessageStore, code: int) -> None:
    dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
    dispatcher.register(int(RequestCode.GET_TOPIC_STATS_INFO), lambda request: None)
    assert (dispatcher.fast_path is not None) == request_path.COMPILED
    dispatcher.register(code, lambda request: None)
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


#: Header keys a letter or two away from ours (the compiled path reads a key and its colon as one
#: literal chosen by the first letter, ``_request_path_fast.c``'s ``parse_header``): each must be
#: left to the reference, which ignores an unknown key (so "opaqu" leaves the opaque 0) and decodes
#: an escaped one. A path that matched a prefix or the first letter would answer another opaque,
#: code or flag.
NEAR_KEYS = [
    '{"code":33,"extFields":{"offset":"0"},"opaqu":5}',
    '{"code":33,"extFields":{"offset":"0"},"opaqueX":5}',
    '{"code":33,"extFields":{"offset":"0"},"o":5}',
    '{"codeX":30,"code":33,"extFields":{"offset":"0"},"opaque":5}',
    '{"cod":33,"extFields":{"offset":"0"},"opaque":5}',
    '{"c":33,"extFields":{"offset":"0"},"opaque":5}',
    '{"code":33,"extField":{"offset":"0"},"opaque":5}',
    '{"code":33,"extFieldsX":{"offset":"1"},"extFields":{"offset":"0"},"opaque":5}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"flags":2}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"versio":1}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"languag":"JAVA"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"remarks":"x"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"serializeTypeCurrentRPCX":"JSON"}',
    '{"code" :33,"extFields":{"offset":"0"},"opaque":5}',
    '{"\\u0063ode":33,"extFields":{"offset":"0"},"opaque":5}',
    '{"opaque":5,"extFields":{"offset":"0"},"\\u006fpaque":6,"code":33}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"language":"JA\x7fVA"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"language":"JA\tVA"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"remark":"\u00e9t\u00e9"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"remark":"a\\nb"}',
    '{"code":33,"extFields":{"offset":"0"},"opaque":5,"remark":"',
]


@compiled
@pytest.mark.parametrize("header", NEAR_KEYS)
def test_keys_near_ours_are_the_references(
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


@compiled
def test_many_queries_found_and_missing(
    dispatchers: tuple[Dispatcher, Dispatcher], keys: list[tuple[str, str]]
) -> None:
    rng = random.Random(12)
    frames = []
    for i in range(200):
        topic, key = rng.choice(keys)
        choice = rng.random()
        if choice < 0.1:
            key += "-missing"
        elif choice < 0.2:
            topic = "NoSuchTopic"
        fields: dict[str, str] = {}
        if rng.random() < 0.3:
            fields["maxNum"] = str(rng.choice([0, 1, 2, 5, 32, 64, 65, 1000, 999999999]))
        if rng.random() < 0.3:
            fields["beginTimestamp"] = str(rng.choice([0, 1, 10**12, 1_700_000_000_000, MAX]))
            fields["endTimestamp"] = str(rng.choice([0, 1, 10**12, 1_700_000_000_000, MAX]))
        unique = rng.choice([None, True, False])
        frames.append(query(topic, key, opaque=i, unique=unique, **fields))
    counter = dispatchers[0].fast_path
    assert isinstance(counter, CountingPath)
    reads = [b"".join(frames[i : i + 8]) for i in range(0, len(frames), 8)]
    out = same_both_ways(dispatchers, reads)
    assert b'"code":22,' in out and b'"code":0,' in out
    # One query per read: each with a key JSON needs no escape for is answered by the compiled path.
    before = counter.answered
    same_both_ways(dispatchers, frames)
    assert counter.answered - before == sum(b"\\" not in f for f in frames) > 150


ODD_QUERY_FIELDS: list[dict[str, str]] = [
    {"maxNum": "-1"},
    {"maxNum": "007"},
    {"maxNum": "2147483648"},
    {"maxNum": "x"},
    {"beginTimestamp": "-5"},
    {"endTimestamp": "99999999999999999999"},
    {"endTimestamp": "9223372036854775808"},
    {"endTimestamp": "09223372036854775807"},
    {"beginTimestamp": "0009"},
    {"endTimestamp": "0x10"},
    {"topic": "Topic\u0041"},
    {"key": "caf\u00e9"},
    {"key": ""},
    {"key": "\ud800x"},
    {"key": "tab\there"},
    {"key": "del\x7f"},
    {"topic": ""},
    {"_UNIQUE_KEY_QUERY": "TRUE"},
    {"extra": "1"},
]


@compiled
@pytest.mark.parametrize("fields", ODD_QUERY_FIELDS)
def test_odd_query_fields(
    dispatchers: tuple[Dispatcher, Dispatcher], keys: list[tuple[str, str]], fields: dict[str, str]
) -> None:
    topic, key = keys[0]
    fields = dict(fields)
    header = query_header(fields.pop("topic", topic), fields.pop("key", key), opaque=5, **fields)
    odd = frame(header.replace("\\\\u", "\\u"))  # a JSON \u escape, not an escaped backslash
    same_both_ways(dispatchers, [query(topic, key, opaque=4) + odd + query(topic, key, opaque=6)])
    for name in ("topic", "key", "maxNum", "beginTimestamp", "endTimestamp"):
        header = json.loads(query(topic, key)[8:])
        del header["extFields"][name]
        same_both_ways(
            dispatchers, [query(topic, key, opaque=4) + frame(json.dumps(header, separators=(",", ":")))]
        )


@compiled
@pytest.mark.parametrize("value", NOT_UTF8 + UTF8)
def test_a_value_it_does_not_decode_must_be_utf8_too(
    dispatchers: tuple[Dispatcher, Dispatcher], keys: list[tuple[str, str]], value: bytes
) -> None:
    """``_UNIQUE_KEY_QUERY`` is only compared with "true" here, but a header that is not UTF-8 is read
    by the reference as the broker reads it (``new String(bytes, UTF_8)``: U+FFFD, so not "true";
    issue 31 item 8): the compiled path must answer it exactly so, or leave it to the reference."""
    topic, key = keys[0]
    odd = frame(
        query_header(topic, key, opaque=5, unique=True).encode().replace(b'"true"', b'"' + value + b'"')
    )
    out = same_both_ways(dispatchers, [query(topic, key, opaque=4) + odd + query(topic, key, opaque=6)])
    assert b'"opaque":5' in out  # answered either way; as the reference answers it


@compiled
def test_queries_handed_to_the_pool_and_refused(
    java_store: MessageStore, keys: list[tuple[str, str]]
) -> None:
    """With an inline budget of one entry every query with hits goes to the pool (an answer from a
    task), and with the pool full it is refused SYSTEM_BUSY: both as the Python path answers."""
    from server.query_pool import QueryPool
    from server.remoting.processors.query_message import QueryMessageProcessor

    class FullPool(QueryPool):
        @property
        def full(self) -> bool:
            return True

    async def run(with_fast: bool, full: bool) -> tuple[bytes, dict[int, int]]:
        pool = FullPool(1) if full else QueryPool(1)
        try:
            dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
            processor = QueryMessageProcessor(java_store, pool=pool, inline_budget=1)
            dispatcher.register(QUERY, processor.query_message)
            dispatcher.fast_path = (
                request_path.RequestPath(java_store, processor.view_max_size, dispatcher, processor)
                if with_fast
                else None
            )
            dispatcher.stats = RequestStats()
            transport = Recorder()
            connection = RemotingConnection(dispatcher, idle_timeout=0)
            transport.protocol = connection
            connection.connection_made(transport)  # type: ignore[arg-type]
            stream = b"".join(query(t, k, opaque=i) for i, (t, k) in enumerate(keys[:12]))
            connection.data_received(stream)
            for _ in range(200):
                if not connection.in_flight:
                    break
                await asyncio.sleep(0.01)
            connection.connection_lost(None)
            return bytes(transport.data), dict(dispatcher.stats.requests)
        finally:
            pool.close()

    for full in (False, True):
        got = asyncio.run(run(True, full))
        expected = asyncio.run(run(False, full))
        # Answers from the pool may come in any order: compare them frame by frame, sorted.
        assert sorted(split_frames(got[0])) == sorted(split_frames(expected[0]))
        assert got[1] == expected[1]


@compiled
def test_query_answers_trimmed_to_the_frame_limit(
    java_store: MessageStore, keys: list[tuple[str, str]], offsets: list[int]
) -> None:
    """With a small frame limit a query's records are cut to whole records below it (none left:
    QUERY_NOT_FOUND), and a VIEW's record over it is no message: the same both ways."""
    limit = 4096 + 2000  # the processors keep 4096 bytes for the header
    fast = build_dispatcher(java_store, IDENTITY, ServerSettings(max_frame_length=limit))
    reference = build_dispatcher(java_store, IDENTITY, ServerSettings(max_frame_length=limit))
    reference.fast_path = None
    assert fast.fast_path is not None
    stream = b"".join(query(t, k, opaque=i) for i, (t, k) in enumerate(keys[:40]))
    stream += b"".join(view(o, opaque=i) for i, o in enumerate(offsets[:40]))
    for reads in ([stream], [stream[:1000], stream[1000:]]):
        got = serve(fast, reads, max_frame_length=1 << 20)
        expected = serve(reference, reads, max_frame_length=1 << 20)
        assert got == expected
    assert b'"code":22,' in got[0] and b'"code":0,' in got[0]
    assert max(len(f) for f in split_frames(got[0])) <= limit
    untrimmed = serve(build_dispatcher(java_store, IDENTITY, ServerSettings()), [stream])[0]
    assert max(len(f) for f in split_frames(untrimmed)) > limit  # so something was trimmed
