"""The compiled frame loop (``protocol._frame_fast.decode_frames``) against its reference.

Same commands, same position reached, same error type and message and the same ``decoded`` tuple,
for the golden frames alone and in streams, cut at every byte, with bad length words, and on a
seeded mutation corpus; and ``FrameDecoder`` gives the same answers on top of either.
"""

from __future__ import annotations

import array
import gc
import random
import struct
from pathlib import Path
from types import ModuleType

import pytest

from protocol import frame
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_frame
from tests.support import fast_decode
from tests.support.fast_decode import compiled_modules, exact, golden_frames, outcome

REFERENCE = frame._reference_decode_frames
MASK = 0xFFFFFF


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    return compiled_modules()[1]


def _same(
    fast: ModuleType, data: object, max_frame: int = DEFAULT_MAX_FRAME_LENGTH, max_header: int = MASK
) -> tuple:
    expected = outcome(lambda: REFERENCE(data, max_frame, max_header))  # type: ignore[arg-type]
    got = outcome(lambda: fast.decode_frames(data, max_frame, max_header))
    assert got == expected, bytes(data[:64]) if isinstance(data, bytes | bytearray) else data
    return expected


def test_every_golden_frame_alone_and_all_in_one_stream(fast: ModuleType, vectors_dir: Path) -> None:
    frames = golden_frames(vectors_dir)
    assert len(frames) > 500
    for name, data in frames:
        result = _same(fast, data)
        assert result[0] == "ok" and len(result[1]) == 1 and result[2] == len(data), name
    stream = b"".join(data for _, data in frames)
    result = _same(fast, stream)
    assert len(result[1]) == len(frames) and result[2] == len(stream)
    for kind in (bytearray, memoryview):
        _same(fast, kind(stream))


def test_golden_json_frames_are_decoded_in_c(fast: ModuleType, vectors_dir: Path) -> None:
    """The C loop hands a frame to the Python reference only when it must: with the fallback
    replaced by one that fails, every golden JSON frame still decodes (and a ROCKETMQ one does not)."""

    def refuse(*args: object) -> RemotingCommand:
        raise AssertionError("fell back to the reference")

    frames = golden_frames(vectors_dir)
    json_frames = [data for _, data in frames if data[4] == 0]
    rocketmq = next(data for _, data in frames if data[4] == 1)
    assert len(json_frames) > 400
    fast.bind(REFERENCE, refuse, frame._frame_problem, frame.FrameError)
    try:
        commands, _ = fast.decode_frames(b"".join(json_frames), DEFAULT_MAX_FRAME_LENGTH, MASK)
        assert len(commands) == len(json_frames)
        with pytest.raises(AssertionError, match="fell back"):
            fast.decode_frames(rocketmq, DEFAULT_MAX_FRAME_LENGTH, MASK)
    finally:
        frame._bind_twin(fast)


def test_a_stream_cut_at_every_byte(fast: ModuleType, vectors_dir: Path) -> None:
    by_name = dict(golden_frames(vectors_dir))
    stream = b"".join(
        by_name[name]
        for name in (
            "view_message_by_id.json.wire.bin",
            "query_message_unicode.rocketmq.wire.bin",
            "resp_query_message_success.json.wire.bin",
            "wire/v4_send/004_req_code310.bin",
            "resp_view_message_success.rocketmq.wire.bin",
        )
    )
    for cut in range(len(stream) + 1):
        _same(fast, stream[:cut])
        _same(fast, stream[cut:])


