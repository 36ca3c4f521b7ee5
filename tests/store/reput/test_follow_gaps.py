"""A follower (``rebuild-index --follow``, ``serve --build-index``) that meets a missing or cut-short
middle CommitLog file waits there, as the broker's reput does, and says so once: which file, where
whole records stop and resume, and what builds around it. Before, it stopped without a word.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.commitlog.mapped_files import CommitLog
from store.consumequeue.builder import ConsumeQueueBuilder
from store.index.builder import IndexBuilder
from store.message_store import MessageStore
from tests.support.gap_damage import (
    FILE_SIZE,
    MIDDLE,
    REPO_ROOT,
    STORE,
    copy_store,
    file_name,
    remove_middle_file,
    truncate_middle_file,
)

STALL = "following the CommitLog stops at a CommitLog gap"
REBUILD = (sys.executable, "-m", "clients.cli", "rebuild-index", "--store")
DAMAGES = {"missing-file": remove_middle_file, "truncated-file": truncate_middle_file}


@pytest.fixture(scope="module")
def messages(stores_dir: Path) -> list[dict]:
    expected = json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))
    return sorted(expected["messages"], key=lambda m: m["commitLogOffset"])


def _unindexed_copy(stores_dir: Path, root: Path):
    config = copy_store(stores_dir, root)
    shutil.rmtree(root / "index")
    shutil.rmtree(root / "consumequeue")
    return config


def _stalls(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and STALL in r.getMessage()
    ]


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_following_waits_at_a_middle_gap_and_says_so_once(
    stores_dir: Path, tmp_path: Path, messages: list[dict], caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    config = _unindexed_copy(stores_dir, tmp_path / "s")
    gap = DAMAGES[damage](tmp_path / "s", messages)
    caplog.set_level(logging.WARNING)
    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    index = IndexBuilder(config, commitlog)
    queues = ConsumeQueueBuilder(config, commitlog)
    try:
        for _ in range(3):  # three polls of a follower
            commitlog.refresh()
            index.run_once()
            queues.run_once()
        (said,) = _stalls(caplog)  # one line for both builders and every poll
        assert f"whole records stop at offset {gap.start} and resume at offset {gap.resume}" in said
        for phrase in gap.phrases:
            assert phrase in said
        assert "--index-around-gaps" in said
        # It waits: nothing after the gap is indexed or dispatched (the broker's reput waits there too).
        after = [m for m in messages if m["commitLogOffset"] >= gap.resume]
        assert after and index.next_offset == gap.start and gap.start <= queues.next_offset < gap.resume
        assert queues.records_read == sum(1 for m in messages if m["commitLogOffset"] < gap.start)

        # The file comes back (restored from a backup): following goes on to the end, without a word.
        shutil.copy(
            stores_dir / STORE / "commitlog" / file_name(MIDDLE),
            config.store_path_commit_log / file_name(MIDDLE),
        )
        commitlog.refresh()
        index.run_once()
        queues.run_once()
        assert index.next_offset == queues.next_offset == commitlog.max_offset
        assert queues.records_read == len(messages)
        assert len(_stalls(caplog)) == 1
    finally:
        index.close()
        queues.close()
        commitlog.close()
    with MessageStore.open(config) as store:  # the last record's keys were indexed after the gap
        last = messages[-1]
        key = last["keys"].split(" ")[0] if last.get("keys") else last["uniqKey"]
        offsets = [
            int.from_bytes(b[28:36], "big")
            for b in store.query_message(last["topic"], key, 64, 0, 2**63 - 1).buffers
        ]
        assert last["commitLogOffset"] in offsets


def test_serve_build_index_says_it_once_too(
    stores_dir: Path, tmp_path: Path, messages: list[dict], caplog: pytest.LogCaptureFixture
) -> None:
    """``serve --build-index``'s store: its backlog slices and refreshes meet the gap once each poll."""
    config = _unindexed_copy(stores_dir, tmp_path / "s")
    gap = remove_middle_file(tmp_path / "s", messages)
    caplog.set_level(logging.WARNING)
    with MessageStore.open(config, build_index=True, catch_up=False) as store:
        while store.refresh(max_records=500):
            pass
        store.refresh()
        store.refresh()
    (said,) = _stalls(caplog)
    assert gap.phrases[0] in said


def test_rebuild_index_follow_prints_it_once(stores_dir: Path, tmp_path: Path, messages: list[dict]) -> None:
    config = _unindexed_copy(stores_dir, tmp_path / "s")
    gap = remove_middle_file(tmp_path / "s", messages)
    proc = subprocess.Popen(
        [*REBUILD, str(config.store_path_root_dir), "--follow", "--interval", "0.05"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a bound on the wait, not a timing assertion
        index_dir = config.store_path_root_dir / "index"
        while time.monotonic() < deadline and not any(index_dir.glob("*")):
            time.sleep(0.05)
        time.sleep(0.5)  # about ten polls at the gap
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert err.count(STALL) == 1, err
    assert (
        f"file {file_name(MIDDLE)} (offsets {MIDDLE * FILE_SIZE}..{(MIDDLE + 1) * FILE_SIZE}) is missing"
        in err
    )
    assert f"resume at offset {gap.resume}" in err
