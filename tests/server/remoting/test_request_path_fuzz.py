"""Mutated frames through the compiled request path answer as through the Python path (issue 22).

A bounded fuzzer (fixed seed, a few seconds): valid VIEW, QUERY_MESSAGE, GET_MAX/MIN_OFFSET,
GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP headers over the Java-written store, with
their fields changed (odd, huge or negative numbers, other types, unicode, long strings, fields added
or dropped, the code changed) and their JSON text damaged (bits flipped, cut, bytes inserted or
deleted, keys duplicated), a few per read, some reads split in two, are fed to two connections: one
with the compiled path, one without it (the reference). The bytes written and the transport calls
must be the same; a crash is a failure too. Run under AddressSanitizer it is the memory check of
the C side's parsing (``server/remoting/_request_path_fast.c``). Skipped without the compiled path.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from clients.samples import sample_store
from protocol.codes import RequestCode
from server.app import ServerSettings, build_dispatcher
from server.remoting import request_path
from server.remoting.dispatch import Dispatcher
from store.message_store import MessageStore
from tests.support.request_path import IDENTITY, MAX, QUERY, VIEW, CountingPath, frame, serve

pytestmark = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled request path is not in use")

SEARCH = int(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
FAMILY = (
    int(RequestCode.GET_MAX_OFFSET),
    int(RequestCode.GET_MIN_OFFSET),
    int(RequestCode.GET_EARLIEST_MSG_STORETIME),
)
QUEUES = [("TopicA", 0), ("TopicA", 1), ("TopicA", 2), ("TopicB", 0), ("TopicB", 2)]
NUMBERS = ["0", "-0", "-1", "00", "007", str(MAX), str(MAX + 1), str(-MAX - 1), "9" * 26, "2147483648", "1e3",
           "1.5", "0x10", " 1", "+1", "", "\u0661", "NaN", "null"]  # fmt: skip
TEXTS = ["", "\u00e9", "\U0001f600", "\\u0000", "\\ud800", '\\"', "\x7f", "k" * 3000, "\u2028"]
INSERTS = [b",", b'"', b"{", b"}", b"\\", b"\xff", b"\xc3", b"\xed\xa0\x80", b'"x":"1",', b"\x00", b" "]


def seeds(rng: random.Random, offsets: list[int], keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Valid requests as a Java client sends them (code and extFields)."""
    topic, key = rng.choice(keys)
    query = {"topic": topic, "key": key, "maxNum": rng.choice(["1", "3", "64"]), "beginTimestamp": "0"}
    query["endTimestamp"] = str(MAX)
    if rng.random() < 0.4:
        query["_UNIQUE_KEY_QUERY"] = "true"
    out = [
        {"code": VIEW, "extFields": {"offset": str(rng.choice(offsets))}},
        {"code": QUERY, "extFields": query},
    ]
    name, queue_id = rng.choice(QUEUES)
    for code in (*FAMILY, SEARCH):
        fields = {"queueId": str(queue_id), "topic": name}
        if code == SEARCH:
            fields["timestamp"] = str(rng.choice([0, 1700000000000, 1795216834345, 2**62]))
        if rng.random() < 0.5:
            fields["bname"] = "broker-a"
        out.append({"code": code, "extFields": fields})
    return out


