"""What opening a store costs, in CommitLog bytes walked (``CommitLog.bytes_visited``), not time.

The broker opens a store without reading it through: its recovery walks the last files only, its
next queue offsets come from the consume queues (``recoverTopicQueueTable``) and its pending delayed
messages from the schedule topic's queues (``ScheduleMessageService``). The write path used to read
every record twice at open (the writer's queue offsets, then the scheduled messages): minutes for a
store of many GiB. Expected values here are counted from what the test sent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from protocol.send_message import SendMessageRequestHeader, client_properties
from server.broker.put_message import PutContext, single_record
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter

FILE_SIZE = 64 * 1024
BODY = b"x" * 700


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=FILE_SIZE, broker_ip1="127.0.0.1")


def _record(topic: str, key: str, queue_id: int, level: int = 0):
    header = SendMessageRequestHeader(
        "g", topic, "TBW102", 4, queue_id, 0, 5, 0, client_properties(key, None, None, f"U-{key}", level)
    )
    return single_record(header, BODY, PutContext("DefaultCluster", 4096, "127.0.0.1", 9))


def _fill(config: StoreConfig, n: int, now: list[int]) -> Counter:
    """``n`` messages over two topics and four queues, a delayed one at the start (level 3, 10 s) and
    one at the end (level 1, 1 s); returns how many each (topic, queue) got."""
    sent: Counter = Counter()
    with WritableStore(config, clock=lambda: now[0]) as store:
        store.put([_record("T", "delayed-early", 0, level=3)])
        for i in range(n):
            topic, queue_id = ("A", i % 4) if i % 3 else ("B", i % 2)
            store.put([_record(topic, f"k-{i}", queue_id)])
            sent[(topic, queue_id)] += 1
        store.put([_record("T", "delayed-late", 1, level=1)])
    return sent


def _data_files(config: StoreConfig) -> int:
    return sum(1 for p in config.store_path_commit_log.iterdir() if p.read_bytes()[:8] != bytes(8))


def test_the_write_path_opens_without_reading_the_commitlog_through(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    now = [1_000_000]
    sent = _fill(config, 600, now)
    assert _data_files(config) >= 8
    now[0] += 500  # neither delivery is due yet
    with WritableStore(config, clock=lambda: now[0]) as store:
        views = {id(c): c for c in (store.writer.commitlog, store.reader.commitlog)}.values()
        walked = sum(c.bytes_visited for c in views)
        # The last data file walked once to find the end (plus an 8-byte look at the end by each
        # reader that resumes there), where reading it through is nine files, twice.
        assert walked <= FILE_SIZE + 4 * 8, walked
        # The same answers as a full read: queue offsets continue where each queue ended ...
        for (topic, queue_id), count in sorted(sent.items()):
            (done,) = store.put([_record(topic, f"next-{topic}-{queue_id}", queue_id)])
            assert done.queue_offset == count, (topic, queue_id)
        # ... and both delayed messages are pending again (level 1: 1 s, level 3: 10 s after sending).
        assert store.next_delivery() == 1_000_000 + 1_000
        now[0] = 1_000_000 + 20_000
        delivered = store.deliver_due()
        assert len(delivered) == 2 and {d.queue_offset for d in delivered} == {0}  # T/0 and T/1
        assert store.writer.topics >= {"A", "B", "T", "SCHEDULE_TOPIC_XXXX"}
    with WritableStore(config, clock=lambda: now[0]) as store:
        assert store.next_delivery() is None  # delivered once, not re-armed


def test_queue_offsets_of_records_the_queues_lack_are_read_from_the_commitlog(tmp_path: Path) -> None:
    """A store written without consume queues (or a crash before they were dispatched): the reader
    dispatches the backlog at open (the broker's reput does the same) and the writer goes on from it."""
    config = _config(tmp_path / "s")
    with StoreWriter(config, index=False, consume_queues=False, clock=lambda: 5) as writer:
        for i in range(90):
            writer.append("A", BODY, keys=f"k-{i}", queue_id=i % 3)
    with WritableStore(config, clock=lambda: 6) as store:
        (done,) = store.put([_record("A", "next", 2)])
        assert done.queue_offset == 30
        assert store.reader.max_offset("A", 2) == 31


def test_a_read_only_open_walks_only_the_last_data_file(tmp_path: Path) -> None:
    """A guard (this held before too): ``serve`` finds the CommitLog's end by walking the last file
    that holds data, from its start: the broker's normal recovery walks the last three."""
    config = _config(tmp_path / "s")
    _fill(config, 600, [1_000_000])
    with MessageStore.open(config) as store:
        last = store.commitlog.files[-1]
        walked_in_last = store.commitlog.max_offset - last.start
        assert store.commitlog.bytes_visited <= walked_in_last + 8
        assert store.commitlog.max_offset > 7 * FILE_SIZE
