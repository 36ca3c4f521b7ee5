"""Opening a CommitLog walks its last file to find the written end; the pages that walk reads are
handed back to the kernel in bounded steps, not once at the end, so opening a store whose last
1 GiB file is full does not make the whole file resident at once (the peak the RSS benchmark saw)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from store.commitlog import mapped_files as commitlog_module
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter


def test_end_walk_releases_pages_in_bounded_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=1 << 20, message_index_enable=False
    )
    with StoreWriter(config) as writer:
        for i in range(200):
            writer.append("Mem", bytes(4000), keys=f"m-{i}")
        end = writer.position
    step = 64 << 10
    monkeypatch.setattr(commitlog_module, "RELEASE_EVERY", step)
    released: list[tuple[int, int]] = []
    real_release = CommitLog.release

    def spy(self: CommitLog, start: int, stop: int) -> None:
        released.append((start, stop))
        real_release(self, start, stop)

    monkeypatch.setattr(CommitLog, "release", spy)
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        assert log.max_offset == end
        assert len(released) >= end // step, "released in steps while walking"
        assert all(stop - start < step + 5000 for start, stop in released), released
        assert released[0][0] == 0 and released[-1][1] == end
        assert all(a[1] == b[0] for a, b in itertools.pairwise(released)), "no gaps"
    finally:
        log.close()
