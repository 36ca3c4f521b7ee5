"""Reading ConsumeQueues of other shapes than the Java golden store: several files per queue, a live
store growing under the reader, zero and torn tails, tag filters, batch limits, gone records, file
choice by mtime. Stores are written by ``StoreWriter`` with known offsets and times; the expected
answers follow from the broker's rules (``store.consumequeue.get_message``'s docstring), not from the
reader."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import ConsumeQueue, tags_code
from store.message_store import GetMessageStatus, MessageStore
from store.write.writer import StoreWriter

T0 = 1_800_000_000_000


def _config(root: Path, **kw: object) -> StoreConfig:
    values: dict[str, object] = {
        "mapped_file_size_commit_log": 1 << 20,
        "mapped_file_size_consume_queue": 200,  # 10 entries a file
        "max_hash_slot_num": 64,
        "max_index_num": 256,
    }
    values.update(kw)
    return StoreConfig.for_store(root, **values)


def _write(config: StoreConfig, n: int, *, topic: str = "T", start: int = 0, **kw: object) -> list:
    with StoreWriter(config) as w:
        return [
            w.append(topic, b"m%d" % i, store_timestamp=T0 + 10 * i, unique_key=False, **kw)  # type: ignore[arg-type]
            for i in range(start, start + n)
        ]


def test_several_files_and_a_live_tail(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    first = _write(config, 25)
    qdir = config.consume_queue_dir / "T" / "0"
    assert sorted(os.listdir(qdir)) == [f"{s:020d}" for s in (0, 200, 400)]
    with MessageStore.open(config) as store:
        assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (0, 25)
        more = _write(config, 12, start=25)  # another writer appends while the store is open
        assert store.max_offset("T", 0) == 25, "nothing new until refresh"
        store.refresh()
        assert store.max_offset("T", 0) == 37
        queue = store.queues.get("T", 0)
        assert [e.commit_log_offset for e in queue.entries(0, 100)] == [a.offset for a in first + more]
        assert store.offset_by_time("T", 0, T0 + 10 * 36) == 36
        assert store.message_store_timestamp("T", 0, 36) == T0 + 360
        # One pull reads within one file.
        result = store.get_message("T", 0, 7, 32)
        assert (result.status, result.next_begin_offset, result.message_count) == (
            GetMessageStatus.FOUND,
            10,
            3,
        )


def test_zero_and_torn_tails_end_the_queue(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    _write(config, 4)
    path = config.consume_queue_dir / "T" / "0" / ("0" * 20)
    data = bytearray(path.read_bytes())
    # A torn fifth entry: its CommitLog offset written, its size not yet.
    data[80:88] = struct.pack(">q", 999)
    path.write_bytes(bytes(data))
    queue = ConsumeQueue(config.consume_queue_dir, "T", 0, 200)
    assert queue.max_offset == 4 and queue.entry(4) is None
    data[88:92] = struct.pack(">i", 50)  # the size lands: the entry is whole now
    path.write_bytes(bytes(data))
    queue.refresh()
    assert queue.max_offset == 5
    queue.close()


def test_tag_filter_by_tags_code(tmp_path: Path) -> None:
    config = _config(tmp_path / "s", mapped_file_size_consume_queue=6000)
    with StoreWriter(config) as w:
        for i in range(12):
            w.append("T", b"x", tags="A" if i % 3 == 0 else "B", unique_key=False, store_timestamp=T0 + i)
    with MessageStore.open(config) as store:
        a = frozenset({tags_code("A")})
        result = store.get_message("T", 0, 1, 32, a)
        assert result.status is GetMessageStatus.FOUND
        assert [int.from_bytes(b[20:28], "big") for b in result.buffers] == [3, 6, 9]
        assert result.next_begin_offset == 12, "every entry up to the end of the file was scanned"
        result = store.get_message("T", 0, 10, 32, a)
        assert (result.status, result.next_begin_offset, result.buffers) == (
            GetMessageStatus.NO_MATCHED_MESSAGE,
            12,
            [],
        )
        assert store.get_message("T", 0, 0, 2, frozenset({tags_code("B")})).next_begin_offset == 3


def test_batch_byte_limit_and_max_msg_nums(tmp_path: Path) -> None:
    config = _config(tmp_path / "s", mapped_file_size_consume_queue=6000, mapped_file_size_commit_log=4 << 20)
    with StoreWriter(config) as w:
        sizes = [w.append("T", bytes(100_000), unique_key=False).size for _ in range(4)]
    with MessageStore.open(config) as store:
        result = store.get_message("T", 0, 0, 32)
        # 256 KiB counted before adding the next message: 2 fit, the third would pass it.
        assert sum(sizes[:2]) <= 262144 < sum(sizes[:3])
        assert (result.message_count, result.next_begin_offset) == (2, 2)
        assert store.get_message("T", 0, 0, 1).next_begin_offset == 1
    small = _config(tmp_path / "t", max_transfer_bytes_on_message_in_memory=10)
    with StoreWriter(small) as w:
        w.append("T", bytes(1000), unique_key=False)
        w.append("T", bytes(1000), unique_key=False)
    with MessageStore.open(small) as store:
        assert store.get_message("T", 0, 0, 32).message_count == 1, "the first message always fits"


def test_gone_records_and_unreadable_offsets(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    _write(config, 5)
    path = config.consume_queue_dir / "T" / "0" / ("0" * 20)
    data = bytearray(path.read_bytes())
    data[8:12] = struct.pack(">i", 1 << 30)  # entry 0's size runs past the CommitLog's end
    path.write_bytes(bytes(data))
    with MessageStore.open(config) as store:
        # maxMsgNums bounds messages, not entries scanned: the gone record's CommitLog file is skipped
        # to its end (the broker jumps to the next file), so every later entry in it is passed over.
        for max_msg_nums in (1, 32):
            result = store.get_message("T", 0, 0, max_msg_nums)
            assert (result.status, result.next_begin_offset, result.message_count) == (
                GetMessageStatus.MESSAGE_WAS_REMOVING,
                5,
                0,
            )
        result = store.get_message("T", 0, 1, 32)
        assert (result.status, result.message_count) == (GetMessageStatus.FOUND, 4)
    # The queue's first file was deleted (the broker's clean-up): the min offset is the next file's
    # first entry (correctMinOffset); below it a pull is OFFSET_TOO_SMALL.
    other = _config(tmp_path / "o")
    _write(other, 25)
    qdir = other.consume_queue_dir / "T" / "0"
    os.unlink(qdir / ("0" * 20))
    with MessageStore.open(other) as store:
        assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (10, 25)
        result = store.get_message("T", 0, 3, 32)
        assert (result.status, result.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, 10)
    # A hole between files: offsets in it have no file (OFFSET_FOUND_NULL, next: the next file's start).
    holed = _config(tmp_path / "h")
    _write(holed, 25)
    os.unlink(holed.consume_queue_dir / "T" / "0" / f"{200:020d}")
    with MessageStore.open(holed) as store:
        assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (0, 25)
        result = store.get_message("T", 0, 12, 32)
        assert (result.status, result.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 20)
        assert store.get_message("T", 0, 20, 32).message_count == 5


def test_offset_by_time_picks_the_file_by_mtime(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    _write(config, 30)  # times T0, T0+10, ..., T0+290; files of entries 0-9, 10-19, 20-29
    qdir = config.consume_queue_dir / "T" / "0"
    for n, name in enumerate(sorted(os.listdir(qdir))):
        mtime = (T0 + 100 * n + 95) / 1000  # each file "last modified" just after its last entry
        os.utime(qdir / name, (mtime, mtime))
    with MessageStore.open(config) as store:
        assert store.offset_by_time("T", 0, T0 + 50) == 5
        assert store.offset_by_time("T", 0, T0 + 150) == 15
        assert store.offset_by_time("T", 0, T0 + 250) == 25
        assert store.offset_by_time("T", 0, T0 + 10**6) == 29
        # A file modified later than its entries (touched) is picked for earlier times: the broker
        # then searches only that file and answers its nearest entry.
        late = (T0 + 10**6) / 1000
        os.utime(qdir / f"{0:020d}", (late, late))
        store.refresh()
        assert store.offset_by_time("T", 0, T0 + 150) == 9


def test_queue_counts_from_topics_json_else_directories(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    _write(config, 3, queue_id=5)
    topics = config.store_path_root_dir / "config" / "topics.json"
    doc = json.loads(topics.read_text("utf-8"))
    doc["topicConfigTable"]["T"].update(readQueueNums=7, writeQueueNums=6)
    topics.write_text(json.dumps(doc), "utf-8")
    (config.consume_queue_dir / "Other" / "2").mkdir(parents=True)
    with MessageStore.open(config) as store:
        nums = store.queue_nums()
        assert nums["T"] == 7 and nums["Other"] == 3
        assert [row[0] for row in store.topic_stats("T")] == list(range(6))
        assert store.topic_stats("T")[5][1:] == (0, 3, T0 + 20)
        assert store.topic_stats("Other") == [(0, 0, 0, 0), (1, 0, 0, 0), (2, 0, 0, 0)]


def test_store_wide_earliest_time_reads_two_max_message_sizes(tmp_path: Path) -> None:
    config = _config(tmp_path / "s", max_message_size=1000)
    assert sum(a.size for a in _write(config, 40)) > 2000
    with MessageStore.open(config) as store:
        assert store.store_earliest_message_time() == T0  # 2000 bytes readable in the first file
    with MessageStore.open(_config(tmp_path / "s", max_message_size=1 << 20)) as store:
        assert store.store_earliest_message_time() == -1  # 2 MiB do not fit a 1 MiB file


def test_the_first_message_time_reads_only_the_first_record(tmp_path: Path) -> None:
    """What ``/metrics``' earliest-message gauge shows where the broker's rule above gives -1."""
    empty = _config(tmp_path / "empty")
    empty.store_path_commit_log.mkdir(parents=True)
    with MessageStore.open(empty) as store:
        assert store.first_message_time() == -1
    config = _config(tmp_path / "s", max_message_size=1 << 20)
    _write(config, 3)
    with MessageStore.open(config) as store:
        assert store.store_earliest_message_time() == -1
        assert store.first_message_time() == T0
