"""Java ``HashMap`` iteration order, checked against the orders Java itself produced."""

from __future__ import annotations

import json
from pathlib import Path

from protocol.frame import decode_frame
from protocol.index_key import java_string_hash
from protocol.java_hashmap import as_java_hashmap, java_hashmap_order


def _bucket(key: str, capacity: int) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def test_manifest_orders(manifest: dict) -> None:
    checked = 0
    for vector in manifest["vectors"]:
        order = vector.get("extFieldsOrderAsHashMap")
        if order:
            assert java_hashmap_order(sorted(order)) == order, vector["name"]
            assert java_hashmap_order(reversed(order)) == order, vector["name"]
            checked += 1
    assert checked >= 16


def test_captured_4_9_7_frames_iterate_in_bucket_order(vectors_dir: Path) -> None:
    """Every extFields map a 4.9.7 process sent is in bucket order (ties keep insertion order,
    which a frame does not reveal, so the check is on buckets)."""
    checked = 0
    for frames_file in sorted((vectors_dir / "wire").glob("*/frames.json")):
        for frame in json.loads(frames_file.read_text(encoding="utf-8")):
            if frame["header"]["version"] != 407:
                continue
            cmd = decode_frame((frames_file.parent / frame["file"]).read_bytes())
            if not cmd.ext_fields:
                continue
            # Java's HashMap starts at 16 buckets and doubles once it holds more than 3/4 of them
            # (a PULL_MESSAGE header with AccessKey and Signature has 13+ fields: 32 buckets).
            capacity = 16
            while len(cmd.ext_fields) > capacity * 0.75:
                capacity *= 2
            buckets = [_bucket(key, capacity) for key in cmd.ext_fields]
            assert buckets == sorted(buckets), f"{frames_file.parent.name}/{frame['file']}"
            assert [_bucket(k, capacity) for k in java_hashmap_order(cmd.ext_fields)] == buckets
            checked += 1
    assert checked > 50


def test_table_grows_past_three_quarters() -> None:
    keys = [f"key{i}" for i in range(13)]  # 13 > 12 = 0.75 * 16: the table doubles to 32
    order = java_hashmap_order(keys)
    assert sorted(order) == sorted(keys)
    buckets = [_bucket(key, 32) for key in order]
    assert buckets == sorted(buckets)
    assert [_bucket(key, 16) for key in java_hashmap_order(keys[:12])] == sorted(
        _bucket(key, 16) for key in keys[:12]
    )


def test_as_java_hashmap_keeps_values() -> None:
    mapping = {"topic": "T", "key": "k", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "9"}
    result = as_java_hashmap(mapping)
    assert result == mapping
    assert list(result) == ["beginTimestamp", "topic", "maxNum", "endTimestamp", "key"]
