"""The builder's prefix-cached key hash equals the plain Java hash of ``topic#key``."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from protocol.index_key import build_index_key, index_key_hash
from store.index.builder import KeyHasher


@given(st.text(max_size=40), st.text(max_size=60))
def test_prefix_cached_hash_equals_java_hash(topic: str, key: str) -> None:
    hasher = KeyHasher()
    assert hasher(topic, key) == index_key_hash(build_index_key(topic, key))
    assert hasher(topic, key) == index_key_hash(build_index_key(topic, key))  # cached prefix path


def test_non_bmp_and_min_value_keys() -> None:
    hasher = KeyHasher()
    for topic, key in [("topic_c-1", "🔑1"), ("T", "𝄞music"), ("TopicA", "minhash-979196鿿鱮")]:
        assert hasher(topic, key) == index_key_hash(build_index_key(topic, key))
    # From the shared store: this TopicA key hashes to Integer.MIN_VALUE, which the index stores as 0.
    assert hasher("TopicA", "minhash-979196鿿鱮") == 0


def test_java_index_key_hash_vector(vectors_by_name: dict[str, dict]) -> None:
    items = vectors_by_name["index_key_hash"]["items"]
    assert len(items) == 230
    hasher = KeyHasher()
    generated = {
        "10000 chars: (char)('a'+i%26)": "".join(chr(ord("a") + i % 26) for i in range(10000)),
        '3000 x "中\\uD83D\\uDD11"': "中🔑" * 3000,
    }
    for item in items:
        if item["keyUtf8Hex"] is None:
            key = generated[item["keyGenerator"]]
            assert hashlib.sha256(key.encode("utf-8")).hexdigest() == item["keySha256Utf8"]
        else:
            key = bytes.fromhex(item["keyUtf8Hex"]).decode("utf-8")
        assert hasher(item["topic"], key) == item["indexKeyHash"], item
        assert item["indexKeyHash"] % 5_000_000 == item["slot5000000"]
