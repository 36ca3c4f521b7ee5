"""The index key hash equals Java's for all 230 keys the real broker hashed (incl. generated ones)."""

from __future__ import annotations

import hashlib
import importlib
import random
from types import ModuleType

import pytest

from protocol.accel import pure_python
from protocol.index_key import REFERENCE, build_index_key, index_key_hash, java_string_hash


def _generated_key(description: str) -> str:
    """Build the two long keys the manifest describes instead of listing."""
    if description == "10000 chars: (char)('a'+i%26)":
        return "".join(chr(ord("a") + i % 26) for i in range(10000))
    if description == '3000 x "中\\uD83D\\uDD11"':
        return "中\U0001f511" * 3000
    raise AssertionError(f"unknown key generator: {description}")


def _items(vectors_by_name: dict) -> list[tuple[str, dict]]:
    out = []
    for item in vectors_by_name["index_key_hash"]["items"]:
        if "keyGenerator" in item:
            key = _generated_key(item["keyGenerator"])
            assert hashlib.sha256(key.encode("utf-8")).hexdigest() == item["keySha256Utf8"]
            assert len(key.encode("utf-16-le")) // 2 == item["keyUtf16Length"]
        else:
            key = bytes.fromhex(item["keyUtf8Hex"]).decode("utf-8")
            assert key == item["key"]
        out.append((key, item))
    return out


def test_vector_covers_the_hard_cases(vectors_by_name: dict) -> None:
    items = _items(vectors_by_name)
    assert len(items) == vectors_by_name["index_key_hash"]["count"] == 230
    assert sum("keyGenerator" in item for _, item in items) == 2
    assert any(item["stringHashCode"] == -(2**31) for _, item in items)
    assert any(any(ord(c) > 0xFFFF for c in key) for key, _ in items)
    assert any(key == "" for key, _ in items)


def test_every_key_hashes_like_java(vectors_by_name: dict) -> None:
    for key, item in _items(vectors_by_name):
        index_key = build_index_key(item["topic"], key)
        assert len(index_key.encode("utf-16-le")) // 2 == item["indexKey_utf16_units"]
        assert java_string_hash(index_key) == item["stringHashCode"], key
        h = index_key_hash(index_key)
        assert h == item["indexKeyHash"], key
        assert h % 512 == item["slot512"]
        assert h % 5_000_000 == item["slot5000000"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112), ("polygenelubricants", -(2**31))],
)
def test_known_java_hashes(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_min_value_maps_to_zero() -> None:
    assert index_key_hash("polygenelubricants") == 0


def test_build_index_key() -> None:
    assert build_index_key("TopicA", "k-1") == "TopicA#k-1"


# -- the compiled twin (protocol._index_key_fast) against the pure-Python reference --------------------


def _fast_hashes() -> ModuleType:
    try:
        return importlib.import_module("protocol._index_key_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


def test_the_module_uses_the_compiled_twin_unless_pure_python_is_asked() -> None:
    if pure_python():
        assert index_key_hash is REFERENCE["index_key_hash"]
        assert java_string_hash is REFERENCE["java_string_hash"]
    else:
        fast = _fast_hashes()
        assert index_key_hash is fast.index_key_hash and java_string_hash is fast.java_string_hash


def test_the_twin_hashes_every_broker_key_like_java(vectors_by_name: dict) -> None:
    fast = _fast_hashes()
    for key, item in _items(vectors_by_name):
        index_key = build_index_key(item["topic"], key)
        assert fast.java_string_hash(index_key) == item["stringHashCode"], key
        assert fast.index_key_hash(index_key) == item["indexKeyHash"], key
    assert fast.index_key_hash("polygenelubricants") == 0


def test_the_twin_agrees_with_the_reference_on_random_strings() -> None:
    fast = _fast_hashes()
    ref_java, ref_index = REFERENCE["java_string_hash"], REFERENCE["index_key_hash"]
    rng = random.Random(3)
    # ASCII, Latin-1, BMP (CJK), lone surrogates (what surrogatepass decoding leaves), astral.
    alphabets = [(0x20, 0x7F), (0x80, 0xFF), (0x4E00, 0x4FFF), (0xD800, 0xDFFF), (0x10000, 0x10FFFF)]
    for _ in range(3000):
        parts = []
        for _ in range(rng.randrange(0, 60)):
            lo, hi = rng.choice(alphabets)
            parts.append(chr(rng.randrange(lo, hi + 1)))
        s = "".join(parts)
        assert fast.java_string_hash(s) == ref_java(s), repr(s)
        assert fast.index_key_hash(s) == ref_index(s), repr(s)


def test_the_twin_refuses_what_is_not_a_str() -> None:
    fast = _fast_hashes()
    with pytest.raises(TypeError):
        fast.index_key_hash(b"TopicA#k")