def test_feed_gives_the_same_answers_on_either_loop(
    fast: ModuleType, vectors_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FrameDecoder over the compiled loop and over the reference, fed the same chunks (the module
    global is what feed() calls)."""
    frames = [data for _, data in golden_frames(vectors_dir)][:60]
    stream = b"".join(frames) + struct.pack(">i", -3)
    rng = random.Random(7)
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 30)))
        max_header = rng.choice([None, 200, 4000])
        runs = []
        for loop in (fast.decode_frames, REFERENCE):
            monkeypatch.setattr(frame, "decode_frames", loop)
            decoder = FrameDecoder(max_header_length=max_header)
            results: list[object] = []
            for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
                chunk = stream[start:end]
                results.append(outcome(lambda d=decoder, c=chunk: (d.feed(c), 0)))
                results.append(decoder.buffered)
            runs.append(results)
        assert runs[0] == runs[1]


def _frame(length: int, word: int | None = None, rest: bytes = b"") -> bytes:
    head = struct.pack(">i", length) + (b"" if word is None else struct.pack(">I", word))
    return head + rest


GOOD = encode_frame(RemotingCommand(code=33, opaque=5, ext_fields={"offset": "1"}))
GOOD_RMQ = encode_frame(
    RemotingCommand(
        code=12, opaque=6, ext_fields={"k": "v"}, body=b"xyz", serialize_type=SerializeType.ROCKETMQ
    )
)

BAD = [
    _frame(-1),
    _frame(-(2**31)),
    _frame(0),
    _frame(3, None, b"abc"),
    _frame(4),
    _frame(4, 0),
    _frame(4, 1),
    _frame(5, 1, b"{"),
    _frame(DEFAULT_MAX_FRAME_LENGTH - 4),
    _frame(DEFAULT_MAX_FRAME_LENGTH - 3),
    _frame(2**31 - 1),
    _frame(14, 50, b"{}" + b"\0" * 8),
    _frame(14, 11),
    _frame(14, 10),
    _frame(6, (2 << 24) | 2, b"{}"),
    _frame(6, (0xFF << 24) | 2, b"{}"),
    _frame(6, (0x80 << 24) | 2, b"{}"),
    _frame(6, (1 << 24) | 2, b"{}"),
    _frame(7, 3, b"{x}"),
    _frame(6, 2, b"[]"),
    _frame(6, 2, b"{}"),
    _frame(7, 2, b"{}z"),
    _frame(6, 0x00FFFFFF, b"{}"),
    _frame(1_000_004, 1_000_001),
    _frame(1_000_004, 5000),
]


@pytest.mark.parametrize("bad", BAD, ids=range(len(BAD)))
@pytest.mark.parametrize("before", [b"", GOOD, GOOD + GOOD_RMQ], ids=["alone", "after-json", "after-both"])
@pytest.mark.parametrize(("max_frame", "max_header"), [(DEFAULT_MAX_FRAME_LENGTH, MASK), (64, 3), (2**70, 0)])
def test_bad_length_words_fail_alike(
    fast: ModuleType, bad: bytes, before: bytes, max_frame: int, max_header: int
) -> None:
    for cut in range(len(bad) + 1):
        _same(fast, before + bad[:cut], max_frame, max_header)
    _same(fast, before + bad + GOOD, max_frame, max_header)


def test_buffers_that_are_not_flat_bytes_fail_alike(fast: ModuleType) -> None:
    data = GOOD + GOOD_RMQ
    odd: list[object] = [
        memoryview(data)[::2],
        memoryview(array.array("i", [0x08000000, 0x04000000])),
        memoryview(bytes(GOOD[:8])).cast("B", (2, 4)),
        "text",
        None,
        12,
        memoryview(data).cast("c"),
        memoryview(data).cast("b"),
    ]
    for item in odd:
        _same(fast, item)


@pytest.mark.parametrize(
    ("max_frame", "max_header"), [(1e6, 1e4), (64.5, 3.5), ("x", 5), (100, None), (True, 0)]
)
def test_limits_that_are_not_ints_are_taken_as_the_reference_takes_them(
    fast: ModuleType, max_frame: object, max_header: object
) -> None:
    for data in (GOOD, GOOD + GOOD_RMQ[:9], _frame(-1), _frame(200, 100)):
        _same(fast, data, max_frame, max_header)  # type: ignore[arg-type]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    extremes = [0, 1, 3, 4, 5, 8, 0x7F, 0x80, 0xFF, 0xFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
    for _ in range(rng.choice([1, 1, 2, 3])):
        at = rng.randrange(len(out) + 1)
        op = rng.randrange(6)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            at = rng.choice([0, 4, at])  # the length words most of the time
            out[at : at + 4] = (rng.choice(extremes) + rng.randint(-2, 2) & 0xFFFFFFFF).to_bytes(4, "big")
        elif op == 2:
            out[at:at] = rng.choice([b" ", b"\\", b'"', b"}", b"\xff", b"\\u0041", b"\0\0\0\x08"])
        elif op == 3:
            del out[at : at + rng.randint(1, 8)]
        elif op == 4:
            out = out[:at]
        else:
            out += rng.choice([GOOD, GOOD_RMQ, b"\0\0"])
    return bytes(out)


def test_a_seeded_mutation_corpus_fails_and_decodes_alike(fast: ModuleType, vectors_dir: Path) -> None:
    rng = random.Random(112233)
    seeds = [data for _, data in golden_frames(vectors_dir)]
    decoded = errors = 0
    for _ in range(5000):
        data = b"".join(_mutate(rng, rng.choice(seeds)) for _ in range(rng.choice([1, 1, 2, 3])))
        max_header = rng.choice([MASK, MASK, 100, 1000])
        result = _same(fast, data, DEFAULT_MAX_FRAME_LENGTH, max_header)
        if result[0] == "ok":
            decoded += len(result[1])
        else:
            errors += 1
            decoded += len(result[3])
    assert decoded > 1000 and errors > 1000, (decoded, errors)


def test_decoding_holds_no_memory(fast: ModuleType) -> None:
    """Every path (C decode, fallback, error with decoded, odd buffer) frees what it made."""
    import tracemalloc

    inputs = [
        GOOD + GOOD_RMQ + GOOD[:10],
        GOOD + _frame(6, (2 << 24) | 2, b"{}"),
        GOOD + _frame(-1),
        GOOD + _frame(7, 3, b"{x}"),
        memoryview(GOOD)[::2],
    ]
    for data in inputs:
        outcome(lambda data=data: fast.decode_frames(data, DEFAULT_MAX_FRAME_LENGTH, MASK))
    # Only what was allocated from the decode's own frames counts: in an xdist worker, execnet's
    # thread allocates and frees report messages while this loop runs. Error paths leave reference
    # cycles (exception, traceback, frame) for the cyclic collector: collected before each count, so
    # that what is left is what the decode really holds, whenever the collector happened to run.
    mine = [
        tracemalloc.Filter(True, __file__),
        tracemalloc.Filter(True, fast_decode.__file__),
        tracemalloc.Filter(True, str(Path(frame.__file__).parent / "*")),
    ]
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.take_snapshot().filter_traces(mine)
        for _ in range(4000):
            for data in inputs:
                outcome(lambda data=data: fast.decode_frames(data, DEFAULT_MAX_FRAME_LENGTH, MASK))
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(mine)
    finally:
        tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert held < 64 * 1024, held


def test_a_bytearray_is_not_held_after_decoding(fast: ModuleType) -> None:
    """feed() shrinks its bytearray right after decoding: no view of it may survive the call."""
    buffer = bytearray(GOOD_RMQ + GOOD + GOOD_RMQ[:7])
    commands, pos = fast.decode_frames(buffer, DEFAULT_MAX_FRAME_LENGTH, MASK)
    assert len(commands) == 2
    del buffer[:pos]
    assert bytes(buffer) == GOOD_RMQ[:7]
    assert [exact(c) for c in commands] == [
        exact(c) for c in REFERENCE(GOOD_RMQ + GOOD, DEFAULT_MAX_FRAME_LENGTH, MASK)[0]
    ]
