"""The compiled JSON header decoder (``protocol._header_json_fast``) against its reference.

For every input both must give the same command (field types, extFields order and all) or the same
error type and message. The compiled path must also really be taken for what Java and the common
clients send (otherwise the comparisons would prove nothing), and left to the reference for what it
does not claim to read (whitespace, duplicates, unknown keys, non-string extFields, ...).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from types import ModuleType

import pytest

from protocol import header_json
from protocol.command import RemotingCommand
from tests.support.fast_decode import compiled_modules, exact, golden_frames, outcome

REFERENCE = header_json._reference_decode_json_header


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    return compiled_modules()[0]


def _same(fast: ModuleType, data: bytes) -> tuple:
    """Both decoders' outcome for ``data``, asserted equal; returns it."""
    expected = outcome(lambda: REFERENCE(data))
    got = outcome(lambda: fast.decode_json_header(data))
    assert got == expected, data
    common = fast.decode_common_json_header(data)
    if common is not None:
        # The compiled path alone never answers where the reference raises, and answers the same.
        assert ("ok", exact(common)) == expected, data
    return expected


def _json_headers(vectors_dir: Path) -> list[bytes]:
    headers = []
    for _, frame in golden_frames(vectors_dir):
        (word,) = struct.unpack_from(">I", frame, 4)
        if word >> 24 == 0:
            headers.append(frame[8 : 8 + (word & 0xFFFFFF)])
    return headers


def test_every_golden_json_header_takes_the_compiled_path(fast: ModuleType, vectors_dir: Path) -> None:
    """What Java 4.9.7 and the 5.x client wrote: all of it is the common shape (escapes and UTF-8
    included), so the fast path is the one that serves real traffic."""
    headers = _json_headers(vectors_dir)
    assert len(headers) > 400
    for header in headers:
        common = fast.decode_common_json_header(header)
        assert common is not None, header
        assert exact(common) == exact(REFERENCE(header)), header


