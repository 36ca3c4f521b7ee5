"""``rmq-query fsck`` passes the Java store and names each kind of damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.cli import main
from store.check import store_check
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


def _damage_entries(copy: StoreConfig, how: str) -> None:
    first = sorted(copy.index_dir.iterdir())[0]
    data = bytearray(first.read_bytes())
    at = 40 + copy.max_hash_slot_num * 4
    n = 300
    key_hash, phy, diff, prev = ENTRY.unpack_from(data, at + n * 20)
    if how == "hash":
        ENTRY.pack_into(data, at + n * 20, key_hash ^ 1, phy, diff, prev)
    elif how == "mid-record":
        ENTRY.pack_into(data, at + n * 20, key_hash, phy + 1, diff, prev)
    elif how == "before the log":
        ENTRY.pack_into(data, at + n * 20, key_hash, 17, diff, prev)
    elif how == "swapped":
        data[at + n * 20 : at + (n + 2) * 20] = (
            data[at + (n + 1) * 20 : at + (n + 2) * 20] + data[at + n * 20 : at + (n + 1) * 20]
        )
    first.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["hash", "mid-record", "before the log", "swapped"])
def test_the_deep_check_in_chunks_reports_what_the_entry_by_entry_check_reports(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A chunk of entries that is what the index builder makes of its records passes at once; one
    that is not is checked entry by entry. Forcing every chunk entry by entry gives the same lines."""
    config, _ = golden_stores[0]
    copy = _copy(config, tmp_path)
    _damage_entries(copy, how)
    chunked = check_store(copy, deep=True).problems
    monkeypatch.setattr(store_check, "_records_keys_match", lambda *_args: False)
    assert chunked and chunked == check_store(copy, deep=True).problems


def test_a_clean_index_passes_the_deep_check_in_chunks(
    golden_stores: list[tuple[StoreConfig, dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _ = golden_stores[0]
    single: list[int] = []
    monkeypatch.setattr(store_check._EntryCheck, "entries", lambda _self, base, _chunk: single.append(base))
    assert check_store(config, deep=True).ok
    assert single == []
