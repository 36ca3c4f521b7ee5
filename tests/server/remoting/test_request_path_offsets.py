"""The compiled request path's offset family answers exactly as the Python path (issue 22).

GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP fed to two
connections over the same store, one dispatcher with the compiled path and one without it (the
reference, ``QueueOffsetProcessor``): the same bytes and transport calls, for every queue of the
Java-written store and the timestamps the real 4.9.7 store was asked (its answers are checked too),
for odd headers the compiled path must leave alone, for queues it has not opened, for the
``/metrics`` counts, and for a writable store whose queues grow between (and under) the reads.
Under ``RMQ_PURE_PYTHON=1`` only the tests that need no compiled path run.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode
from server.app import ServerSettings, build_dispatcher
from server.broker.writable_store import WritableStore
from server.remoting import request_path
from server.remoting.dispatch import Dispatcher
from server.request_stats import RequestStats
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreRecord
from tests.support.request_path import IDENTITY, NOT_UTF8, UTF8, CountingPath, frame, serve

compiled = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled request path is not in use")

SEARCH = int(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
MAX_OFFSET = int(RequestCode.GET_MAX_OFFSET)
MIN_OFFSET = int(RequestCode.GET_MIN_OFFSET)
EARLIEST = int(RequestCode.GET_EARLIEST_MSG_STORETIME)
CODES = (SEARCH, MAX_OFFSET, MIN_OFFSET, EARLIEST)


def ask(
    code: int,
    topic: str,
    queue_id: Any,
    timestamp: Any = None,
    opaque: int = 1,
    bname: str | None = None,
    req_type: str | None = None,
    **extra: Any,
) -> bytes:
    """The request as a Java client writes it (fastjson's key order, values as strings; ``req_type``:
    the ``ReqT`` field a lite pull consumer's ``StreamTypeRPCHook`` adds)."""
    fields: dict[str, str] = {"queueId": str(queue_id), "topic": topic}
    if timestamp is not None:
        fields["timestamp"] = str(timestamp)
    if bname is not None:
        fields["bname"] = bname
    if req_type is not None:
        fields["ReqT"] = req_type
    header: dict[str, Any] = {"code": code, "extFields": fields, "flag": 0, "language": "JAVA"}
    header.update({"opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 407})
    header.update(extra)
    return frame(json.dumps(header, separators=(",", ":"), ensure_ascii=False))


def dispatchers_over(store: MessageStore) -> tuple[Dispatcher, Dispatcher]:
    """(with the compiled path when built, counting what it answers; without it)."""
    fast = build_dispatcher(store, IDENTITY, ServerSettings())
    if fast.fast_path is not None:
        fast.fast_path = CountingPath(fast.fast_path)
    reference = build_dispatcher(store, IDENTITY, ServerSettings())
    reference.fast_path = None
    return fast, reference


def answered(dispatcher: Dispatcher) -> int:
    path = dispatcher.fast_path
    return path.answered if isinstance(path, CountingPath) else 0


def same_both_ways(pair: tuple[Dispatcher, Dispatcher], reads: list[bytes]) -> bytes:
    got, expected = serve(pair[0], reads), serve(pair[1], reads)
    assert got[1:] == expected[1:]
    assert got[0] == expected[0]
    return got[0]


def answers(data: bytes) -> list[dict[str, Any]]:
    """The JSON headers of the answer frames in ``data``."""
    out = []
    while data:
        length, word = struct.unpack_from(">iI", data)
        out.append(json.loads(data[8 : 8 + (word & 0xFFFFFF)]))
        data = data[4 + length :]
    return out


@pytest.fixture(scope="module")
def cq_expected(stores_dir: Path) -> dict[str, Any]:
    return json.loads((stores_dir / "java-4.9.7-a.cq-expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pair(java_store: MessageStore, cq_expected: dict[str, Any]) -> tuple[Dispatcher, Dispatcher]:
    for topic in cq_expected["topics"]:
        for queue in topic["queues"]:
            java_store.min_offset(topic["topic"], queue["queueId"])  # opened, as after a first request
    return dispatchers_over(java_store)


@compiled
def test_the_family_is_among_the_codes(pair: tuple[Dispatcher, Dispatcher]) -> None:
    fast_path = pair[0].fast_path
    assert fast_path is not None and set(CODES) <= fast_path.codes


@compiled
def test_every_queue_and_the_java_timestamps(
    pair: tuple[Dispatcher, Dispatcher], cq_expected: dict[str, Any]
) -> None:
    """Every opened queue of the golden store: all answered by the compiled path, the bytes the
    reference's, the values the real 4.9.7 store's."""
    frames, wanted = [], []
    for topic in cq_expected["topics"]:
        for queue in topic["queues"]:
            name, qid = topic["topic"], queue["queueId"]
            for code, field, value in (
                (MIN_OFFSET, "offset", queue["minOffsetInQueue"]),
                (MAX_OFFSET, "offset", queue["maxOffsetInQueue"]),
                (EARLIEST, "timestamp", queue["earliestMessageTime"]),
            ):
                frames.append(ask(code, name, qid, opaque=len(frames)))
                wanted.append({field: str(value)})
            for timestamp, offset in queue["offsetByTime"]:
                if timestamp >= 0:  # a sign is left to the reference (test_odd_headers_left_alone)
                    frames.append(ask(SEARCH, name, qid, timestamp, opaque=len(frames)))
                    wanted.append({"offset": str(offset)})
    reads = [b"".join(frames[i : i + 16]) for i in range(0, len(frames), 16)]
    before = answered(pair[0])
    out = same_both_ways(pair, reads)
    assert answered(pair[0]) - before == len(frames)
    got = answers(out)
    assert len(got) == len(frames) > 5000
    for i, header in enumerate(got):
        assert (header["code"], header["opaque"], header["extFields"]) == (0, i, wanted[i])


@compiled
def test_unopened_and_unknown_queues_are_left_to_the_python_path(java_store_config: StoreConfig) -> None:
    """A queue the store has not opened (or has none) is answered by the reference, which opens it;
    once open, the compiled path answers it."""
    with MessageStore.open(java_store_config) as store:
        pair = dispatchers_over(store)
        fast = pair[0]
        same_both_ways(pair, [ask(MAX_OFFSET, "TopicB", 2) + ask(MAX_OFFSET, "NoSuchTopic", 0)])
        same_both_ways(pair, [ask(MIN_OFFSET, "TopicB", 9)])
        assert answered(fast) == 0
        out = same_both_ways(pair, [ask(MAX_OFFSET, "TopicB", 2, opaque=7) + ask(EARLIEST, "TopicB", 2)])
        assert answered(fast) == 2
        assert answers(out)[0]["extFields"] == {"offset": "330"}  # the Java store's


@compiled
def test_the_broker_name_a_java_client_sends_is_taken(pair: tuple[Dispatcher, Dispatcher]) -> None:
    """A 4.9.7 client adds ``bname`` (``RpcRequestHeader``) to each of the four: ignored by both."""
    reads = [
        ask(MAX_OFFSET, "TopicA", 1, bname="broker-a")
        + ask(MIN_OFFSET, "TopicA", 1, bname="")
        + ask(EARLIEST, "TopicB", 0, bname="b")
        + ask(SEARCH, "TopicA", 2, 1795216834345, bname="broker-a")
    ]
    before = answered(pair[0])
    out = same_both_ways(pair, reads)
    assert answered(pair[0]) - before == 4
    assert answers(out)[0]["extFields"] == {"offset": "498"}  # the Java store's max offset of TopicA/1


@compiled
def test_the_request_type_a_lite_pull_consumer_sends_is_taken(pair: tuple[Dispatcher, Dispatcher]) -> None:
    """A client with ``enableStreamRequestType`` (a 4.9.7 ``DefaultLitePullConsumer``) adds ``ReqT``
    to every request (``StreamTypeRPCHook``): ignored by both, as by the broker."""
    reads = [
        ask(MAX_OFFSET, "TopicA", 1, bname="broker-a", req_type="0")
        + ask(MIN_OFFSET, "TopicA", 1, req_type="0")
        + ask(EARLIEST, "TopicB", 0, req_type="1")
        + ask(SEARCH, "TopicA", 2, 1795216834345, bname="broker-a", req_type="0")
    ]
    before = answered(pair[0])
    out = same_both_ways(pair, reads)
    assert answered(pair[0]) - before == 4
    assert answers(out)[0]["extFields"] == {"offset": "498"}  # the Java store's max offset of TopicA/1


@compiled
@pytest.mark.parametrize("value", NOT_UTF8 + UTF8)
def test_a_broker_name_that_is_not_utf8(pair: tuple[Dispatcher, Dispatcher], value: bytes) -> None:
    """``bname`` is ignored, and a header that is not UTF-8 is read by the reference as the broker
    reads it (U+FFFD; issue 31 item 8): the compiled path answers it as the reference does."""
    plain = ask(MAX_OFFSET, "TopicA", 1, opaque=9)
    for code in CODES:
        odd = ask(code, "TopicA", 1, 5 if code == SEARCH else None, opaque=5, bname="@")
        odd = frame(odd[8:].replace(b'"@"', b'"' + value + b'"'))
        out = same_both_ways(pair, [plain + odd + plain])
        assert b'"opaque":5' in out


#: Headers the compiled path must leave to the reference (or may take: the bytes must match).
ODD = [
    '{"code":30,"extFields":{"queueId":"007","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"-1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"+1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"99999999999","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","bname":"a","bname":"b"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","bname":null},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","ReqT":"0","ReqT":"0"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","ReqT":0},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","reqt":"0"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","lo":"true"},"flag":0,"opaque":5}',
    '{"code":30,"extFields":{"queueId":"1","topic":"TopicA","timestamp":"5"},"flag":0,"opaque":5}',
    '{"code":29,"extFields":{"queueId":"1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":29,"extFields":{"queueId":"1","topic":"TopicA","timestamp":"-1"},"flag":0,"opaque":5}',
    '{"code":29,"extFields":{"queueId":"1","topic":"TopicA","timestamp":"9223372036854775808"},"flag":0}',
    '{"code":29,"extFields":{"queueId":"1","topic":"TopicA","timestamp":"9223372036854775807"},"flag":0}',
    '{"code":29,"extFields":{"queueId":"1","topic":"TopicA","timestamp":"01"},"flag":0,"opaque":5}',
    '{"code":31,"extFields":{"queueId":"1","topic":"Topic\\u0041"},"flag":0,"opaque":5}',
    '{"code":31,"extFields":{"queueId":"1","topic":"TopicA","topic":"TopicB"},"flag":0,"opaque":5}',
    '{"code":31,"extFields":{"queueId":"1","topic":"Topic\u00e9"},"flag":0,"opaque":5}',
    '{"code":32,"extFields":{"queueId":"1","topic":"TopicA"},"flag":1,"opaque":5}',
    '{"code":32,"extFields":{"queueId":"1","topic":"TopicA"},"flag":2,"opaque":5}',
    '{"code":32,"extFields":{"queueId":1,"topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":33,"extFields":{"queueId":"1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":202,"extFields":{"queueId":"1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":14,"extFields":{"queueId":"1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"code":30, "extFields":{"queueId":"1","topic":"TopicA"},"flag":0,"opaque":5}',
    '{"extFields":{"queueId":"1","topic":"TopicA"},"code":30,"opaque":-2147483648}',
]


@compiled
@pytest.mark.parametrize("header", ODD)
def test_odd_headers_left_alone(pair: tuple[Dispatcher, Dispatcher], header: str) -> None:
    plain = ask(MAX_OFFSET, "TopicA", 1, opaque=9)
    same_both_ways(pair, [plain + frame(header) + plain])
    same_both_ways(pair, [frame(header, serialize_type=1)])  # ROCKETMQ serialization: the reference's
    same_both_ways(pair, [frame(header, body=b"x")])


@compiled
def test_counts_as_the_python_path(pair: tuple[Dispatcher, Dispatcher]) -> None:
    reads = [
        ask(MAX_OFFSET, "TopicA", 0) + ask(MIN_OFFSET, "TopicA", 1) + ask(EARLIEST, "TopicB", 3),
        ask(SEARCH, "TopicA", 2, 1795216834345) + ask(MAX_OFFSET, "TopicA", 0),
        ask(MAX_OFFSET, "NoSuchTopic", 3),
    ]
    seen = []
    for dispatcher in pair:
        dispatcher.stats = RequestStats()
        serve(dispatcher, reads)
        s = dispatcher.stats
        seen.append((s.requests, s.errors, {c: sum(b) for c, b in s.buckets.items()}))
        dispatcher.stats = None
    assert seen[0] == seen[1]
    assert seen[0][0] == {MAX_OFFSET: 3, MIN_OFFSET: 1, EARLIEST: 1, SEARCH: 1}


def _record(topic: str, queue_id: int, n: int) -> StoreRecord:
    return StoreRecord(topic=topic, queue_id=queue_id, body=b"m%d" % n, properties="TAGS\x01t\x02")


@pytest.mark.parametrize("keep", [True, False])
def test_a_growing_writable_store(tmp_path: Path, keep: bool) -> None:
    """A writable store: puts between reads move every answer as on the Python path; entries a
    writer added to a queue file since the last refresh are not seen by either path (both read to
    the queue's written end of that refresh). Runs without the compiled path too (the reference
    against itself, and the absolute values)."""
    config = StoreConfig.for_store(tmp_path / "store", mapped_file_size_commit_log=1 << 20)
    store = WritableStore(config, clock=iter(range(1_700_000_000_000, 1_800_000_000_000, 7)).__next__)
    try:
        store.create_topic("Grow", 2)
        pair = dispatchers_over(store.reader)
        if not keep:
            pair[0].fast_path = None
        maxes = []
        for round_ in range(4):
            store.put([_record("Grow", q, round_ * 10 + i) for q in (0, 1) for i in range(round_ + 1)])
            read = b"".join(
                ask(code, "Grow", q, 1_700_000_000_020 if code == SEARCH else None, opaque=round_ + code)
                for q in (0, 1, 2)
                for code in CODES
            )
            out = same_both_ways(pair, [read])
            maxes.append([h["extFields"] for h in answers(out)][1])
        assert maxes == [{"offset": str(n)} for n in (1, 3, 6, 10)]
        if keep and request_path.COMPILED:
            # queues 0 and 1 of rounds 1-3 (the first round opened them; queue 2 has no directory)
            assert answered(pair[0]) == 3 * 8
        # An entry appended to the file behind the store's back (no refresh): neither path sees it.
        queue = store.reader.queues.get("Grow", 0)
        path = queue.directory / f"{0:020d}"  # type: ignore[operator]
        with open(path, "r+b") as f:
            f.seek(10 * 20)
            f.write(struct.pack(">qiq", 0, 100, 0))
        out = same_both_ways(pair, [ask(MAX_OFFSET, "Grow", 0, opaque=3)])
        assert answers(out)[0]["extFields"] == {"offset": "10"}
    finally:
        store.close()


@pytest.mark.parametrize("code", CODES)
def test_replacing_a_processor_it_stands_for_drops_it(java_store: MessageStore, code: int) -> None:
    dispatcher = build_dispatcher(java_store, IDENTITY, ServerSettings())
    assert (dispatcher.fast_path is not None) == request_path.COMPILED
    dispatcher.register(code, lambda request: None)
    assert dispatcher.fast_path is None
