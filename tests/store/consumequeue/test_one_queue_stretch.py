"""A stretch whose entries all go to one queue is written without the build mark.

The mark (``RESUME_MARK``) is for batches of several queues, which are not written in CommitLog
order. One queue's entries are (a batch of 32 from one SEND_BATCH_MESSAGE, a lone SEND's entry):
a kill leaves a prefix of them, a torn last one is zeroed at open, and the build resumes where the
prefix ends. So such a stretch costs its own ``pwrite``s only, not the mark's two more; and a kill
at any byte of it still ends with the bytes of a clean build.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import store.consumequeue.builder as builder_module
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.consumequeue.builder import RESUME_MARK, ConsumeQueueBuilder, rebuild_consume_queues
from store.write.writer import StoreRecord
from tests.support.killed_build import build_killed_after

#: 100 entries a consume-queue file: the 300 entries cross two file boundaries.
CQ_FILE = 2000


def _store(root: Path) -> StoreConfig:
    """300 records of one queue, appended in batches of 30 and 60 (as SEND_BATCH_MESSAGEs are)."""
    config = StoreConfig.for_store(root, mapped_file_size_consume_queue=CQ_FILE)
    with WritableStore(config) as store:
        store.create_topic("One", 1)
        at = 0
        for size in (30, 60) * 3 + (30,):
            store.append(
                [
                    StoreRecord("One", b"body-%d" % i, f"KEYS\x01k{i}\x02", queue_id=0)
                    for i in range(at, at + size)
                ]
            )
            store.settle()
            at += size
    assert at == 300
    return config


def _cq_files(config: StoreConfig) -> dict[str, str]:
    root = config.consume_queue_dir
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and p.name != RESUME_MARK
    }


@pytest.fixture
def built(tmp_path: Path) -> tuple[StoreConfig, dict[str, str]]:
    config = _store(tmp_path / "s")
    shutil.rmtree(config.consume_queue_dir)
    builder = rebuild_consume_queues(config)
    assert (builder.records_read, builder.entries_written) == (300, 300)
    return config, _cq_files(config)


def test_one_queues_stretch_sets_no_mark(
    built: tuple[StoreConfig, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, clean = built
    shutil.rmtree(config.consume_queue_dir)
    marks: list[int] = []
    real_set = builder_module._Mark.set

    def counted_set(self: builder_module._Mark, at: int) -> None:
        marks.append(at)
        real_set(self, at)

    monkeypatch.setattr(builder_module._Mark, "set", counted_set)
    builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    assert marks == [], "300 entries of one queue: no mark"
    assert _cq_files(config) == clean


@pytest.mark.parametrize("kill_after_bytes", [0, 8, 20, 37, 1_990, 2_010, 4_020, 5_999])
def test_a_kill_inside_one_queues_stretch_ends_with_a_clean_builds_bytes(
    built: tuple[StoreConfig, dict[str, str]], monkeypatch: pytest.MonkeyPatch, kill_after_bytes: int
) -> None:
    """Killed after N bytes of entries (the last write torn at that byte and left so, as a kill
    splits a write), then opened again and built to the end: the files are a clean build's."""
    config, clean = built
    shutil.rmtree(config.consume_queue_dir)
    build_killed_after(config, monkeypatch, kill_after_bytes)
    builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    assert _cq_files(config) == clean
