"""When the write path stops taking messages (issue 18, gaps items 2 and 3), and what it keeps.

Item 2: a consume-queue write that fails after the CommitLog append. The record is stored, so it is
acknowledged (the broker answers a SEND after its CommitLog put; its reput writes the queue later);
the queue never gets a torn entry nor skips the record (which would shift every later entry); later
puts are refused SERVICE_NOT_AVAILABLE (the broker's answer once its ``RunningFlags`` say not
writeable) until the missing entries are written from the CommitLog, when space returns or at the
next start. Before: the put raised the ``OSError`` (a SEND answered failed although its record was
stored), the reput went past the record, and the next entry was written in its place.

Item 3: the broker's disk-ratio refusal (``CleanCommitLogService.isSpaceFull`` every 10 s: used above
``diskSpaceWarningLevelRatio`` 0.90 sets the disk-full bit): measured periodically, not per SEND.
The ratio is injected (``DiskSpaceCheck``'s ``used_ratio``) and so is the clock.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_message
from protocol.send_message import SendMessageRequestHeader
from server.app import QueryServer, ServerSettings
from server.broker.put_message import PutContext, StoreUnavailable, single_record
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.check.store_check import check_store
from store.config.store_config import StoreConfig
from store.consumequeue import builder as builder_module
from store.consumequeue import consume_queue_build
from store.write.disk_space import DiskSpaceCheck
from tests.support.harness import RawClient

_REAL_PWRITE = os.pwrite
_CTX = PutContext("DefaultCluster", 4 * 1024 * 1024, "127.0.0.1", 9)
_UNAVAILABLE = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk is "
    "full [CL: {0} CQ: {0} INDEX: {0}], messages are put to the slave, message store has been shut down, etc."
)


class _QueueDisk:
    """Consume-queue writes through ``os.pwrite``: ``room`` bytes more may be written (None: no
    limit); once used up a write is short, then ENOSPC, as on a full disk. Bytes written since can be
    written again (their blocks exist). CommitLog and other writes are untouched: the disk fills
    between the CommitLog append and its queue entry. The compiled consume-queue writes
    (``append_entries``, which does not call ``os.pwrite``) draw from the same room through its
    test fault (``_set_fault``)."""

    def __init__(self) -> None:
        self._room: int | None = None
        self._written: list[tuple[str, int, int]] = []
        self.fast = consume_queue_build._fast if builder_module.append_entries is not None else None

    @property
    def room(self) -> int | None:
        if self._room is not None and self.fast is not None:
            self._room = self.fast._set_fault(self._room, False)  # what the compiled writes left
            self.fast._set_fault(self._room, False)
        return self._room

    @room.setter
    def room(self, room: int | None) -> None:
        self._room = room
        if self.fast is not None:
            self.fast._set_fault(-1 if room is None else room, False)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        path = os.readlink(f"/proc/self/fd/{fd}")
        room = self.room
        if room is None or "/consumequeue/" not in path:
            return _REAL_PWRITE(fd, data, offset)
        end = offset + len(data)
        if any(p == path and lo <= offset and end <= hi for p, lo, hi in self._written):
            return _REAL_PWRITE(fd, data, offset)
        if room == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = _REAL_PWRITE(fd, bytes(data)[:room], offset)
        self.room = room - n
        self._written.append((path, offset, offset + n))
        return n


@pytest.fixture
def queue_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[_QueueDisk]:
    fake = _QueueDisk()
    monkeypatch.setattr(os, "pwrite", fake.pwrite)
    yield fake
    fake.room = None


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=1024,
        broker_ip1="127.0.0.1",
    )


def _record(body: bytes, key: str):
    header = SendMessageRequestHeader("g", "T", "TBW102", 4, 0, 0, 0, 0, f"KEYS\x01{key}\x02WAIT\x01true")
    return single_record(header, body, _CTX)


def _queue_file(config: StoreConfig) -> bytes:
    return (config.consume_queue_dir / "T" / "0" / f"{0:020d}").read_bytes()


def _bodies(store: WritableStore) -> list[bytes]:
    return [decode_message(b).body for b in store.reader.get_message("T", 0, 0, 100).buffers]


def test_a_queue_write_failure_acknowledges_the_record_refuses_later_puts_and_repairs_when_space_returns(
    tmp_path: Path, queue_disk: _QueueDisk, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path / "s")
    with WritableStore(config) as store:
        store.create_topic("T", 1)
        (first,) = store.put([_record(b"r0", "k0")])
        queue_disk.room = 8  # the next entry gets 8 of its 20 bytes written, then ENOSPC
        with caplog.at_level(logging.ERROR):
            (stored,) = store.put([_record(b"r1", "k1")])  # acknowledged: it is in the CommitLog
        assert stored.queue_offset == 1
        assert store.reader.commitlog.read_record(stored.offset) is not None
        assert _queue_file(config)[20:40] == bytes(20), "no torn entry left in the queue"
        assert store.reader.max_offset("T", 0) == 1
        for _ in range(3):
            with pytest.raises(StoreUnavailable) as refused:
                store.put([_record(b"lost", "k-lost")])
            assert refused.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert refused.value.remark.startswith("service not available now. It may be caused by")
        assert len([r for r in caplog.records if "stops taking messages" in r.getMessage()]) == 1
        queue_disk.room = None  # space returns
        (after,) = store.put([_record(b"r2", "k2")])
        assert after.queue_offset == 2, "the refused puts took no queue offset"
        assert _bodies(store) == [b"r0", b"r1", b"r2"], "r1 written from the CommitLog, nothing shifted"
        assert [q.queue_offset for q in (first, stored, after)] == [0, 1, 2]
        hits = store.reader.query_message("T", "k1", 32, 0, 2**63 - 1).buffers
        assert [decode_message(h).body for h in hits] == [b"r1"]
    assert check_store(config).problems == []


def test_the_missing_entries_are_written_at_the_next_start_even_if_the_disk_is_still_full_then(
    tmp_path: Path, queue_disk: _QueueDisk
) -> None:
    config = _config(tmp_path / "s")
    with WritableStore(config) as store:
        store.create_topic("T", 1)
        store.put([_record(b"r0", "k0")])
        queue_disk.room = 0
        store.put([_record(b"r1", "k1")])
    # Reopened on a disk still full: it opens (serving what is built) and refuses puts.
    with WritableStore(config) as store:
        assert store.reader.max_offset("T", 0) == 1
        with pytest.raises(StoreUnavailable):
            store.put([_record(b"lost", "k-lost")])
    queue_disk.room = None
    # Reopened with room: the open's reput writes r1's entry before anything else is put.
    with WritableStore(config) as store:
        assert _bodies(store) == [b"r0", b"r1"]
        (after,) = store.put([_record(b"r2", "k2")])
        assert after.queue_offset == 2
        assert _bodies(store) == [b"r0", b"r1", b"r2"]
    assert check_store(config).problems == []


class _Ratio:
    """The injected ``disk_used_ratio``: one value for every path, each call counted by path."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.calls: list[str] = []

    def __call__(self, path: str | os.PathLike[str]) -> float:
        self.calls.append(str(path))
        return self.value


