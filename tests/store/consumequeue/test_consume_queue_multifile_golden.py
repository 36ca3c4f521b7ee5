"""Queues of several files, pinned by the real Java 4.9.7 store.

``data/java-4.9.7-cq-multifile.json.gz``: a copy of ``tests/golden/stores/java-4.9.7-a`` whose consume queues
were deleted and rebuilt by the real 4.9.7 broker with ``mappedFileSizeConsumeQueue=2400`` (120 entries a
file, 3 to 5 files a queue), then answered by ``cqgolden`` (shared/java-harness), trimmed by
``data/trim_cq_golden.py`` (the file mtimes included: the broker picks a file by mtime for
offset-by-time). Here the queues are rebuilt from the shared CommitLog by this project's builder, must
equal the broker's files byte for byte, get the broker's mtimes, and must answer as the broker did.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.consumequeue.builder import rebuild_consume_queues
from store.message_store import MessageStore

DATA = Path(__file__).parent / "data" / "java-4.9.7-cq-multifile.json.gz"


@pytest.fixture(scope="module")
def golden() -> dict:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def rebuilt(golden: dict, stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    root = tmp_path_factory.mktemp("multifile") / "store"
    root.mkdir()
    shutil.copytree(stores_dir / "java-4.9.7-a" / "commitlog", root / "commitlog")
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    msc = golden["messageStoreConfig"]
    config = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=msc["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=msc["mappedFileSizeConsumeQueue"],
    )
    rebuild_consume_queues(config)
    for f in golden["consumequeueFiles"]:
        os.utime(root / f["path"], ns=(f["mtimeMs"] * 1_000_000, f["mtimeMs"] * 1_000_000))
    return config


def test_rebuilt_files_equal_the_brokers(golden: dict, rebuilt: StoreConfig) -> None:
    root = rebuilt.store_path_root_dir
    got = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }
    assert got == {f["path"]: f["sha256"] for f in golden["consumequeueFiles"]}
    assert len(got) == 48


def test_answers_equal_the_brokers(golden: dict, rebuilt: StoreConfig) -> None:
    checked = 0
    with MessageStore.open(rebuilt) as store:
        for t in golden["topics"]:
            topic = t["topic"]
            for q in t["queues"]:
                qid = q["queueId"]
                assert store.min_offset(topic, qid) == q["minOffsetInQueue"]
                assert store.max_offset(topic, qid) == q["maxOffsetInQueue"]
                assert store.earliest_message_time(topic, qid) == q["earliestMessageTime"]
                for timestamp, want in q["offsetByTime"]:
                    assert store.offset_by_time(topic, qid, timestamp) == want, (topic, qid, timestamp)
                    checked += 1
                for probe in q["getMessage"]:
                    r = store.get_message(topic, qid, probe["offset"], probe["maxMsgNums"])
                    assert (r.status.name, r.next_begin_offset, r.min_offset, r.max_offset) == (
                        probe["status"],
                        probe["nextBeginOffset"],
                        probe["minOffset"],
                        probe["maxOffset"],
                    ), (topic, qid, probe["label"])
                    assert r.buffer_total_size == probe["bufferTotalSize"]
                    assert [hashlib.sha256(b).hexdigest() for b in r.buffers] == [
                        m["rawSha256"] for m in probe["messages"]
                    ]
                shas = []
                offset = q["minOffsetInQueue"]
                for step in q["walk"]:
                    r = store.get_message(topic, qid, offset, 32)
                    assert [offset, r.next_begin_offset, r.message_count, r.buffer_total_size] == step
                    shas += [hashlib.sha256(b).hexdigest() for b in r.buffers]
                    offset = r.next_begin_offset
                assert hashlib.sha256("".join(shas).encode()).hexdigest() == q["walkRawSha256s"]
            rows = golden["topicStats"][topic]
            want = [(r["queueId"], r["minOffset"], r["maxOffset"], r["lastUpdateTimestamp"]) for r in rows]
            assert store.topic_stats(topic) == want
    assert checked == 9000
