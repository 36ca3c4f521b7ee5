"""IndexFiles are named like the broker's (``yyyyMMddHHmmssSSS`` of the creation time, local time),
and the names a builder creates stay unique and ascending even within one millisecond, since the
file order is the name order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.index.service import IndexService, index_file_name


@pytest.fixture
def utc_plus_8(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "CST-8")  # POSIX form: UTC+8, no tz database needed
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_name_is_local_time_to_the_millisecond(utc_plus_8: None) -> None:
    # 2026-11-20 23:20:34.258 UTC is 2026-11-21 07:20:34.258 in UTC+8 (no DST there).
    millis = 1795216834258
    assert time.gmtime(millis // 1000)[:6] == (2026, 11, 20, 23, 20, 34)
    assert index_file_name(millis) == "20261121072034258"
    assert index_file_name(millis - 258) == "20261121072034000"


def test_created_names_are_unique_and_ascending(tmp_path: Path) -> None:
    config = StoreConfig.for_store(tmp_path, max_hash_slot_num=4, max_index_num=4)
    index = IndexService(config, writable=True)
    try:
        now = 1795216834258
        names = [index.create_file(now).name for _ in range(3)]
        assert names == sorted(names) and len(set(names)) == 3
        assert all(len(n) == 17 and n.isdigit() for n in names)
        assert names[0] == index_file_name(now)
        # An older clock (a clock step back) still sorts after the existing files.
        assert index.create_file(now - 60_000).name > names[-1]
    finally:
        index.close()
    reread = IndexService(config)
    try:
        assert [f.name for f in reread.files] == [*names, reread.files[-1].name]
    finally:
        reread.close()