def test_golden_headers_cut_at_every_byte(fast: ModuleType, vectors_dir: Path) -> None:
    headers = sorted(set(_json_headers(vectors_dir)), key=len)
    for header in headers[:: max(1, len(headers) // 12)] + [h for h in headers if b"\\u" in h][:2]:
        for cut in range(len(header)):
            _same(fast, header[:cut])
            _same(fast, header[:cut] + b"}")


EDGE_CASES = [
    # shapes
    b"",
    b"{}",
    b"{",
    b"}",
    b"[]",
    b"null",
    b'"x"',
    b"1",
    b'{"code":12}',
    b'{"code":12,}',
    b'{,"code":12}',
    b'{"code":12"flag":0}',
    b'{"code":12}}',
    b'{"code":12}x',
    b'{"code":12}\x00',
    b'{"code"12}',
    b'{"code":}',
    b"{code:12}",
    b"{'code':12}",
    # whitespace anywhere outside strings
    b' {"code":12}',
    b'{"code":12} ',
    b'{ "code":12}',
    b'{"code" :12}',
    b'{"code": 12}',
    b'{"code":12 }',
    b'{"code":12,\n"flag":1}',
    b'{"extFields":{ "a":"b"}}',
    b'{"extFields":{"a" : "b" }}',
    b'\xef\xbb\xbf{"code":12}',
    # duplicate and unknown keys
    b'{"code":1,"code":2}',
    b'{"remark":"a","remark":null}',
    b'{"extFields":{"a":"1"},"extFields":{"b":"2"}}',
    b'{"extFields":{"a":"1","b":"2","a":"3"}}',
    b'{"extFields":{"a":"1","\\u0061":"3"}}',
    b'{"future":1,"code":5}',
    b'{"code":5,"future":{"x":[1,2,{"y":null}]}}',
    b'{"code":5,"future":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"co\\u0064e":5}',
    b'{"Code":5}',
    b'{"serializeTypeCurrentRPC":"JSON","serializeTypeCurrentRPC":"ROCKETMQ"}',
    b'{"serializeTypeCurrentRPC":1}',
    b'{"serializeTypeCurrentRPC":"\xff"}',
    b'{"serializeTypeCurrentRPC":"\\q"}',
    b'{"serializeTypeCurrentRPC":"caf\xc3\xa9"}',
    # numbers
    b'{"code":2147483647,"flag":-2147483648,"opaque":0,"version":-0}',
    b'{"code":2147483648}',
    b'{"code":-2147483649}',
    b'{"opaque":99999999999999999999999}',
    b'{"opaque":-99999999999999999999}',
    b'{"opaque":123456789012345678}',
    b'{"opaque":1234567890123456789}',
    b'{"code":01}',
    b'{"code":00}',
    b'{"code":-}',
    b'{"code":-a}',
    b'{"code":+1}',
    b'{"code":1.0}',
    b'{"code":1.}',
    b'{"code":1e2}',
    b'{"code":1E2}',
    b'{"code":0x10}',
    b'{"code":"12"}',
    b'{"code":null}',
    b'{"code":true}',
    b'{"code":[1]}',
    b'{"code":NaN}',
    # language
    b'{"language":"JAVA"}',
    b'{"language":"GO"}',
    b'{"language":"NODE_JS"}',
    b'{"language":"java"}',
    b'{"language":"COBOL"}',
    b'{"language":""}',
    b'{"language":"J\\u0041VA"}',
    b'{"language":"\xc3\xa9"}',
    b'{"language":12}',
    b'{"language":99}',
    b'{"language":-1}',
    b'{"language":-0}',
    b'{"language":999999999999999999}',
    b'{"language":9999999999999999999999}',
    b'{"language":null}',
    b'{"language":true}',
    b'{"language":1.5}',
    b'{"language":{"name":"JAVA"}}',
    b'{"language":["JAVA"]}',
    # remark
    b'{"remark":null}',
    b'{"remark":""}',
    b'{"remark":5}',
    b'{"remark":true}',
    b'{"remark":["a"]}',
    b'{"remark":nul}',
    b'{"remark":nulls}',
    # extFields
    b'{"extFields":null}',
    b'{"extFields":{}}',
    b'{"extFields":{"":""}}',
    b'{"extFields":[]}',
    b'{"extFields":"a"}',
    b'{"extFields":{"a":1}}',
    b'{"extFields":{"a":-1.5e3}}',
    b'{"extFields":{"a":true,"b":false}}',
    b'{"extFields":{"a":null}}',
    b'{"extFields":{"a":"x","b":null,"c":"y"}}',
    b'{"extFields":{"a":[1,"b"]}}',
    b'{"extFields":{"a":{"b":{"c":"d"}}}}',
    b'{"extFields":{"a":' + b"[" * 2000 + b"]" * 2000 + b"}}",
    b'{"extFields":{"a":"b",}}',
    b'{"extFields":{"a":"b"}',
    b'{"extFields":{"a":"b"',
    b'{"extFields":{"a"}}',
    b'{"extFields":{1:"a"}}',
    b'{"extFields":{"k' + b"x" * 40 + b'":"long key, not cached"}}',
    # strings: escapes
    b'{"remark":"\\" \\\\ \\/ \\b \\f \\n \\r \\t"}',
    b'{"remark":"\\u0000\\u0001\\u001f\\u007f\\u0085"}',
    b'{"remark":"\\u00e9\\u00E9\\u4f60\\uFFFF\\uFFFE"}',
    b'{"remark":"\\ud83d\\ude00"}',
    b'{"remark":"\\uD83D\\uDE00"}',
    b'{"remark":"\\ud800\\udc00\\udbff\\udfff"}',
    b'{"remark":"\\udbff"}',
    b'{"remark":"\\udbff\\ue000"}',
    b'{"remark":"\\ud83d"}',
    b'{"remark":"\\ud83dx"}',
    b'{"remark":"\\ud83d\\u0041"}',
    b'{"remark":"\\ud83d\\ud83d"}',
    b'{"remark":"\\ude00"}',
    b'{"remark":"\\ude00\\ud83d"}',
    b'{"remark":"\\u12"}',
    b'{"remark":"\\u12g4"}',
    b'{"remark":"\\U00e9"}',
    b'{"remark":"\\x41"}',
    b'{"remark":"\\a"}',
    b'{"remark":"\\\'"}',
    b'{"remark":"\\',
    b'{"remark":"\\"}',
    b'{"remark":"a\\\\"}',
    b'{"remark":"\\\\\\""}',
    b'{"extFields":{"\\u0041\\n":"\\u0042\\t"}}',
    b'{"extFields":{"i":"UNIQ_KEY\\u0001FD00\\u0002WAIT\\u0001true"}}',
    # strings: raw bytes
    b'{"remark":"a\x00b"}',
    b'{"remark":"a\x01b"}',
    b'{"remark":"a\tb"}',
    b'{"remark":"a\nb"}',
    b'{"remark":"a\x1fb"}',
    b'{"remark":"a\x7fb"}',
    b'{"remark":"caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x9a\x80"}',
    b'{"remark":"\xc3"}',
    b'{"remark":"\xc3\xa9\xc3"}',
    b'{"remark":"\xe4\xbd"}',
    b'{"remark":"\xf0\x9f\x9a"}',
    b'{"remark":"\xc0\x80"}',
    b'{"remark":"\xc1\xbf"}',
    b'{"remark":"\xe0\x80\xaf"}',
    b'{"remark":"\xed\xa0\x80"}',
    b'{"remark":"\xed\xbf\xbf"}',
    b'{"remark":"\xf4\x90\x80\x80"}',
    b'{"remark":"\xf8\x88\x80\x80\x80"}',
    b'{"remark":"\xff"}',
    b'{"remark":"\x80"}',
    b'{"remark":"\xef\xbf\xbe\xef\xbf\xbf"}',
    b'{"remark":"\xe2\\u0082"}',
    b'{"remark":"\\u00e2\x82\xac"}',
    b'{"extFields":{"k\xc3\xa9":"v\xe2\x82\xac"}}',
    b'{"extFields":{"k\xc3":"v"}}',
    b'{"extFields":{"k":"v\xff"}}',
    # the shapes Java writes
    b'{"code":33,"extFields":{"offset":"4412154"},"flag":0,"language":"JAVA","opaque":1003,'
    b'"serializeTypeCurrentRPC":"JSON","version":407}',
    b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":18,"remark":"","serializeTypeCurrentRPC":'
    b'"JSON","version":407}',
]


@pytest.mark.parametrize("data", EDGE_CASES)
def test_edge_cases_decode_as_the_reference_does(fast: ModuleType, data: bytes) -> None:
    _same(fast, data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"remark":"\\" \\\\ \\/ \\b \\f \\n \\r \\t"}',
        b'{"remark":"\\ud83d\\ude00\\u0000"}',
        b'{"remark":"\\ud800\\udc00 \\udbff\\udfff \\uDB40\\uDC00"}',
        b'{"remark":"caf\xc3\xa9 \xf0\x9f\x9a\x80"}',
        b'{"remark":"a\x7fb"}',
        b'{"extFields":{"\\u0041\\n":"\\u0042\\t"}}',
        b'{"extFields":{}}',
        b'{"language":12}',
        b'{"language":null}',
        b'{"language":"COBOL"}',
        b'{"language":"J\\u0041VA"}',
        b'{"code":-2147483648,"flag":2147483647}',
        b"{}",
    ],
)
def test_the_compiled_path_reads_escapes_unicode_and_every_field(fast: ModuleType, data: bytes) -> None:
    cmd = fast.decode_common_json_header(data)
    assert cmd is not None
    assert exact(cmd) == exact(REFERENCE(data))


@pytest.mark.parametrize(
    "data",
    [
        b'{"code":12} ',
        b'{"code": 12}',
        b'{"code":1,"code":2}',
        b'{"extFields":{"a":"1","a":"2"}}',
        b'{"future":1}',
        b'{"co\\u0064e":5}',
        b'{"code":2147483648}',
        b'{"extFields":{"maxNum":64}}',
        b'{"extFields":{"a":null}}',
        b'{"language":9999999999999999999999}',
        b'{"serializeTypeCurrentRPC":"\xff"}',
        b'{"remark":"\\ud83d"}',
        "{}",
    ],
)
def test_what_the_compiled_path_does_not_claim_is_left_to_the_reference(
    fast: ModuleType, data: bytes | str
) -> None:
    """Not errors: the reference reads several of these fine (whitespace, unknown keys, numbers in
    extFields, duplicates); the compiled path just does not decide them."""
    assert fast.decode_common_json_header(data) is None
    assert outcome(lambda: fast.decode_json_header(data)) == outcome(lambda: REFERENCE(data))


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """A few edits a hand-written client or a bit flip would make, biased to JSON's own bytes."""
    out = bytearray(data)
    tokens = [
        b" ",
        b"\\",
        b'"',
        b",",
        b":",
        b"{",
        b"}",
        b"[",
        b"]",
        b"-",
        b"0",
        b"9",
        b".",
        b"e",
        b"\\u",
        b"\\ud83d",
    ]
    tokens += [
        b"null",
        b"true",
        b"\x00",
        b"\x7f",
        b"\xc3",
        b"\xa9",
        b"\xff",
        b"\xed\xa0\x80",
        b"\xf0\x9f\x9a\x80",
    ]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        at = rng.randrange(len(out) + 1)
        op = rng.randrange(11)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at:at] = rng.choice(tokens)
        elif op == 2:
            del out[at : at + rng.randint(1, 4)]
        elif op == 3:
            out[at : at + 1] = rng.choice(tokens)
        elif op in (4, 5, 6, 7):
            digits = str(rng.choice([2**31, 2**31 - 1, -(2**31), -(2**31) - 1, 10**18, 10**19, 0, -0, 7]))
            out[at:at] = digits.encode()
        elif op in (8, 9):
            # Text that, inside a string, the compiled path must decode itself (escapes, UTF-8).
            out[at:at] = rng.choice([b"\\u0041", b"\\n", b"\\u00e9", b"\xc3\xa9", b"\\ud83d\\ude00", b"a"])
        else:
            out = out[:at]
    return bytes(out)


