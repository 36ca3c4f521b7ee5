"""Plain SENDs stored by the compiled request path itself store and answer as the Python path (issue 33).

``_request_path_plain.h`` re-serializes a plain SEND's properties in Java's HashMap order (CLUSTER
put, WAIT removed), encodes its record and writes a read's plain SENDs with one ``pwrite``; the
Python path (``SendMessageProcessor.store_send``: ``single_record``'s ``JavaHashMap``, the writer's
encoder) is the reference. Two servers (``test_request_path_send``'s sides: compiled and not, same
still clock, same store address) get the same reads; the answers, the CommitLog bytes, the queues'
ends and the ``/metrics`` counts must be the same, over many property shapes: random names with
non-ASCII and astral characters, names whose Java hashes collide, 0..60 properties, WAIT, KEYS and
CLUSTER present or not, repeated names, malformed items; and from an IPv6 sender. Each shape the
C side must leave (a delay, a half message, a timer, a retry topic, a topic to create, a queue out
of range, sizes over the limits, a bin Java would treeify, ...) is checked to reach the callback
(the Python path), one call per SEND, and to store the same bytes.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode
from protocol.index_key import java_string_hash
from protocol.message_properties import properties_to_string
from server.remoting import request_path
from server.remoting.processors.send_message import SendMessageProcessor
from server.remoting.send_group import SendGroup
from store.write.writer import CommitLogFullError
from tests.support.request_path import Recorder
from tests.support.send_sides import TOPIC, Side, both, open_sides, send, send_v1

pytestmark = pytest.mark.skipif(not request_path.COMPILED, reason="the compiled path is not built")


class Counts:
    """How many SENDs went to the callback (``SendGroup.answer``) and how many were stored plain
    (``SendGroup.flush_plain``'s, through ``SendMessageProcessor.append_encoded``), on the compiled side."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.callback = 0
        self.plain = 0
        self.flushes = 0
        answer, append = SendGroup.answer, SendMessageProcessor.append_encoded

        def counted_answer(group: SendGroup, *args: Any) -> Any:
            self.callback += 1
            return answer(group, *args)

        def counted_append(sends: SendMessageProcessor, *args: Any) -> Any:
            self.flushes += 1
            self.plain += args[3]
            return append(sends, *args)

        monkeypatch.setattr(SendGroup, "answer", counted_answer)
        monkeypatch.setattr(SendMessageProcessor, "append_encoded", counted_append)


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[tuple[Side, Side]]:
    async with open_sides(tmp_path, multi_tag="Multi") as pair:
        yield pair


def colliding_names(n: int) -> Iterator[str]:
    """Names with one Java String.hashCode: each position 'Aa' or 'BB' ("Aa" and "BB" hash alike)."""
    for bits in itertools.product(("Aa", "BB"), repeat=4):
        if n == 0:
            return
        name = "".join(bits)
        assert java_string_hash(name) == java_string_hash("AaAaAaAa")
        yield name
        n -= 1


NAME_CHARS = "abcXYZ_09-.\u00e9\u4e2d\U0001f600\u2028 ="
VALUE_CHARS = NAME_CHARS + '\x01"\\/\n\t\u0000'


def random_text(rng: random.Random, chars: str, low: int, high: int) -> str:
    return "".join(rng.choice(chars) for _ in range(rng.randint(low, high)))


def random_properties(rng: random.Random) -> str:
    """A client's properties string: 0..60 items, some well-known, some colliding, some malformed."""
    items: list[str] = []
    for _ in range(rng.randint(0, 60)):
        r = rng.random()
        if r < 0.55:
            items.append(f"{random_text(rng, NAME_CHARS, 1, 12)}\x01{random_text(rng, VALUE_CHARS, 1, 20)}")
        elif r < 0.65:
            items.append(
                f"{rng.choice(['KEYS', 'TAGS', 'UNIQ_KEY', 'WAIT', 'CLUSTER'])}\x01{rng.randint(0, 9)}"
            )
        elif r < 0.75 and items:
            items.append(rng.choice(items))  # a repeated name (its value may differ below)
        elif r < 0.85:
            items.append(rng.choice(["", "\x01", "x\x01", "\x01y", "noval", "a\x01b\x01c"]))
        else:
            items.append(f"{random_text(rng, 'AaBB', 2, 8)}\x01v")
    if rng.random() < 0.5:
        items.append(f"WAIT\x01{rng.choice(['true', 'false'])}")
    return "\x02".join(items)


async def test_random_property_shapes_store_as_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seeded fuzzer over the properties: every plain SEND stored and answered as the Python path."""
    counts = Counts(monkeypatch)
    rng = random.Random(33)
    opaque = itertools.count(1)
    sent = 0
    for _ in range(40):
        frames = []
        for _ in range(rng.randint(1, 6)):
            props = random_properties(rng)
            topic = rng.choice([TOPIC, "Multi"])
            # escaped or raw UTF-8; an astral character raw only (its surrogate escapes are left to
            # the reference by the header scan, before any SEND rule)
            escaped = rng.random() < 0.5 and all(ord(c) < 0x10000 for c in props)
            frames.append(
                send(
                    next(opaque),
                    topic=topic,
                    queue_id=rng.randrange(4),
                    properties=props,
                    ensure_ascii=escaped,
                )
            )
            sent += 1
        await both(sides, [b"".join(frames)])
    # a name of the fuzzer's ends in "DELAY"/"TIMER_..." never: all plain but the treeified bins
    assert counts.plain + counts.callback == sent
    assert counts.plain > sent * 3 // 4


@pytest.mark.parametrize("n", [0, 1, 11, 12, 13, 24, 25, 48, 49, 60, 64])
async def test_map_sizes_around_each_resize(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """The table's size follows the puts (12 fit 16 buckets, the CLUSTER put may be the 13th) and WAIT's
    removal does not shrink it: n properties, with and without WAIT and CLUSTER among them."""
    counts = Counts(monkeypatch)
    names = [f"p{i}" for i in range(n)]
    shapes = [
        "\x02".join(f"{name}\x01v{i}" for i, name in enumerate(names)),
        "\x02".join([*(f"{name}\x01v" for name in names[: max(0, n - 1)]), "WAIT\x01true"]),
        "\x02".join(["CLUSTER\x01mine", *(f"{name}\x01v" for name in names[: max(0, n - 1)])]),
    ]
    await both(sides, [b"".join(send(i + 1, properties=p) for i, p in enumerate(shapes))])
    assert counts.plain == 3 and counts.callback == 0


async def test_colliding_java_hashes_keep_insertion_order(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to 7 names in one bin stay in insertion order (plain); 8 in one bin go to the callback."""
    counts = Counts(monkeypatch)
    for n in (2, 6, 7):
        names = list(colliding_names(n))
        props = "\x02".join(f"{name}\x01{i}" for i, name in enumerate(reversed(names)))
        await both(sides, [send(n, properties=props)])
    assert counts.plain == 3 and counts.callback == 0
    props = "\x02".join(f"{name}\x01v" for name in colliding_names(8))
    await both(sides, [send(100, properties=props)])
    assert counts.plain == 3 and counts.callback == 1


async def test_an_ipv6_sender(sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch) -> None:
    """The born host as the connection gives it: an IPv6 sender's record has the 16-byte host."""
    counts = Counts(monkeypatch)

    def peer(self: Recorder, name: str, default: object = None) -> object:
        return ("::1", 40001, 0, 0) if name == "peername" else default

    monkeypatch.setattr(Recorder, "get_extra_info", peer)
    out = await both(sides, [send(1) + send(2, queue_id=1)])
    assert out.count(b'"code":0,') == 2
    assert counts.plain == 2
    commitlog = sides[0].stored()[0]
    assert bytes(15) + b"\x01" + (40001).to_bytes(4, "big") in commitlog  # ::1 and its port


def half(props: dict[str, str]) -> str:
    return properties_to_string({"KEYS": "k", **props})


#: Each SEND the C side must leave to the callback, and why.
NOT_PLAIN = {
    "delay": dict(properties=half({"DELAY": "2"})),
    "delay zero": dict(properties=half({"DELAY": "0"})),
    "bad delay": dict(properties=half({"DELAY": "x"})),
    "half message": dict(properties=half({"TRAN_MSG": "true"})),
    "not a half message": dict(properties=half({"TRAN_MSG": "false"})),
    "timer": dict(properties=half({"TIMER_DELAY_MS": "5000"})),
    "timer out": dict(properties=half({"TIMER_OUT_MS": "5000"})),
    "retry topic": dict(topic="%RETRY%G"),
    "dlq topic": dict(topic="%DLQ%G"),
    "topic created": dict(topic="NewOne"),
    "forbidden topic": dict(topic="SCHEDULE_TOPIC_XXXX"),
    "timer topic": dict(topic="rmq_sys_wheel_timer"),
    "queue out of range": dict(queue_id=4),
    "prepared sysflag": dict(f=4),
    "commit sysflag": dict(f=8),
    "body too big": dict(body=b"b" * 5000),
    "properties too long": dict(properties="k\x01" + "v" * 40000),
    "too many properties": dict(properties="\x02".join(f"n{i}\x01v" for i in range(70))),
    "batch flag": dict(m="true"),
}


@pytest.mark.parametrize("case", sorted(NOT_PLAIN))
async def test_each_special_send_goes_to_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Between two plain SENDs, the special one is the callback's: the group before it is written
    first, the one after it starts anew; all answered and stored as the Python path does."""
    counts = Counts(monkeypatch)
    await both(sides, [send(1) + send(2, **NOT_PLAIN[case]) + send(3)])
    if case == "retry topic":  # the callback leaves it: the rest of the read is the Python path's
        assert (counts.callback, counts.plain, counts.flushes) == (1, 1, 1)
    else:
        assert (counts.callback, counts.plain, counts.flushes) == (1, 2, 2)


async def test_a_record_that_would_roll_the_file_goes_to_the_python_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1 MiB CommitLog file fills until a record fits it but not with the 8-byte blank after it:
    that SEND is the writer's (the roll-over, in Python), the SENDs before and after it plain."""
    counts = Counts(monkeypatch)
    fast = sides[0].store
    opaque = itertools.count(100)  # three digits each: the same properties' length
    before = fast.writer.position
    await both(sides, [send(next(opaque), body=b"x" * 100)])
    overhead = fast.writer.position - before - 100
    size = fast.writer.file_size
    while True:
        target = size - fast.writer.position % size - 4 - overhead  # the body of a record 4 bytes short
        if 0 <= target <= 4000:
            break
        await both(sides, [send(next(opaque), body=b"f" * min(4000, target - overhead - 100))])
    plain = counts.plain
    assert counts.callback == 0
    out = await both(sides, [send(next(opaque), body=b"r" * target) + send(next(opaque))])
    assert out.count(b'"code":0,') == 2
    assert counts.callback == 1 and counts.plain == plain + 1
    assert fast.writer.position > size  # the second file


async def test_a_failed_write_refuses_the_group_and_gives_its_offsets_back(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at the group's pwrite: none of its SENDs is acknowledged (each answered as the
    Python path answers a full disk), nothing is stored, and the queue offsets they took are given
    back: the next SENDs take them."""
    counts = Counts(monkeypatch)
    await both(sides, [send(1)])
    writers = [side.store.writer for side in sides]
    real = [w._write for w in writers]

    def full(*_args: object) -> None:
        raise CommitLogFullError(28, "No space left on device")

    for w in writers:
        monkeypatch.setattr(w, "_write", full)
    out = await both(sides, [send(2) + send(3) + send(4, queue_id=1)])
    assert out.count(b'"code":14,') == 3 and counts.plain == 4
    for w, write in zip(writers, real, strict=True):
        monkeypatch.setattr(w, "_write", write)
    out = await both(sides, [send(5) + send(6)])
    header_length = int.from_bytes(out[4:8], "big")
    assert json.loads(out[8 : 8 + header_length])["extFields"]["queueOffset"] == "1"
    assert out.count(b'"code":0,') == 2
    assert sides[0].store.reader.max_offset(TOPIC, 0) == 3


async def test_sends_of_other_codes_in_the_read(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SEND_MESSAGE (the Go client's long names) is plain too; one group for the read."""
    counts = Counts(monkeypatch)
    await both(sides, [send(1) + send_v1(2) + send(3, code=int(RequestCode.SEND_BATCH_MESSAGE)) + send_v1(4)])
    assert (counts.plain, counts.callback, counts.flushes) == (4, 0, 1)


async def test_reads_that_cut_frames_stay_on_the_compiled_path(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream whose reads end inside frames (as 64 KiB reads of pipelined SENDs do): each read that
    completes the frame an earlier one began is answered by the compiled path, the held part joined
    to it; a big frame's pieces wait in the decoder until the last. Same bytes as the Python path."""
    counts = Counts(monkeypatch)
    stream = b"".join(send(i) for i in range(1, 13)) + send(13, body=b"B" * 4000) + send(14)
    cuts = [0, 3, 100, 700, 701, 1500, 2600, *range(3000, len(stream) - 500, 400), len(stream)]
    reads = [stream[a:b] for a, b in itertools.pairwise(cuts)]
    before = sides[0].answered
    out = await both(sides, reads)
    assert out.count(b'"code":0,') == 14
    assert sides[0].answered - before == 14 and counts.plain == 14
