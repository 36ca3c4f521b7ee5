"""``rmq-query fsck`` passes the Java store and names each kind of damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.cli import main
from store.check.store_check import check_store
from store.config.store_config import StoreConfig
from store.index.index_file import ENTRY
from tests.support.store_copy import writable_copy


def _copy(config: StoreConfig, tmp_path: Path) -> StoreConfig:
    return writable_copy(config, tmp_path / "s")


def test_java_store_is_clean(
    golden_stores: list[tuple[StoreConfig, dict]], capsys: pytest.CaptureFixture[str]
) -> None:
    config, expected = golden_stores[0]
    report = check_store(config, deep=True)
    assert report.ok, report.problems
    assert report.records == len(expected["messages"])
    conf = config.store_path_root_dir.parent / f"{config.store_path_root_dir.name}.broker.conf"
    assert main(["fsck", "--store", str(config.store_path_root_dir), "--conf", str(conf)]) == 0
    assert "OK" in capsys.readouterr().out


def test_corrupt_body_mid_log_is_reported(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    config, expected = golden_stores[0]
    copy = _copy(config, tmp_path)
    victim = expected["messages"][2000]
    size = copy.mapped_file_size_commit_log
    path = copy.store_path_commit_log / f"{victim['commitLogOffset'] // size * size:020d}"
    data = bytearray(path.read_bytes())
    sys_flag = victim["sysFlag"]
    body_at = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 4 + 8 + 4
    assert victim["bodyLen"] > 1
    data[victim["commitLogOffset"] % size + body_at] ^= 0xFF  # the body's first byte: BODYCRC fails
    path.write_bytes(bytes(data))
    report = check_store(copy)
    offset = victim["commitLogOffset"]
    assert report.problems == [
        f"CommitLog record at offset {offset} (file {path.name}, byte {offset % size}) is corrupt (it fails "
        f"the broker's recovery check: lengths or BODYCRC); whole records resume at offset "
        f"{offset + victim['size']}"
    ]
    assert report.records == len(expected["messages"]) - 1, "every other record is still read"


def test_index_damage_is_reported(golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path) -> None:
    config, _ = golden_stores[0]
    copy = _copy(config, tmp_path)
    first = sorted(copy.index_dir.iterdir())[0]
    data = bytearray(first.read_bytes())
    ENTRY.pack_into(
        data,
        40 + copy.max_hash_slot_num * 4 + 5 * 20,
        *ENTRY.unpack_from(data, 40 + 512 * 4 + 5 * 20)[:1],
        17,
        0,
        0,
    )
    first.write_bytes(bytes(data))
    sorted(copy.index_dir.iterdir())[-1].unlink()
    report = check_store(copy, deep=True)
    assert any("entry 5 points at 17" in p for p in report.problems), report.problems
    assert any("index is behind" in p for p in report.problems), report.problems


def test_a_missing_store_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped --store used to pass as an empty store with only a missing checkpoint."""
    assert main(["fsck", "--store", str(tmp_path / "nope")]) == 1
    captured = capsys.readouterr()
    assert f"no store directory at {tmp_path / 'nope'}" in captured.err
    assert "PROBLEM" not in captured.out