def test_a_seeded_mutation_corpus_decodes_as_the_reference_does(fast: ModuleType, vectors_dir: Path) -> None:
    rng = random.Random(20261122)
    seeds = sorted(set(_json_headers(vectors_dir)))
    taken = errors = 0
    for _ in range(6000):
        data = _mutate(rng, rng.choice(seeds))
        kind = _same(fast, data)[0]
        taken += fast.decode_common_json_header(data) is not None
        errors += kind == "error"
    # The corpus exercises both the compiled path and the errors the reference raises.
    assert taken > 1000 and errors > 1000, (taken, errors)


def test_decoding_holds_no_memory(fast: ModuleType) -> None:
    """The C code frees what it makes on every path (result, fallback, error): 20,000 decodes of
    each kind may not leave more than a few KiB behind (a leaked dict each would be megabytes)."""
    import tracemalloc

    inputs = [
        b'{"code":33,"extFields":{"offset":"4412154","k\xc3\xa9":"\\u00e9"},"language":"JAVA","opaque":1}',
        b'{"code":33,"extFields":{"offset":4412154}}',
        b'{"remark":"\\ud83d"}',
        b'{"code":1,"extFields":{"a":"1","a":"2"}}',
    ]
    for data in inputs:
        outcome(lambda data=data: fast.decode_json_header(data))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5000):
            for data in inputs:
                outcome(lambda data=data: fast.decode_json_header(data))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 64 * 1024, held


def test_the_command_is_built_like_the_reference_builds_it(fast: ModuleType) -> None:
    cmd = fast.decode_json_header(b'{"code":12,"language":"GO","extFields":{"b":"1","a":"2"}}')
    assert type(cmd) is RemotingCommand
    assert list(cmd.ext_fields) == ["b", "a"]
    assert cmd.body is None
