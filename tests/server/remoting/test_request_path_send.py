"""The compiled request path's SENDs answer and store exactly as the Python path (issue 22).

Two ``serve --writable`` servers over two fresh stores (same still clock, same store address), one with
the compiled path and one without it (the reference: ``FrameDecoder``, ``Dispatcher``,
``SendMessageProcessor``), get the same reads on a ``RemotingConnection`` each: SENDs of the shapes
the C side takes (``_request_path_send.h``: SEND_MESSAGE_V2 as the Java producer writes it with
properties holding JSON escapes and unicode, the optional fields, delayed and transactional
records, batches, refusals; SEND_MESSAGE as the Go client writes it), of shapes it must leave (a
consumer's retry, oneway, numbers it does not read, a surrogate escape), a SEND that creates its
topic, and SENDs followed in the same read by requests that must see what they stored. Compared:
every byte and transport call, the CommitLog files byte for byte, the consume queues' ends and the
``/metrics`` counts. Under ``RMQ_PURE_PYTHON=1`` the reference runs against itself.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode
from protocol.send_message import client_properties
from server.remoting import request_path
from tests.support.send_sides import (
    SEND,
    TOPIC,
    Side,
    batch,
    both,
    get_max_offset,
    open_side,
    open_sides,
    send,
    send_v1,
    view,
)
from tests.support.topics_json import durable_topics
from tests.support.writable_sides import takes_code


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[tuple[Side, Side]]:
    async with open_sides(tmp_path) as pair:
        yield pair


def answered(side: Side) -> int:
    return side.answered


def test_sends_are_among_the_codes_of_a_writable_server(tmp_path: Path) -> None:
    async def run() -> None:
        side = await open_side(tmp_path / "s", True)
        try:
            takes_code(side, SEND)
        finally:
            await side.stop()

    asyncio.run(run())


async def test_plain_sends(sides: tuple[Side, Side]) -> None:
    """SENDs the compiled path answers: every one stored as the Python path stores it."""
    shapes = [
        send(1),
        send(2, queue_id=3),
        send(3, properties=None),
        send(4, properties=client_properties("k\u00e9y \U0001f600", "T\u4e2d", {"a": 'q"u\\o/te\n\t'}, None)),
        send(5, properties=client_properties("k\u00e9y", "TagA", {"x": "\u2028"}, None), ensure_ascii=True),
        send(6, properties=""),
        send(7, j=3, k="TRUE", l=16, m="false"),
        send(8, k="yes", m="False"),
        send(9, drop=("j", "k", "m", "n")),
        send(10, properties=client_properties("late", None, None, None, delay_level=2)),
        send(11, body=b""),
        send(12, body=b"\0" * 3000),
        send(13, flag=123456789),
        send(14, queue_id=-1 + 2),
        send(15, a="pg\u00e9", c="TBW102"),
        send(16, g="9223372036854775807"),
        send_v1(17),
        send_v1(18, queue_id=2, body=b""),
        batch(19, 3),
        batch(20, 1, queue_id=3),
        batch(21, 2, code=SEND),  # the broker takes the batch path on the header's flag
    ]
    reads = [b"".join(shapes[i : i + 5]) for i in range(0, len(shapes), 5)]
    before = answered(sides[0])
    out = await both(sides, reads)
    if request_path.COMPILED:
        assert answered(sides[0]) - before == len(shapes)
    assert out.count(b'"code":0,') == len(shapes)
    assert sides[0].store.reader.max_offset(TOPIC, 0) == 14 + 3 + 2  # and the batches' to queue 0
    assert out.count(b'"msgId":"') == len(shapes) and out.count(b",7F000001") == 2 + 1


async def test_refusals_are_answered_as_the_python_path_answers_them(sides: tuple[Side, Side]) -> None:
    """Refused before or by the store: the same code and remark, nothing stored."""
    shapes = [
        send(1, queue_id=4),
        send(2, topic="SCHEDULE_TOPIC_XXXX"),
        send(3, topic="bad!topic"),
        send(4, topic="t" * 128),
        send(5, body=b"b" * 5000),
        send(6, properties=client_properties("k", None, {"DELAY": "x"}, None)),
        send(7, properties="k\x01" + "v" * 40000),
        send(8, f=(1 << 2)),  # a half message: stored to the half topic
        send(9),
        send(10, m="true"),  # a batch flag over a body that is no batch: "bad batch body"
        batch(11, 2, properties=client_properties(None, None, {"DELAY": "2"}, None)),  # no delay in a batch
        batch(12, 0),
    ]
    before = answered(sides[0])
    out = await both(sides, [b"".join(shapes)])
    if request_path.COMPILED:
        assert answered(sides[0]) - before == len(shapes)
    assert out.count(b'"code":0,') == 2


async def test_shapes_left_to_the_python_path(sides: tuple[Side, Side]) -> None:
    """Frames the C side leaves (a retry, also as a batch, oneway, numbers it does not read, a
    surrogate escape, another field, SEND_MESSAGE with the V2 header's letters): answered by the
    Python path, each where it stands."""
    shapes = [
        batch(1, 2, topic="%RETRY%G"),
        send(2, topic="%RETRY%G"),
        send(3, rpc_flag=2),
        send(4, queue_id="01"),
        send(5, flag=-1),
        send(6, queue_id="+1"),
        send(7, properties=client_properties("\U0001f600", None, None, None), ensure_ascii=True),
        send(8, x="1"),
        send(9, drop=("b",)),
        send(10, code=int(RequestCode.SEND_MESSAGE)),
        send(11, d="2147483648"),
        send(12),
    ]
    # each frame in a read of its own after a plain SEND, so the count shows which were taken
    reads = [send(100 + i) + shape for i, shape in enumerate(shapes)]
    before = answered(sides[0])
    await both(sides, reads)
    if request_path.COMPILED:
        assert answered(sides[0]) - before == len(shapes) + 1  # the plain SENDs and the last


async def test_requests_after_sends_in_the_same_read_see_them(sides: tuple[Side, Side]) -> None:
    """A read of SENDs then offset requests, VIEWs and SENDs again: each answered after what came
    before it is stored (the compiled path takes a fresh snapshot after SENDs)."""
    reads = [
        # the queue opened (the compiled path reads only opened queues; the Python path opens it)
        send(20) + get_max_offset(TOPIC, 0, 21),
        send(1) + get_max_offset(TOPIC, 0, 2) + send(3) + send(4) + get_max_offset(TOPIC, 0, 5) + view(0, 6),
        get_max_offset(TOPIC, 0, 7) + send(8) + view(0, 9) + send(10) + get_max_offset(TOPIC, 0, 11),
    ]
    out = await both(sides, reads)
    offsets = [int(n) for n in re.findall(rb'"extFields":\{"offset":"(\d+)"\}', out)]
    assert offsets == [1, 2, 4, 4, 6]  # each after the SENDs before it
    assert out.count(b'"code":0,') == 13  # the VIEWs found their records
    if request_path.COMPILED:
        assert answered(sides[0]) == 12
    # A VIEW of the record a SEND of the same read just stored (past the batch's first snapshot).
    end = sides[0].store.reader.view_snapshot()[4]
    assert end == sides[1].store.reader.view_snapshot()[4]
    out = await both(sides, [send(30) + view(end, 31) + send(32) + send(33) + view(end, 34)])
    assert out.count(b'"code":0,') == 5 and out.count(b"UNIQ%028d" % 30) == 2
    if request_path.COMPILED:
        assert answered(sides[0]) == 17


async def test_a_send_that_creates_its_topic_is_answered_after_the_table_is_saved(
    sides: tuple[Side, Side],
) -> None:
    reads = [send(1, topic="NewTopic") + send(2) + send(3, topic="NewTopic", queue_id=2)]
    out = await both(sides, reads)
    assert out.count(b'"code":0,') == 3
    for side in sides:
        assert "NewTopic" in durable_topics(side.root)


async def test_unknown_topic_without_auto_create(tmp_path: Path) -> None:
    async with open_sides(tmp_path, auto_create=False) as pair:
        out = await both(pair, [send(1, topic="Nope") + send(2)])
        assert b"not exist" in out


TEXTS = ["", "\u00e9", "\U0001f600", "\\u0000", "\\ud800", '\\"', "\x7f", "\x01", "k" * 300, "\u2028"]
NUMBERS = ["0", "-0", "-1", "00", "007", "2147483647", "2147483648", "9" * 20, "1e3", " 1", "+1", "", "NaN"]
INSERTS = [b",", b'"', b"{", b"}", b"\\", b"\\u", b"\\x", b"\xff", b"\xc3", b"\x00"]


def mutated(rng: random.Random, opaque: int) -> bytes:
    """A SEND with fields changed and its JSON text sometimes damaged."""
    fields: dict[str, Any] = {}
    for _ in range(rng.randrange(0, 3)):
        name = rng.choice("abcdfghijklmnx")  # not e: a negative queue id is a random queue
        fields[name] = rng.choice(NUMBERS + TEXTS)
    if rng.random() < 0.25:
        data = bytearray(send_v1(opaque, queue_id=rng.randrange(4)))
    else:
        data = bytearray(send(opaque, queue_id=rng.randrange(4), **fields))
    if rng.random() < 0.3:
        at = rng.randrange(8, len(data))
        r = rng.random()
        if r < 0.4:
            data[at] ^= 1 << rng.randrange(8)
        elif r < 0.7:
            data[at:at] = rng.choice(INSERTS)
        else:
            del data[at : at + rng.randrange(1, 5)]
        # keep the length words right, so the frame is whole (a damaged header or body, not a cut
        # stream): the frame's length, and the header's when the change is inside it
        head = int.from_bytes(data[4:8], "big") & 0xFFFFFF
        if at < 8 + head:
            head += len(data) - (4 + int.from_bytes(data[:4], "big"))
        data[:8] = (len(data) - 4).to_bytes(4, "big") + head.to_bytes(4, "big")
    return bytes(data)


async def test_mutated_sends_answer_and_store_as_the_python_path(sides: tuple[Side, Side]) -> None:
    """A bounded fuzzer (seeded): mutated SEND headers, a few per read, through both sides."""
    rng = random.Random(310)
    opaque = itertools.count(1)
    for _ in range(60):
        reads = [b"".join(mutated(rng, next(opaque)) for _ in range(rng.randrange(1, 5)))]
        await both(sides, reads)
    if request_path.COMPILED:
        assert answered(sides[0]) > 30  # the frames before the first odd one of each read


def count_settles(side: Side) -> list[int]:
    """How many settles of at least one record ``side``'s store runs from now on (a put is one): each
    dispatches what was appended since the last (the plain SENDs' records are not among the records
    ``settle`` returns, which are those appended as ``StoreRecord``s)."""
    count = [0]
    real = side.store.dispatch

    def counting(*args: Any) -> None:
        count[0] += 1
        real(*args)

    side.store.dispatch = counting  # type: ignore[method-assign]
    return count


async def test_the_sends_of_one_read_are_settled_once(sides: tuple[Side, Side]) -> None:
    """The SENDs of one read are appended one by one and settled once on the compiled path (one
    reput, refresh and audit for all); a put each on the Python path; the same bytes and store."""
    fast, reference = count_settles(sides[0]), count_settles(sides[1])
    reads = [b"".join(send(i, queue_id=i % 4) for i in range(1, 7)), send(7) + batch(8, 3) + send_v1(9)]
    out = await both(sides, reads)
    assert out.count(b'"code":0,') == 9
    assert reference[0] == 9
    if request_path.COMPILED:
        assert fast[0] == 2


@pytest.mark.parametrize(
    "error", [OSError(5, "Input/output error"), RuntimeError("the reput broke")], ids=["oserror", "bug"]
)
async def test_a_failed_settle_acknowledges_none_of_the_sends_it_covered(
    sides: tuple[Side, Side], error: Exception
) -> None:
    """The dispatch fails after the appends: no SEND of the read is acknowledged, each answered as
    the Python path answers a put that fails so (on the compiled path their SUCCESS answers, written
    before the settle, are replaced); what came before them in the read is answered as usual; once
    the dispatch works again, the next put dispatches every stored record."""
    await both(sides, [send(1) + get_max_offset(TOPIC, 0, 2)])  # the queue opened

    def failing(*_unsettled: object) -> None:
        raise error

    real = [side.store.dispatch for side in sides]
    for side in sides:
        side.store.dispatch = failing  # type: ignore[method-assign]
    read = get_max_offset(TOPIC, 0, 10) + send(11) + batch(12, 2) + send(13, topic="NewT") + send(14)
    got = [await side.feed([read]) for side in sides]
    for side in sides:  # a SEND answered with a processor's failure does not wait for the table
        await asyncio.wrap_future(side.store.topics_saved(side.store.topic_changes()))
    assert got[0] == got[1]
    assert sides[0].stored() == sides[1].stored()
    out = got[0][0]
    assert out.count(b'"code":0,') == 1  # the GET_MAX_OFFSET alone
    assert out.count(b'"code":1,') == 4 and out.count(b'"opaque":13') == 1
    for side, dispatch in zip(sides, real, strict=True):
        side.store.dispatch = dispatch  # type: ignore[method-assign]
    out = await both(sides, [send(20) + get_max_offset(TOPIC, 0, 21)])
    assert re.findall(rb'"extFields":\{"offset":"(\d+)"\}', out) == [b"6"]  # 1, 11, 12 (2), 14, 20


async def test_an_error_after_sends_were_appended_settles_them_unacknowledged(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C call fails after SENDs were appended (a third SEND's callback raises): nothing of the
    read is answered, and the appended records are settled (dispatched, not acknowledged). The
    first two are plain (written by the C side's group before the callback runs), the third is not."""
    if not request_path.COMPILED:
        pytest.skip("the compiled path is not built")
    fast = sides[0]
    await fast.feed([send(1) + get_max_offset(TOPIC, 0, 2)])
    real = request_path.SendGroup.answer
    calls = itertools.count()

    def third_fails(self: Any, *args: Any) -> Any:
        if next(calls) == 0:
            raise MemoryError
        return real(self, *args)

    monkeypatch.setattr(request_path.SendGroup, "answer", third_fails)
    delayed = client_properties("late", None, None, None, delay_level=2)
    with pytest.raises(MemoryError):
        await fast.feed([send(3) + send(4) + send(5, properties=delayed)])
    assert fast.store.reader.max_offset(TOPIC, 0) == 3
    assert fast.store.settle() == []
