"""Plain batches stored by the compiled request path itself store and answer as the Python path (issue 33).

``_request_path_plain.h``'s ``plain_batch`` splits a SEND_BATCH_MESSAGE body (``_batch_body.h``, the
format the body decoder reads too), joins each message's own properties with the batch's (its
header's, CLUSTER put, WAIT kept), encodes one record per message with consecutive queue offsets and
answers with the offset ids joined by commas; the Python path (``SendMessageProcessor.store_send``:
``batch_records``, the writer's uniform append) is the reference. Two sides (``send_sides``: compiled
and not, the same still clock and store address) get the same reads: the answers (a QUERY by key and
by unique key in the same read, right after the batch's answer, included), the CommitLog bytes, the
queues' ends and the ``/metrics`` counts must be the same, over a seeded fuzzer of batch shapes.
Each batch the C side must leave is checked to reach the callback, and the roll-over at the file's
end, a full disk and a cut file at the group's write to be answered as the Python path answers them.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.frame import decode_frames
from protocol.message_properties import properties_to_string
from server.remoting import request_path, send_group
from server.remoting.processors.send_message import SendMessageProcessor
from server.remoting.send_group import SendGroup
from store.write.writer import CommitLogCutError, CommitLogFullError
from tests.support.request_path import Recorder, query
from tests.support.send_sides import SEND, SEND_BATCH, TOPIC, Side, both, open_sides, send, send_v1

pytestmark = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled path is not built")


class Counts:
    """On the compiled side: the SENDs answered by the callback (``SendGroup.answer``), and those the
    C side stored itself (the groups ``SendGroup.flush_plain`` makes: SENDs answered; the records
    written, ``SendMessageProcessor.append_encoded``; the flushes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.callback = self.plain = self.records = self.flushes = 0
        answer, append, plain = SendGroup.answer, SendMessageProcessor.append_encoded, send_group._Plain

        def counted_answer(group: SendGroup, *args: Any) -> Any:
            self.callback += 1
            return answer(group, *args)

        def counted_append(sends: SendMessageProcessor, *args: Any) -> Any:
            self.flushes += 1
            self.records += args[3]
            return append(sends, *args)

        def counted_plain(ats: list[int], *args: Any) -> Any:
            self.plain += len(ats)
            return plain(ats, *args)

        monkeypatch.setattr(SendGroup, "answer", counted_answer)
        monkeypatch.setattr(SendMessageProcessor, "append_encoded", counted_append)
        monkeypatch.setattr(send_group, "_Plain", counted_plain)


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[tuple[Side, Side]]:
    async with open_sides(tmp_path, multi_tag="Multi") as pair:
        yield pair


_HEAD = struct.Struct(">iiiii")


def body_of(messages: list[tuple[int, bytes, bytes]]) -> bytes:
    """A batch body of (flag, body, raw properties) as ``MessageDecoder.encodeMessages`` lays it out,
    the properties as given (so also ending with 2, empty or not UTF-8)."""
    parts = []
    for flag, body, props in messages:
        head = _HEAD.pack(22 + len(body) + len(props), 0, 0, flag, len(body))
        parts.append(head + body + struct.pack(">h", len(props)) + props)
    return b"".join(parts)


def a_batch(
    opaque: int,
    messages: list[tuple[int, bytes, bytes]],
    *,
    properties: str | None = "WAIT\x01true",
    **fields: Any,
) -> bytes:
    """SEND_BATCH_MESSAGE (or another code with ``code``) of ``messages``, the batch flag set."""
    fields.setdefault("code", SEND_BATCH)
    return send(opaque, body=body_of(messages), properties=properties, m="true", **fields)


def java_message(opaque: int, i: int, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """A message as the Java producer puts it in a batch: KEYS, UNIQ_KEY and WAIT."""
    props = {"KEYS": f"k{opaque}-{i} two{opaque}-{i}", "UNIQ_KEY": f"U{opaque:020d}{i:04d}", "WAIT": "true"}
    return 0, body or b"m%d-%d" % (opaque, i), properties_to_string(props).encode()


NAME_CHARS = "abcXYZ_09-.\u00e9\u4e2d\U0001f600 ="


def random_own(rng: random.Random, opaque: int, i: int) -> bytes:
    """A message's own properties: the Java client's, none, random names and values, a trailing 2,
    a malformed item, bytes that are not UTF-8."""
    r = rng.random()
    if r < 0.4:
        return java_message(opaque, i)[2]
    if r < 0.5:
        return b""
    items = [f"KEYS\x01r{opaque}-{i}"] if rng.random() < 0.7 else []
    for _ in range(rng.randint(0, 8)):
        name = "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(1, 6)))
        value = "".join(rng.choice(NAME_CHARS + "\x01") for _ in range(rng.randint(0, 10)))
        items.append(f"{name}\x01{value}")
    own = "\x02".join(items).encode()
    if r < 0.6:
        own += b"\x02"
    elif r < 0.65:
        own += b"\x02bad\xff\x01v"
    return own


def random_header_properties(rng: random.Random) -> str | None:
    """The batch's own properties: none, the Java client's, or random shapes (never a delay, a timer or
    a half message: those are the callback's, below)."""
    r = rng.random()
    if r < 0.2:
        return None
    if r < 0.6:
        return "WAIT\x01true"
    items = []
    for _ in range(rng.randint(0, 20)):
        name = rng.choice(["WAIT", "CLUSTER", "TAGS", "x", "\u00e9t\u00e9", "AaAa", "BBBB"])
        items.append(f"{name}\x01{rng.randint(0, 99)}")
    return "\x02".join(items)


def answers(out: bytes) -> list[dict[str, Any]]:
    """The JSON headers of the frames in ``out``."""
    commands, _ = decode_frames(out, len(out) + 1, len(out) + 1)
    return [{"code": c.code, "opaque": c.opaque, "ext": c.ext_fields or {}} for c in commands]


async def test_random_batch_shapes_store_and_answer_as_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seeded fuzzer over batch shapes (1..40 messages, bodies empty to large, the messages' own
    properties and the batch's, flags, compressed or not, both codes, both topics, IPv4 hosts), with
    single SENDs between them and a QUERY by key and by unique key right after: all the same as the
    Python path, each batch within the size limit stored by the C side."""
    counts = Counts(monkeypatch)
    rng = random.Random(31)
    opaque = itertools.count(1)
    batches = plain_expected = sent = 0
    for _ in range(30):
        frames: list[bytes] = []
        keys: list[tuple[str, str, bool]] = []
        for _ in range(rng.randint(1, 4)):
            o = next(opaque)
            sent += 1
            if rng.random() < 0.25:
                frames.append(send(o, queue_id=rng.randrange(4)))
                plain_expected += 1
                continue
            n = rng.randint(1, 40)
            messages = [
                (
                    rng.choice([0, 1, -1, 7, 2**31 - 1]),
                    bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 60, 200]))),
                    random_own(rng, o, i),
                )
                for i in range(n)
            ]
            topic = rng.choice([TOPIC, "Multi"])
            fields: dict[str, Any] = {"f": rng.choice([0, 1, 2, 3, 0x10, 0x20, 0x101])}
            if rng.random() < 0.3:
                fields["j"] = rng.randint(0, 5)
            frame_ = a_batch(
                o,
                messages,
                properties=random_header_properties(rng),
                topic=topic,
                queue_id=rng.randrange(4),
                code=rng.choice([SEND_BATCH, SEND]),
                **fields,
            )
            frames.append(frame_)
            batches += 1
            if len(body_of(messages)) <= 4096:  # the store's message size limit (open_side)
                plain_expected += 1
            i = rng.randrange(n)
            keys.append((topic, f"k{o}-{i}", False))  # found when the message has the Java client's keys
            keys.append((topic, f"U{o:020d}{i:04d}", True))
        queries = [query(topic, key, 9000 + k, unique=unique) for k, (topic, key, unique) in enumerate(keys)]
        out = await both(sides, [b"".join(frames) + b"".join(queries)])
        got = answers(out)
        assert len(got) == len(frames) + len(queries)
    assert batches > 40
    assert counts.plain == plain_expected
    assert counts.plain + counts.callback == sent


async def test_a_java_batch_is_plain_readable_at_once_and_answered_with_every_id(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 32-message batch as the Java producer sends it (20-byte bodies: the store's limit is 4 KiB):
    one record per message, consecutive queue offsets, the answer's msgId the 32 offset ids joined by
    commas and queueOffset the first; each message found by key and by unique key in the same read,
    right after the answer."""
    counts = Counts(monkeypatch)
    await both(sides, [send(1), send(2)])  # queue 0 starts at 2
    messages = [java_message(7, i, b"x" * 20) for i in range(32)]
    queries = b"".join(query(TOPIC, f"k7-{i}", 100 + i) for i in range(32))
    uniques = b"".join(query(TOPIC, f"U{7:020d}{i:04d}", 200 + i, unique=True) for i in range(32))
    out = await both(sides, [a_batch(7, messages) + queries + uniques])
    assert (counts.plain, counts.records, counts.callback) == (3, 34, 0)
    got = answers(out)
    assert got[0]["code"] == 0 and got[0]["ext"]["queueOffset"] == "2" and got[0]["ext"]["queueId"] == "0"
    ids = got[0]["ext"]["msgId"].split(",")
    assert len(ids) == 32 and len(set(ids)) == 32
    assert all(one["code"] == 0 for one in got[1:]), [one for one in got[1:] if one["code"] != 0][:1]
    assert sides[0].store.reader.max_offset(TOPIC, 0) == 34


def delayed(**extra: str) -> str:
    return properties_to_string({"WAIT": "true", **extra})


#: Each batch the C side must leave to the callback, and why (the Python path refuses or stores it).
NOT_PLAIN: dict[str, dict[str, Any]] = {
    "delay": dict(properties=delayed(DELAY="2")),
    "delay zero": dict(properties=delayed(DELAY="0")),
    "bad delay": dict(properties=delayed(DELAY="x")),
    "half message flag": dict(properties=delayed(TRAN_MSG="true")),
    "timer": dict(properties=delayed(TIMER_DELAY_MS="5000")),
    "prepared sysflag": dict(f=4),
    "commit sysflag": dict(f=8),
    "retry topic": dict(topic="%RETRY%G"),
    "topic created": dict(topic="NewOne"),
    "forbidden topic": dict(topic="SCHEDULE_TOPIC_XXXX"),
    "queue out of range": dict(queue_id=4),
    "body too big": dict(messages=[java_message(2, i, b"b" * 1000) for i in range(5)]),
    "no message": dict(messages=[]),
    "body cut short": dict(raw=body_of([java_message(2, 0)])[:-3]),
    "a whole message, then one cut short": dict(raw=body_of([java_message(2, 0), java_message(2, 1)])[:-3]),
    "body length past the end": dict(raw=_HEAD.pack(0, 0, 0, 0, 999) + b"x" * 30),
    "properties length past the end": dict(raw=_HEAD.pack(0, 0, 0, 0, 1) + b"x" + b"\x00\x50" + b"p"),
    "negative properties length": dict(raw=_HEAD.pack(0, 0, 0, 0, 1) + b"x" + b"\xff\xff" + b"p"),
    "batch properties over the limit": dict(properties="k\x01" + "v" * 33000),
    "a message's joined properties over the limit": dict(
        properties="k\x01" + "v" * 30000, messages=[(0, b"m", b"KEYS\x01" + b"q" * 3000)]
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_PLAIN))
async def test_each_special_batch_goes_to_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Between two plain batches, the special one is the callback's: the group before it is written
    first, the one after it starts anew; all answered and stored as the Python path does."""
    counts = Counts(monkeypatch)
    fields = dict(NOT_PLAIN[case])
    messages = fields.pop("messages", [java_message(2, i) for i in range(3)])
    raw = fields.pop("raw", None)
    if raw is not None:
        special = send(2, body=raw, properties="WAIT\x01true", m="true", code=SEND_BATCH, **fields)
    else:
        special = a_batch(2, messages, **fields)
    first = a_batch(1, [java_message(1, i) for i in range(2)])
    last = a_batch(3, [java_message(3, i) for i in range(2)])
    await both(sides, [first + special + last])
    if case == "retry topic":  # the callback leaves it: the rest of the read is the Python path's
        assert (counts.callback, counts.plain, counts.flushes) == (1, 1, 1)
    else:
        assert (counts.callback, counts.plain, counts.flushes) == (1, 2, 2)


async def test_a_batch_that_would_roll_the_file_goes_to_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1 MiB CommitLog file fills until a batch fits it but not with the 8-byte blank after it:
    that batch is the writer's (the roll-over, in Python: the whole batch in the next file), the
    batches before and after it plain."""
    counts = Counts(monkeypatch)
    fast = sides[0].store
    opaque = itertools.count(100)  # three digits each: the same properties' length
    before = fast.writer.position
    await both(sides, [a_batch(next(opaque), [java_message(1, 0, b"x" * 100)] * 2)])
    overhead = (fast.writer.position - before) // 2 - 100  # a record's size past its body
    size = fast.writer.file_size
    while True:
        left = size - fast.writer.position % size
        target = left - 4 - 2 * overhead - 100  # the second body of a batch 4 bytes short of the blank
        if 0 <= target <= 3000:
            break
        filler = [java_message(1, 0, b"f" * 1900)] * 2  # within the 4 KiB message limit
        many = 8 if left > 80_000 else 1
        await both(sides, [b"".join(a_batch(next(opaque), filler) for _ in range(many))])
    plain = counts.plain
    assert counts.callback == 0
    rolled = a_batch(next(opaque), [java_message(1, 0, b"r" * 100), java_message(1, 1, b"s" * target)])
    out = await both(sides, [rolled + a_batch(next(opaque), [java_message(1, 0)] * 3)])
    assert [one["code"] for one in answers(out)] == [0, 0]
    assert counts.callback == 1 and counts.plain == plain + 1
    assert fast.writer.position > size  # the second file


@pytest.mark.parametrize("error", ["disk full", "cut"])
async def test_a_failed_write_refuses_the_group_and_gives_its_offsets_back(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    """A full disk (or a file found cut) at the group's pwrite: none of its batches is acknowledged
    (each answered as the Python path answers it), nothing is stored, and the queue offsets all their
    records took are given back: after a full disk the next batch takes them."""
    counts = Counts(monkeypatch)
    await both(sides, [a_batch(1, [java_message(1, 0)])])
    writers = [side.store.writer for side in sides]
    real = [w._write for w in writers]

    def failing(*_args: object) -> None:
        if error == "cut":
            raise CommitLogCutError("the CommitLog file was cut under the writer")
        raise CommitLogFullError(28, "No space left on device")

    for w in writers:
        monkeypatch.setattr(w, "_write", failing)
    group = [a_batch(2, [java_message(2, i) for i in range(5)]), a_batch(3, [java_message(3, 0)])]
    group.append(a_batch(4, [java_message(4, i) for i in range(2)], queue_id=1))
    out = await both(sides, [b"".join(group)])
    assert [one["code"] for one in answers(out)] == [14, 14, 14] and counts.plain == 4
    if error == "disk full":  # (a cut at the write: the reference's writer keeps them, see the report)
        assert [w._queue_offsets[(TOPIC, 0)] for w in writers] == [1, 1]
    for w, write in zip(writers, real, strict=True):
        monkeypatch.setattr(w, "_write", write)
    out = await both(sides, [a_batch(5, [java_message(5, i) for i in range(3)])])
    got = answers(out)
    if error == "cut":  # the store takes nothing more until it is reopened
        assert [one["code"] for one in got] == [14]
        return
    assert got[0]["code"] == 0 and got[0]["ext"]["queueOffset"] == "1"
    assert sides[0].store.reader.max_offset(TOPIC, 0) == 4


async def test_batches_after_the_commitlog_was_cut_are_refused(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CommitLog file cut in the middle of a record under both servers: each later batch refused
    as the Python path refuses it, nothing acknowledged that could not be served."""
    counts = Counts(monkeypatch)
    await both(sides, [a_batch(1, [java_message(1, i) for i in range(4)])])
    for side in sides:
        os.truncate(side.root / "commitlog" / f"{0:020d}", side.store.writer.position - 50)
    out = await both(sides, [a_batch(2, [java_message(2, i) for i in range(3)]) + send(3)])
    assert [one["code"] for one in answers(out)] == [14, 14]
    assert counts.plain == 1


async def test_batches_of_both_codes_share_the_group_with_single_sends(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SEND_BATCH_MESSAGE, SEND_MESSAGE_V2 with the batch flag and single SENDs in one read: one group,
    one write."""
    counts = Counts(monkeypatch)
    read = send(1) + a_batch(2, [java_message(2, i) for i in range(3)]) + send(3, queue_id=1)
    read += a_batch(4, [java_message(4, i) for i in range(2)], code=SEND) + send_v1(5)
    out = await both(sides, [read])
    assert (counts.plain, counts.records, counts.callback, counts.flushes) == (5, 8, 0, 1)
    got = answers(out)
    assert [one["ext"]["queueOffset"] for one in got] == ["0", "1", "0", "4", "6"]
    assert json.dumps([one["ext"]["msgId"].count(",") for one in got]) == "[0, 2, 0, 1, 0]"


@pytest.mark.parametrize("store_host", ["127.0.0.1", "::1"])
async def test_a_batch_from_an_ipv6_sender(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, store_host: str
) -> None:
    """The born host as the connection gives it: each record of an IPv6 sender's batch has the
    16-byte host; the answer's ids are the store's offset ids (32 or 56 hex digits), one per record."""
    counts = Counts(monkeypatch)

    def peer(self: Recorder, name: str, default: object = None) -> object:
        return ("::1", 40001, 0, 0) if name == "peername" else default

    monkeypatch.setattr(Recorder, "get_extra_info", peer)
    for side in sides:
        side.store.set_store_address(store_host, 10911)
    out = await both(sides, [a_batch(1, [java_message(1, i) for i in range(20)])])
    got = answers(out)
    assert [one["code"] for one in got] == [0]
    assert counts.plain == 1 and counts.records == 20
    assert {len(one) for one in got[0]["ext"]["msgId"].split(",")} == {
        32 if store_host == "127.0.0.1" else 56
    }
    assert sides[0].stored()[0].count(bytes(15) + b"\x01" + (40001).to_bytes(4, "big")) == 20


async def test_groups_that_outgrow_their_buffer_store_as_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's records are encoded straight into the bytes object its flush hands over (no copy
    before the ``pwrite``): one read's plain SENDs and batches of 60 KiB in all, so that object
    grows several times past its first 4 KiB keeping what it holds, then a SEND the callback takes
    (the group written), then a second group in a new object. Stored and answered as the Python path."""
    counts = Counts(monkeypatch)
    rng = random.Random(43)
    read, opaque = b"", itertools.count(1)
    for i in range(16):
        n = next(opaque)
        if i % 5 == 4:
            read += a_batch(n, [java_message(n, k, b"b" * rng.randint(100, 700)) for k in range(4)])
        else:
            read += send(n, queue_id=i % 3, body=rng.randbytes(rng.randint(1500, 3900)))
    read += send(next(opaque), properties=delayed(DELAY="2"))  # the callback's: the group is written first
    for i in range(5):
        read += send(next(opaque), queue_id=i % 2, body=rng.randbytes(rng.randint(2000, 3900)))
    out = await both(sides, [read])
    assert (counts.callback, counts.flushes, counts.records) == (1, 2, 13 + 3 * 4 + 5)
    assert [one["code"] for one in answers(out)] == [0] * 22
    assert len(sides[0].stored()[0]) > 60_000


async def test_a_reads_plain_sends_wake_each_queue_they_went_to_once(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settle of one read's plain SENDs wakes the held pulls of each queue it stored to, once:
    a batch (one queue, its key listed once per message) wakes that queue, and a read of batches and
    single SENDs over several queues wakes each of them (the queues the Python path wakes)."""
    counts = Counts(monkeypatch)
    woken: dict[str, list[list[tuple[str, int]]]] = {}
    for name, side in zip(("compiled", "python"), sides, strict=True):
        calls: list[list[tuple[str, int]]] = []
        woken[name] = calls
        notify = side.store.arrived
        assert notify is not None

        def arrived(topic: str, queue_id: int, notify: Any = notify, calls: Any = calls) -> None:
            calls[-1].append((topic, queue_id))
            notify(topic, queue_id)

        side.store.arrived = arrived

    def batch(opaque: int, n: int, queue_id: int) -> bytes:
        return a_batch(opaque, [java_message(opaque, i) for i in range(n)], queue_id=queue_id)

    reads = [
        [batch(1, 32, 2)],
        [batch(2, 5, 1) + send(3, queue_id=3) + batch(4, 3, 1) + send(5, queue_id=0)],
        [send(6, queue_id=2)],
    ]
    expected = [[(TOPIC, 2)], [(TOPIC, 0), (TOPIC, 1), (TOPIC, 3)], [(TOPIC, 2)]]
    for read, queues in zip(reads, expected, strict=True):
        for calls in woken.values():
            calls.append([])
        await both(sides, read)
        # the compiled side settles the read once: each queue once; the Python path settles
        # each SEND as it stores it, so a queue two SENDs went to is woken twice there
        assert sorted(woken["compiled"][-1]) == queues
        assert sorted(set(woken["python"][-1])) == queues
    assert (counts.plain, counts.records, counts.callback) == (6, 32 + 5 + 1 + 3 + 1 + 1, 0)