def changed(request: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Fields changed: numbers, texts, types, fields added or dropped, another code."""
    fields = dict(request["extFields"])
    code = request["code"]
    for _ in range(rng.randrange(1, 3)):
        name = rng.choice(list(fields)) if fields else "offset"
        r = rng.random()
        if r < 0.35:
            fields[name] = rng.choice(NUMBERS)
        elif r < 0.55:
            fields[name] = str(fields.get(name, "")) + rng.choice(TEXTS)
        elif r < 0.65:
            fields.pop(name, None)
        elif r < 0.75:
            fields[name] = rng.choice([None, 5, [], {}, 1.5, True])
        elif r < 0.85:
            fields[rng.choice(["x", "bname", "timestamp", "offset", "key", "topic"])] = rng.choice(
                NUMBERS + TEXTS
            )
        else:
            code = rng.choice([VIEW, QUERY, SEARCH, *FAMILY, 34, 0, -1, 2**31])
    return {"code": code, "extFields": fields}


def text(request: dict[str, Any], rng: random.Random) -> bytes:
    """The JSON header as fastjson writes it (sometimes in another key order, sometimes ASCII only)."""
    header = {"code": request["code"], "extFields": request["extFields"], "flag": 0, "language": "JAVA"}
    header.update(
        {"opaque": rng.randrange(-(2**31), 2**31), "serializeTypeCurrentRPC": "JSON", "version": 407}
    )
    if rng.random() < 0.2:
        names = list(header)
        rng.shuffle(names)
        header = {name: header[name] for name in names}
    ascii_only = rng.random() < 0.3
    return json.dumps(header, separators=(",", ":"), ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def damaged(head: bytes, rng: random.Random) -> bytes:
    """The JSON text damaged: bits flipped, cut, bytes inserted (some not UTF-8, in a value) or
    deleted, a key duplicated."""
    b = bytearray(head)
    r = rng.random()
    if r < 0.25 and b:
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif r < 0.45:
        del b[rng.randrange(len(b) + 1) :]
    elif r < 0.6:
        at = rng.randrange(len(b) + 1)
        b[at:at] = rng.choice(INSERTS)
    elif r < 0.7:
        values = [i + 3 for i in range(len(b)) if b[i : i + 3] == b'":"']
        if values:  # bytes that are not UTF-8 inside a string value
            at = rng.choice(values)
            b[at:at] = rng.choice(
                [b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"]
            )
    elif r < 0.8:
        at = b.find(b'"extFields":{')
        duplicate = rng.choice([b'"offset":"1",', b'"topic":"TopicB",', b'"queueId":"3",', b'"key":"x",'])
        b[at + 13 : at + 13] = duplicate if at >= 0 else b""
    elif b:
        at = rng.randrange(len(b))
        del b[at : at + rng.randrange(1, 20)]
    return bytes(b)


def mutated_frame(pool: list[dict[str, Any]], rng: random.Random) -> bytes:
    request = rng.choice(pool)
    if rng.random() < 0.5:
        return frame(text(request, rng))
    if rng.random() < 0.7:
        request = changed(request, rng)
    head = text(request, rng)
    if rng.random() < 0.6:
        head = damaged(head, rng)
    r = rng.random()
    if r < 0.03:
        return frame(head, body=b"x")
    if r < 0.06:
        return frame(head, serialize_type=rng.choice([1, 2, 255]))
    if r < 0.08:
        out = bytearray(frame(head))
        out[rng.randrange(8)] ^= 1 << rng.randrange(8)
        return bytes(out)
    return frame(head)


@pytest.fixture(scope="module")
def pair(java_store: MessageStore) -> tuple[Dispatcher, Dispatcher]:
    for name, queue_id in QUEUES:
        java_store.min_offset(name, queue_id)  # opened, as after a first request
    fast = build_dispatcher(java_store, IDENTITY, ServerSettings())
    fast.fast_path = CountingPath(fast.fast_path)
    reference = build_dispatcher(java_store, IDENTITY, ServerSettings())
    reference.fast_path = None
    return fast, reference


def test_mutated_frames_answer_as_the_python_path(
    pair: tuple[Dispatcher, Dispatcher], java_store_dir: Any
) -> None:
    samples = sample_store(java_store_dir)
    keys = samples.keys + samples.unique_keys
    rng = random.Random(22)
    counter = pair[0].fast_path
    assert isinstance(counter, CountingPath)
    for n in range(3000):
        pool = seeds(rng, samples.offsets, keys)
        data = b"".join(mutated_frame(pool, rng) for _ in range(rng.randrange(1, 6)))
        reads = [data]
        if rng.random() < 0.2 and len(data) > 1:
            cut = rng.randrange(1, len(data))
            reads = [data[:cut], data[cut:]]
        got, expected = serve(pair[0], reads), serve(pair[1], reads)
        assert got == expected, (n, reads)
    assert counter.answered > 2000  # the compiled path answered the frames before the first odd one
