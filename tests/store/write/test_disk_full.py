"""A full disk while appending (issue 18, item 2): nothing torn left behind, nothing acknowledged lost.

A full disk shows as a short ``pwrite`` (what fitted) and then ENOSPC. The writer used to ignore the
count: the record was torn, the SEND answered SEND_OK, and every later record went after the tear (a
gap for fsck; the broker's recovery truncates there and loses them all). Here the disk is made full
for CommitLog writes only, by a ``pwrite`` that takes part of what it is given and then refuses.
"""

from __future__ import annotations

import errno
import os
import subprocess
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
from store.message_store import MessageStore
from store.write.writer import CommitLogFullError, StoreWriter
from tests.support.harness import RawClient

_REAL_PWRITE = os.pwrite


class _Disk:
    """CommitLog writes through ``os.pwrite``: ``room`` bytes more may be written (None: no limit);
    once they are used up a write is short, then ENOSPC, as the kernel answers on a full disk. Bytes
    already written can be written again (their pages are allocated), unless ``rewrite_fails``."""

    def __init__(self) -> None:
        self.room: int | None = None
        self.rewrite_fails = False
        self._written: list[tuple[str, int, int]] = []

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if self.room is None or "/commitlog/" not in path:
            return _REAL_PWRITE(fd, data, offset)
        end = offset + len(data)
        if not self.rewrite_fails and any(
            p == path and lo <= offset and end <= hi for p, lo, hi in self._written
        ):
            return _REAL_PWRITE(fd, data, offset)
        if self.room == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = _REAL_PWRITE(fd, bytes(data)[: self.room], offset)
        self.room -= n
        self._written.append((path, offset, offset + n))
        return n


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Disk]:
    fake = _Disk()
    monkeypatch.setattr(os, "pwrite", fake.pwrite)
    yield fake


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1")


def _records(config: StoreConfig) -> list[tuple[int, bytes]]:
    with StoreWriter(config, index=False, scan_queues=False) as writer:
        return [(offset, bytes(buf)) for offset, buf in writer.commitlog.iter_records()]


def test_a_short_write_is_undone_refused_and_writing_resumes_where_it_stopped(tmp_path: Path, disk) -> None:
    config = _config(tmp_path / "s")
    path = config.store_path_commit_log / f"{0:020d}"
    with StoreWriter(config, clock=lambda: 5) as writer:
        first = writer.append("T", b"a" * 500, keys="k-0")
        disk.room = 300  # the next record (~600 bytes) gets 300 of them written, then ENOSPC
        with pytest.raises(CommitLogFullError):
            writer.append("T", b"b" * 500, keys="k-lost")
        end = first.offset + first.size
        assert writer.position == end
        assert path.read_bytes()[end : end + 1000] == bytes(1000), "the torn part must be zeroed again"
        with pytest.raises(CommitLogFullError):  # still full: refused, nothing written
            writer.append("T", b"c" * 500, keys="k-lost-2")
        disk.room = None  # space returns
        second = writer.append("T", b"d" * 500, keys="k-1")
        assert second.offset == end, "the next record goes right after the last whole one"
        assert second.queue_offset == 1, "a refused record takes no queue offset"
    found = _records(config)
    assert [o for o, _ in found] == [first.offset, second.offset]
    assert [decode_message(buf).body for _, buf in found] == [b"a" * 500, b"d" * 500]


