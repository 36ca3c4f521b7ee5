"""The real IndexFile vector (8 slots, 24 entries): replaying its putKey calls writes the same bytes,
and every selectPhyOffset answer the Java IndexFile gave is reproduced on both files."""

from __future__ import annotations

from pathlib import Path

from protocol.index_key import index_key_hash
from store.index.index_file import IndexFile


def test_replayed_puts_write_the_java_bytes(
    vectors_dir: Path, vectors_by_name: dict[str, dict], tmp_path: Path
) -> None:
    v = vectors_by_name["index_small"]
    java = (vectors_dir / v["file"]).read_bytes()
    assert len(java) == v["fileLength"]
    ours = IndexFile.create(tmp_path / "20231114221320000", v["hashSlotNum"], v["indexNum"])
    for put in v["puts"]:
        assert index_key_hash(put["key"]) == put["hash"]
        assert put["hash"] % v["hashSlotNum"] == put["slot"]
        assert ours.put_key(put["key"], put["phyOffset"], put["storeTimestamp"]) is put["ok"]
    ours.close()
    assert (tmp_path / "20231114221320000").read_bytes() == java


def test_select_answers_match_java(vectors_dir: Path, vectors_by_name: dict[str, dict]) -> None:
    v = vectors_by_name["index_small"]
    f = IndexFile.open(vectors_dir / v["file"], v["hashSlotNum"], v["indexNum"])
    try:
        h = f.header
        assert (h.begin_timestamp, h.end_timestamp, h.end_phy_offset) == (
            v["header"]["beginTimestamp"],
            v["header"]["endTimestamp"],
            v["header"]["endPhyOffset"],
        )
        assert f.is_write_full() is v["header"]["isWriteFull"]
        assert v["selectPhyOffset"]
        for q in v["selectPhyOffset"]:
            out: list[int] = []
            f.select_phy_offsets(out, q["key"], q["maxNum"], q["begin"], q["end"])
            assert out == q["phyOffsets"], q
    finally:
        f.close()
