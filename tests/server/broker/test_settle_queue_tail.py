"""A SEND's settle refreshes the queue it wrote from what its own builder wrote.

``QueueTable.refresh_some`` (a put's refresh of the queues the builder wrote) takes the builder's
appends to a queue's last file as written (``ConsumeQueue.refresh_written``: one ``fstat``, the new
entries checked) instead of listing the queue's directory, within ``FULL_LOOK_EVERY`` of the queue's
last full refresh; a new file at the queue's file boundary, and a file overwritten under the server,
are refreshed in full. Every message is pullable right after its put returns.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from protocol.message import decode_message
from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.consumequeue import queue_table
from store.consumequeue.consume_queue import ConsumeQueue, entry_bytes
from store.message_store import MessageStore
from store.write.writer import StoreRecord

PER_FILE = 8


def _open(root: Path) -> WritableStore:
    config = StoreConfig.for_store(root, mapped_file_size_consume_queue=PER_FILE * 20)
    store = WritableStore(config, clock=itertools.count(1_700_000_000_000, 3).__next__)
    store.set_store_address("127.0.0.1", 10911)
    store.create_topic("T", 2)
    return store


def _record(i: int, queue_id: int = 0) -> StoreRecord:
    return StoreRecord("T", b"body-%d" % i, f"UNIQ_KEY\x01U{i:031d}\x02WAIT\x01true", queue_id=queue_id)


def _pulled(store: WritableStore, offset: int) -> bytes:
    result = store.reader.get_message("T", 0, offset, 1)
    assert result.message_count == 1, (offset, result.status)
    return decode_message(result.buffers[0]).body


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(the queue's max offset before, whether the shortcut took it) per call of the shortcut."""
    calls: list[tuple[int, bool]] = []
    real = ConsumeQueue.refresh_written

    def counted(self: ConsumeQueue, start: int, wrote: int, fd: int) -> bool:
        before = self.max_offset
        calls.append((before, real(self, start, wrote, fd)))
        return calls[-1][1]

    monkeypatch.setattr(ConsumeQueue, "refresh_written", counted)
    return calls


def test_every_put_is_pullable_and_most_take_the_written_tail(
    tmp_path: Path, taken: list[tuple[int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_table, "FULL_LOOK_EVERY", 60.0)  # a slow host: every put may ask
    n = 3 * PER_FILE + 3
    with _open(tmp_path / "s") as store:
        _pulled_before = store.reader.get_message("T", 0, 0, 1)  # opens the queue (a reader's)
        assert _pulled_before.message_count == 0
        for i in range(n):
            (appended,) = store.put([_record(i)])
            assert appended.queue_offset == i
            assert _pulled(store, i) == b"body-%d" % i
        queue = store.reader.queues.get("T", 0)
        starts = queue.file_starts
        assert (queue.min_offset, queue.max_offset, starts) == (0, n, [k * PER_FILE * 20 for k in range(4)])
    # the first put made the queue (no reader had it open; the pull after it opened the queue, a
    # full look); every later put took the shortcut but those that started a new file (their
    # entry at a file's start): the builder's file is not the last one the queue maps
    assert [before for before, ok in taken if not ok] == [PER_FILE, 2 * PER_FILE, 3 * PER_FILE], str(taken)
    assert len(taken) == n - 1, str(taken)
    # the read side after the run is what a fresh open of the store finds
    with MessageStore(_open_config(tmp_path / "s")) as fresh:
        again = fresh.queues.get("T", 0)
        assert (again.min_offset, again.max_offset, again.file_starts) == (0, n, starts)


def _open_config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_consume_queue=PER_FILE * 20)


def test_the_first_put_after_a_read_opened_the_queue_takes_the_written_tail(
    tmp_path: Path, taken: list[tuple[int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a queue lists and maps its files: that is the full look the shortcut needs, so the
    first put after the open does not list the directory again (with many queues each opened by a
    pull and then sent to, every such first put paid a second full refresh)."""
    monkeypatch.setattr(queue_table, "FULL_LOOK_EVERY", 60.0)  # a slow host: the put may ask
    with _open(tmp_path / "s") as store:
        store.put([_record(0)])
    with _open(tmp_path / "s") as store:
        assert ("T", 0) not in store.reader.queues.opened()
        assert _pulled(store, 0) == b"body-0"  # a pull opens the queue
        taken.clear()
        store.put([_record(1)])
        assert taken == [(1, True)]
        assert _pulled(store, 1) == b"body-1"


def test_past_the_age_of_the_last_full_refresh_a_put_refreshes_in_full(
    tmp_path: Path, taken: list[tuple[int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_table, "FULL_LOOK_EVERY", 0.0)
    with _open(tmp_path / "s") as store:
        store.reader.get_message("T", 0, 0, 1)
        for i in range(PER_FILE + 2):
            store.put([_record(i)])
            assert _pulled(store, i) == b"body-%d" % i
    assert taken == []


def test_a_file_overwritten_under_the_server_is_caught_by_the_next_put(
    tmp_path: Path, taken: list[tuple[int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_table, "FULL_LOOK_EVERY", 60.0)  # the shortcut is asked
    root = tmp_path / "s"
    with _open(root) as store:
        for i in range(3):
            store.put([_record(i)])
            assert _pulled(store, i) == b"body-%d" % i
        queue = store.reader.queues.get("T", 0)
        assert queue.failed_checks == 0
        # other bytes over the first entry of the file the builder writes (same inode and size),
        # written until the file's mtime is not the one the last refresh saw (the full refresh
        # looks at a file's entries when its mtime moved; timestamps tick every few ms)
        path = root / "consumequeue" / "T" / "0" / f"{0:020d}"
        fd = os.open(path, os.O_WRONLY)
        try:
            for _ in range(200):
                os.pwrite(fd, entry_bytes(0, 99, 7), 0)
                if os.fstat(fd).st_mtime_ns // 1_000_000 != queue._files[-1].mtime_ms:
                    break
                time.sleep(0.002)
        finally:
            os.close(fd)
        taken.clear()
        store.put([_record(3)])
        # the shortcut refused it; the full refresh saw the overwrite (had the shortcut taken the
        # put, the file's new mtime would hide the overwrite from every later full refresh)
        assert taken == [(3, False)]
        assert queue.failed_checks == 1