def test_a_torn_write_that_cannot_be_undone_yet_is_undone_before_the_next_record(
    tmp_path: Path, disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zeroing itself refused (``rewrite_fails``): the torn bytes
    stay until space returns, and are zeroed before the next record, which is shorter than them."""
    config = _config(tmp_path / "s")
    path = config.store_path_commit_log / f"{0:020d}"
    with StoreWriter(config, clock=lambda: 5) as writer:
        first = writer.append("T", b"a" * 100, keys="k-0")
        end = first.offset + first.size
        disk.room = 900
        disk.rewrite_fails = True
        with pytest.raises(CommitLogFullError):
            writer.append("T", b"b" * 2000, keys="k-lost")
        assert path.read_bytes()[end : end + 900] != bytes(900), "(the fake left the tear in place)"
        disk.room = None
        second = writer.append("T", b"d", keys="k-1")
        assert second.offset == end
        tail = path.read_bytes()[second.offset + second.size : end + 2100]
        assert tail == bytes(len(tail)), "what is left of the tear after the new record must be zeros"
    assert [decode_message(buf).body for _, buf in _records(config)] == [b"a" * 100, b"d"]


async def test_a_send_on_a_full_disk_is_service_not_available_and_the_next_lands_after_the_last_record(
    tmp_path: Path, disk
) -> None:
    config = _config(tmp_path / "s")
    store = WritableStore(config)
    store.create_topic("T", 1)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    client = await RawClient.connect("127.0.0.1", srv.port)

    def send(body: bytes, key: str):
        fields = {
            "a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
            "i": f"KEYS\x01{key}\x02WAIT\x01true", "j": "0", "k": "false", "m": "false",
        }  # fmt: skip
        return client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, body))

    try:
        ok = await send(b"a" * 500, "k-0")
        assert ok.code == ResponseCode.SUCCESS
        disk.room = 200
        full = await send(b"b" * 500, "k-lost")
        assert full.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert full.remark.startswith(
            "service not available now. It may be caused by one of the following reasons: "
            "the broker's disk is full [CL: "
        )
        assert full.remark.endswith(
            "], messages are put to the slave, message store has been shut down, etc."
        )
        disk.room = None
        after = await send(b"c" * 500, "k-1")
        assert after.code == ResponseCode.SUCCESS and after.ext_fields["queueOffset"] == "1"
        hits = store.reader.query_message("T", "k-1", 32, 0, 2**63 - 1).buffers
        assert [decode_message(h).body for h in hits] == [b"c" * 500]
    finally:
        await client.close()
        await srv.stop()
        store.close()
    assert [decode_message(buf).body for _, buf in _records(config)] == [b"a" * 500, b"c" * 500]


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, timeout=30
    )
    return done.returncode == 0


@pytest.mark.parametrize("index", [False, True], ids=["index-off", "index-on"])
def test_a_real_full_disk_loses_no_acknowledged_record(tmp_path: Path, index: bool) -> None:
    """The store on a 256 KiB tmpfs filled up by another file: records are put until the disk
    refuses one, then the file is removed and more are put. Every acknowledged record is in the
    CommitLog and its queue, in order, with nothing between them; nothing refused is; fsck is clean.
    With the index on (small IndexFiles: 64 slots, 1024 entries; 151 keys a record, so the entries
    of the records put on the full disk go to pages never written before), every acknowledged record
    is also found by key (IndexFiles are written through maps; their blocks are reserved before they are
    written, else the full disk answered that write with SIGBUS)."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "256k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        config = StoreConfig.for_store(
            mnt / "store",
            mapped_file_size_commit_log=64 * 1024,
            broker_ip1="127.0.0.1",
            message_index_enable=index,
            max_hash_slot_num=64,
            max_index_num=1024,
        )
        acked: list[bytes] = []
        refused: list[str] = []
        with WritableStore(config, clock=lambda: 1_000) as store:
            store.create_topic("T", 1)

            def put(body: bytes) -> bool:
                try:
                    keys = " ".join([f"k{len(acked)}"] + [f"x{len(acked)}-{j}" for j in range(150)])
                    store.put([single_record(_header(keys if index else None), body, _CTX)])
                except StoreUnavailable as exc:
                    refused.append(exc.remark)
                    return False
                acked.append(body)
                return True

            assert put(b"first")
            filler = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                while os.write(filler, bytes(4096)) == 4096:
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(filler)
            for i in range(100):
                if not put(f"{i:03d}".encode() * 300):  # 900-byte bodies: a page fills in ~4 records
                    break
            assert refused, "the disk never filled"
            assert not put(b"s" * 9000), "still full: a record needing new pages is refused again"
            (mnt / "filler").unlink()
            for i in range(5):
                assert put(f"after {i}".encode())
        with MessageStore.open(config) as reopened:
            stored = [decode_message(buf).body for _, buf in reopened.commitlog.iter_records()]
            queued = [decode_message(buf).body for buf in reopened.get_message("T", 0, 0, 1000).buffers]
            if index:
                for n, body in enumerate(acked):
                    hits = reopened.query_message("T", f"k{n}", 32, 0, 2**63 - 1).buffers
                    assert [decode_message(h).body for h in hits] == [body]
        assert stored == acked and queued == acked
        assert check_store(config).problems == []
        assert refused[0].startswith("service not available now. It may be caused by one of the following")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


_CTX = PutContext("DefaultCluster", 4 * 1024 * 1024, "127.0.0.1", 9)


def _header(key: str | None = None) -> SendMessageRequestHeader:
    props = "WAIT\x01true" if key is None else f"KEYS\x01{key}\x02WAIT\x01true"
    return SendMessageRequestHeader("g", "T", "TBW102", 4, 0, 0, 0, 0, props)
