"""Opening a store for writing whose CommitLog ends below its consume queues' entries.

The 4.9.7 broker's recovery (``CommitLog.recoverNormally``/``recoverAbnormally``) calls
``truncateDirtyLogicFiles(processOffset)`` when the consume queues point at or past where the
CommitLog's whole records end: each queue keeps only its entries below that offset, so the next
record of a queue takes the queue offset after the last record that survived. Expected values here
come from that rule applied to what the test sent (which records lie wholly before the cut), never
from the code under test.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader, client_properties
from server.broker.put_message import PutContext, single_record
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.config.topics import TopicTable
from store.consumequeue.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE, ConsumeQueue, entry_bytes
from store.consumequeue.trim import trim_queues_past
from store.message_store import MessageStore
from tests.support.paths import REPO_ROOT

FILE_SIZE = 64 * 1024
BODY = b"y" * 900


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=FILE_SIZE, broker_ip1="127.0.0.1")


def _record(topic: str, key: str, queue_id: int):
    header = SendMessageRequestHeader(
        "g", topic, "TBW102", 4, queue_id, 0, 5, 0, client_properties(key, None, None, f"U-{key}")
    )
    return single_record(header, BODY, PutContext("DefaultCluster", 4096, "127.0.0.1", 9))


def _queue_of(i: int) -> tuple[str, int]:
    return ("A", i % 4) if i % 3 else ("B", i % 2)


def _send(store: WritableStore, keys: list[str], start: int) -> list[tuple[str, int, str, int, int]]:
    """(topic, queue, key, CommitLog offset, size) of each message sent."""
    out = []
    for i, key in enumerate(keys, start):
        topic, queue_id = _queue_of(i)
        (done,) = store.put([_record(topic, key, queue_id)])
        out.append((topic, queue_id, key, done.offset, done.size))
    return out


def _cut(config: StoreConfig, how: str, sent: list[tuple[str, int, str, int, int]]) -> int:
    """Damage the CommitLog's tail; returns where its whole records now end."""
    files = sorted(config.store_path_commit_log.iterdir())
    last = max(p for p in files if p.read_bytes()[:8] != bytes(8))
    start = int(last.name)
    if how == "last-file-removed":
        for p in files:
            if int(p.name) >= start:
                p.unlink()
        return start
    # Cut short in the middle of a record of the last data file (what a torn tail looks like too).
    inside = [s for s in sent if s[3] >= start]
    victim = inside[len(inside) // 2]
    with open(last, "r+b") as f:
        f.truncate(victim[3] - start + victim[4] // 2)
    return victim[3]


@pytest.mark.parametrize("how", ["cut-mid-record", "last-file-removed"])
def test_a_cut_commitlog_trims_the_queues_and_new_records_get_the_freed_offsets(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path / "s")
    with WritableStore(config, clock=lambda: 1_000_000) as store:
        first = _send(store, [f"old-{i}" for i in range(300)], 0)
    assert len(os.listdir(config.store_path_commit_log)) >= 4
    end = _cut(config, how, first)
    survivors = [s for s in first if s[3] + s[4] <= end]
    assert 0 < len(survivors) < len(first)

    # The broker's rule: each queue keeps its entries below the end, in the order they were sent.
    expected: dict[tuple[str, int], list[str]] = defaultdict(list)
    for topic, queue_id, key, _off, _size in survivors:
        expected[(topic, queue_id)].append(key)
    next_offsets = {q: len(keys) for q, keys in expected.items()}

    caplog.set_level(logging.WARNING)
    with WritableStore(config, clock=lambda: 2_000_000) as store:
        trims = [r for r in caplog.records if "truncateDirtyLogicFiles" in r.getMessage()]
        assert len(trims) == 1, [r.getMessage() for r in caplog.records]
        assert f"ends at offset {end}" in trims[0].getMessage()
        again = []
        for i in range(40):
            topic, queue_id = _queue_of(i)
            (done,) = store.put([_record(topic, f"new-{i}", queue_id)])
            # The queue offset handed out continues from the last record that survived.
            assert done.queue_offset == len(expected[(topic, queue_id)]), (topic, queue_id, i)
            expected[(topic, queue_id)].append(f"new-{i}")
            again.append(done)
        assert again[0].offset == end  # written where the whole records end

    # Every queue entry points at the record it names: topic, queue, queue offset and key.
    with MessageStore.open(config) as reader:
        for (topic, queue_id), keys in sorted(expected.items()):
            assert reader.max_offset(topic, queue_id) == len(keys), (topic, queue_id)
            for queue_offset, key in enumerate(keys):
                result = reader.get_message(topic, queue_id, queue_offset, 1)
                assert result.message_count == 1, (topic, queue_id, queue_offset, result.status)
                msg = decode_message(result.buffers[0], read_body=True)
                assert (msg.topic, msg.queue_id, msg.queue_offset) == (topic, queue_id, queue_offset)
                assert msg.properties["KEYS"] == key
            # and the new ones are found by key too (the index side resumes at the cut).
            new_keys = [k for k in keys if k.startswith("new-")]
            for key in new_keys[:2]:
                found = reader.query_message(topic, key, 32, 0, 2**62, exact_key=True)
                assert len(found.buffers) == 1, (topic, key)
    assert set(next_offsets) <= set(expected)


def _entries(*offsets: int) -> bytes:
    # (offset, size 10, tagsCode 0); offset -1 stands for the broker's blank entry (0, MAX_INT, 0).
    return b"".join(entry_bytes(0, PRE_BLANK_SIZE, 0) if o == -1 else entry_bytes(o, 10, 0) for o in offsets)


@pytest.mark.parametrize(
    ("end", "kept_files", "kept_entries"),
    [
        # truncateDirtyLogicFiles, by hand: from the last file back, a file whose first entry points
        # at or past the end is deleted; in the first file that survives, entries are kept from its
        # start up to the first one at or past the end (blank entries point at 0: kept).
        (450, [0, 100], 6),
        (400, [0], 5),
        (150, [0], 3),
        (700, [0, 100], 8),  # nothing at or past the end: untouched
        (0, [], 0),  # no CommitLog left: every entry goes (the broker's destroyLogics)
    ],
)
def test_the_trim_follows_truncate_dirty_logic_files(
    tmp_path: Path, end: int, kept_files: list[int], kept_entries: int
) -> None:
    root = tmp_path / "consumequeue"
    queue = root / "T" / "0"
    queue.mkdir(parents=True)
    size = 5 * CQ_STORE_UNIT_SIZE
    (queue / f"{0:020d}").write_bytes(_entries(-1, -1, 100, 200, 300))
    (queue / f"{100:020d}").write_bytes(_entries(400, 500, 600).ljust(size, b"\0"))
    trim_queues_past(root, size, end)
    assert sorted(int(p.name) for p in queue.iterdir()) == kept_files
    reader = ConsumeQueue(root, "T", 0, size)
    try:
        assert reader.max_offset == kept_entries
    finally:
        reader.close()
    if kept_files[-1:] == [100]:
        data = (queue / f"{100:020d}").read_bytes()
        assert len(data) == size and not data[(kept_entries - 5) * CQ_STORE_UNIT_SIZE :].strip(b"\0")


_CRASHING_WRITER = """
import os, sys
from store.config.store_config import StoreConfig
from server.broker.writable_store import WritableStore
from store.write.writer import StoreRecord

config = StoreConfig.for_store(sys.argv[1], mapped_file_size_commit_log=65536, broker_ip1="127.0.0.1")
store = WritableStore(config, clock=lambda: 1_000_000)
store.put([StoreRecord("Plain", b"a", "KEYS\\x01k1\\x02", queue_id=1)])
store.put([StoreRecord("OnlyPrepared", b"p", "KEYS\\x01k2\\x02", sys_flag=0x4)])
store.put([StoreRecord("OnlyRolledBack", b"r", "KEYS\\x01k3\\x02", sys_flag=0xC)])
store.put([StoreRecord("Plain", b"b", "KEYS\\x01k4\\x02", queue_id=1)])
os._exit(9)  # killed: no close, no topic table written at close
"""


def test_a_topic_is_in_the_topic_table_from_its_first_record_whatever_the_record_is(tmp_path: Path) -> None:
    # The broker creates a topic's config when a SEND to it is checked (msgCheck ->
    # createTopicInSendMessageMethod) and persists it at once, so a topic whose records are all
    # prepared or rolled-back transactions (no consume queue entry) is listed, crash or not.
    root = tmp_path / "s"
    repo = REPO_ROOT
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITER, str(root)], cwd=repo, capture_output=True, check=False
    )
    assert done.returncode == 9, done.stderr.decode()
    topics_json = root / "config" / "topics.json"
    listed = set(TopicTable.load(topics_json).topics)
    assert {"Plain", "OnlyPrepared", "OnlyRolledBack"} <= listed
    # Reopened for writing after the crash (the queues hold Plain only) and closed: still listed.
    with WritableStore(_config(root), clock=lambda: 2_000_000):
        pass
    assert {"Plain", "OnlyPrepared", "OnlyRolledBack"} <= set(TopicTable.load(topics_json).topics)


