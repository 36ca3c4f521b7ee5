"""The compiled batch decode (``protocol/_batch_decode_fast.c``, issue 33) against the Python reference
(``decode_batch_body_python``): the same items, byte for byte, for the Java producer's batches, random
ones, with and without the batch's own properties appended, and the reference's error for every
body that does not parse.

The C module is loaded directly, so it is checked whichever way the suite runs (``RMQ_PURE_PYTHON=1``
or not); the expected values are the reference's (or, for the fixed vectors, written out by hand).
"""

from __future__ import annotations

import importlib
import random
import struct
from types import ModuleType

import pytest

from protocol import send_message
from protocol.errors import MessageDecodeError
from protocol.send_message import BatchItem, decode_batch_body_python, encode_batch_body


def _fast() -> ModuleType:
    try:
        return importlib.import_module("protocol._batch_decode_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


def _compiled(body: bytes, suffix: bytes = b"") -> list[BatchItem] | None:
    return _fast().decode_batch_body(body, suffix, BatchItem)  # type: ignore[no-any-return]


def _raw(flag: int, body: bytes, props: bytes) -> bytes:
    return (
        struct.pack(">iiiii", 20 + len(body) + 2 + len(props), 0, 0, flag, len(body))
        + body
        + (struct.pack(">h", len(props)) + props)
    )


def test_hand_written_items_with_and_without_the_batch_properties() -> None:
    body = _raw(0, b"one", b"KEYS\x01a") + _raw(-7, b"", b"") + _raw(3, b"x", b"TAGS\x01t\x02")
    assert _compiled(body) == [
        BatchItem(0, b"one", b"KEYS\x01a"),
        BatchItem(-7, b"", b""),
        BatchItem(3, b"x", b"TAGS\x01t\x02"),
    ]
    assert _compiled(body, b"WAIT\x01true\x02CLUSTER\x01c") == [
        BatchItem(0, b"one", b"KEYS\x01a\x02WAIT\x01true\x02CLUSTER\x01c"),  # a separator added
        BatchItem(-7, b"", b"WAIT\x01true\x02CLUSTER\x01c"),  # none before nothing
        BatchItem(3, b"x", b"TAGS\x01t\x02WAIT\x01true\x02CLUSTER\x01c"),  # none after one
    ]
    items = _compiled(body)
    assert items is not None and type(items[0]) is BatchItem and items[0].properties == b"KEYS\x01a"
    assert _compiled(b"") == [] == decode_batch_body_python(b"")


def _random_body(rng: random.Random) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
    sent = []
    for _ in range(rng.randrange(0, 40)):
        props = bytes(rng.choice(b"ab\x01\x02\xc3\xa9") for _ in range(rng.randrange(0, 60)))
        body = rng.randbytes(rng.choice((0, 1, 17, 1024)))
        sent.append((rng.randrange(-(2**31), 2**31), body, props))
    return b"".join(_raw(*m) for m in sent), sent


@pytest.mark.parametrize("seed", range(40))
def test_random_batches_decode_as_the_reference_decodes_them(seed: int) -> None:
    rng = random.Random(seed)
    body, sent = _random_body(rng)
    for suffix in (b"", b"WAIT\x01true", b"\x02", rng.randbytes(rng.randrange(1, 40))):
        compiled = _compiled(body, suffix)
        assert compiled == decode_batch_body_python(body, suffix)
        assert compiled is not None and [type(i) for i in compiled] == [BatchItem] * len(sent)
    assert [tuple(i) for i in _compiled(body) or []] == sent


def test_the_java_producers_batch_shape() -> None:
    messages = [
        (0, b"x" * 1024, {"KEYS": f"k-{m}", "TAGS": "TagB", "UNIQ_KEY": f"U{m:031d}"}) for m in range(32)
    ]
    body = encode_batch_body(messages)
    suffix = b"WAIT\x01true\x02CLUSTER\x01DefaultCluster"
    assert _compiled(body, suffix) == decode_batch_body_python(body, suffix)


@pytest.mark.parametrize("seed", range(20))
def test_every_cut_or_bad_length_is_handed_to_the_reference_for_its_error(seed: int) -> None:
    rng = random.Random(1000 + seed)
    body, _ = _random_body(rng)
    body += _raw(1, b"tail", b"P\x01v")
    bad = [body[:cut] for cut in sorted(rng.sample(range(1, len(body)), min(12, len(body) - 1)))]
    damaged = bytearray(body)
    damaged[16:20] = struct.pack(">i", rng.choice((-1, len(body), 2**31 - 1)))  # the first body length
    bad.append(bytes(damaged))
    for data in bad:
        try:
            expected: object = decode_batch_body_python(data)
        except MessageDecodeError as exc:
            expected = str(exc)
            assert _compiled(data) is None
        else:
            assert _compiled(data) == expected  # a cut at a message boundary still parses
        # the name the server calls gives the reference's answer or error text either way
        try:
            got: object = send_message.decode_batch_body(data)
        except MessageDecodeError as exc:
            got = str(exc)
        assert got == expected


def test_a_negative_properties_length_is_the_references_error() -> None:
    # -1 steps back one byte, where a whole message starts (its TOTALSIZE's first byte is the
    # length's second): only the sign check stops it
    second = b"\xff\x00\x00\x00" + bytes(12) + struct.pack(">ih", 0, 0)
    data = struct.pack(">iiiii", 0, 0, 0, 0, 1) + b"b" + b"\xff" + second
    assert _compiled(data) is None
    with pytest.raises(MessageDecodeError, match="properties length -1"):
        send_message.decode_batch_body(data)


def test_bad_arguments_are_a_type_error_not_a_crash() -> None:
    fast = _fast()
    with pytest.raises(TypeError):
        fast.decode_batch_body(bytearray(b""), b"", BatchItem)
    with pytest.raises(TypeError):
        fast.decode_batch_body(b"", b"", dict)
    with pytest.raises(TypeError):
        fast.decode_batch_body(b"", b"")
