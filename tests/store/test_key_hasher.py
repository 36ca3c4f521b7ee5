"""The builder's prefix-cached key hash equals the plain Java hash of ``topic#key``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol.index_key import build_index_key, index_key_hash
from store.index_builder import KeyHasher


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