def test_index_files_wholly_past_the_end_are_dropped_and_keys_resume_at_the_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Small IndexFiles (40 entries, two keys a message): the newest ones index only the last
    # CommitLog file. Removing that file used to make the write path refuse to open (the index
    # builder takes a newest file none of whose entries points at a record for another store's).
    config = StoreConfig.for_store(
        tmp_path / "s",
        mapped_file_size_commit_log=FILE_SIZE,
        broker_ip1="127.0.0.1",
        max_index_num=40,
        max_hash_slot_num=16,
    )
    with WritableStore(config, clock=lambda: 1_000_000) as store:
        first = _send(store, [f"old-{i}" for i in range(300)], 0)
    end = _cut(config, "last-file-removed", first)
    caplog.set_level(logging.WARNING)
    with WritableStore(config, clock=lambda: 2_000_000) as store:
        assert sum("index file(s) point at" in r.getMessage() for r in caplog.records) == 1
        again = _send(store, [f"new-{i}" for i in range(30)], 0)
        assert again[0][3] == end
    with MessageStore.open(config) as reader:
        for topic, _queue_id, key, offset, size in first + again:
            found = reader.query_message(topic, key, 32, 0, 2**62, exact_key=True)
            gone = key.startswith("old-") and offset + size > end
            assert len(found.buffers) == (0 if gone else 1), key