def test_a_disk_fuller_than_the_warning_ratio_refuses_puts_checked_every_ten_seconds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path / "s")
    ratio = _Ratio(0.50)
    now = [100.0]
    check = DiskSpaceCheck(config.store_path_commit_log, used_ratio=ratio, monotonic=lambda: now[0])
    commitlog = str(config.store_path_commit_log)
    with WritableStore(config, disk_check=check) as store:
        store.create_topic("T", 1)
        for i in range(50):
            store.put([_record(b"m", f"k{i}")])
        assert ratio.calls.count(commitlog) == 1, "measured once, not per put"
        ratio.value = 0.91
        now[0] += 9.9
        store.put([_record(b"m", "k-still-taken")])  # not measured again yet
        assert ratio.calls.count(commitlog) == 1
        now[0] += 0.1
        with caplog.at_level(logging.ERROR):
            for _ in range(5):
                with pytest.raises(StoreUnavailable) as refused:
                    store.put([_record(b"m", "k-refused")])
                assert refused.value.code == ResponseCode.SERVICE_NOT_AVAILABLE == 14
                assert refused.value.remark == _UNAVAILABLE.format(" 0.91")
        assert len([r for r in caplog.records if "marked full" in r.getMessage()]) == 1
        ratio.value = 0.90  # at the ratio is not above it: taken again at the next measure
        with pytest.raises(StoreUnavailable):
            store.put([_record(b"m", "k-refused-until-measured")])
        now[0] += 10.0
        (again,) = store.put([_record(b"m", "k-again")])
        assert again.queue_offset == 51, "the refused puts took no queue offset"
        assert store.reader.max_offset("T", 0) == 52


async def test_a_send_on_a_disk_over_the_ratio_is_service_not_available_with_the_disk_in_the_remark(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path / "s")
    ratio = _Ratio(0.95)
    store = WritableStore(config, disk_check=DiskSpaceCheck(config.store_path_commit_log, used_ratio=ratio))
    store.create_topic("T", 1)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    client = await RawClient.connect("127.0.0.1", srv.port)
    fields = {
        "a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
        "i": "KEYS\x01k\x02WAIT\x01true", "j": "0", "k": "false", "m": "false",
    }  # fmt: skip
    try:
        answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, b"body"))
        assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert answer.remark == _UNAVAILABLE.format(" 0.95")
        assert store.reader.commitlog.max_offset == 0, "nothing stored"
    finally:
        await client.close()
        await srv.stop()
        store.close()
