"""The index key hash equals Java's for all 230 keys the real broker hashed (incl. generated ones)."""

from __future__ import annotations

import hashlib

import pytest

from protocol.index_key import build_index_key, index_key_hash, java_string_hash


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
