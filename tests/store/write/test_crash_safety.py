"""The index and consume queue builders survive ``kill -9`` anywhere: after a restart their files
equal a clean build.

Real SIGKILLs of real ``rmq-query rebuild-index`` processes, at seeded random points: during a
one-shot rebuild of the Java store, and during ``--follow`` behind a CommitLog a writer keeps
appending to. After the last restart the index files must be byte-identical to a clean build
(file names aside: they are creation times), which rules out duplicate entries and lost keys, and
every key must be found exactly once. Also the broker's own crash: an ``abort`` marker with a
newest file whose tail a crash left torn is repaired, not destroyed as the broker does.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store.checkpoint import Checkpoint
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder, rebuild_consume_queues
from store.errors import IndexFileError
from store.index.builder import IndexBuilder, rebuild_index
from store.index.index_file import ENTRY, SLOT, IndexFile
from store.message_store import MessageStore
from store.write.writer import StoreWriter
from tests.support.index_writes import hook_compiled_writes
from tests.support.paths import REPO_ROOT as REPO

MAX = 2**63 - 1


def _cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def _index_bytes(index_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(index_dir.iterdir())]


def _cq_bytes(config: StoreConfig) -> dict[str, bytes]:
    root = config.consume_queue_dir
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _golden_copy(config: StoreConfig, root: Path) -> StoreConfig:
    shutil.copytree(config.store_path_root_dir, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    _write_conf(root, config)
    return StoreConfig.load(root / "broker.conf", overrides={"store_path_root_dir": root})


def _write_conf(root: Path, config: StoreConfig) -> None:
    (root / "broker.conf").write_text(
        f"mappedFileSizeCommitLog={config.mapped_file_size_commit_log}\n"
        f"maxHashSlotNum={config.max_hash_slot_num}\nmaxIndexNum={config.max_index_num}\n"
        f"mappedFileSizeConsumeQueue={config.mapped_file_size_consume_queue}\n",
        encoding="utf-8",
    )


def test_kill_9_during_rebuild(golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path) -> None:
    java, _ = golden_stores[0]
    config = _golden_copy(java, tmp_path / "s")
    root = config.store_path_root_dir
    rng = random.Random(20261121)
    landed = 0
    for _ in range(6):
        proc = _cli("rebuild-index", "--store", str(root))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if any(n.startswith(".index.tmp-") for n in os.listdir(root)):
                break
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.1))
        mid_build = any(n.startswith(".index.") for n in os.listdir(root))
        _kill(proc)
        landed += mid_build
        # Whatever the kill interrupted, the served index is the old one, whole.
        if (root / "index").exists():
            assert _index_bytes(root / "index") == _index_bytes(java.index_dir)
    # The window between the two renames: index/ moved aside, the new one not yet in place.
    (root / "index").rename(root / ".index.old-999999999-1")
    (root / ".index.tmp-999999998-1").mkdir()
    builder = rebuild_index(config)
    # A kill may also have landed in the consume queue rebuild that follows: the next one cleans up.
    rebuild_consume_queues(config)
    assert _cq_bytes(config) == _cq_bytes(java)
    assert builder.keys_indexed == 11650
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir)
    assert sorted(os.listdir(root)) == sorted([*os.listdir(java.store_path_root_dir), "broker.conf"])
    assert Checkpoint.read(config.checkpoint_path) == Checkpoint.read(java.checkpoint_path)
    assert landed >= 1, "at least one kill landed while a rebuild was under way"


def _live_config(root: Path) -> StoreConfig:
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=16384, max_hash_slot_num=16, max_index_num=60
    )
    root.mkdir(parents=True)
    _write_conf(root, config)
    return config


def _state_after_kill(config: StoreConfig) -> str:
    """What the kill left in the newest index file (for the record: which repairs were exercised)."""
    names = sorted(config.index_dir.iterdir()) if config.index_dir.exists() else []
    if not names:
        return "no index yet"
    if names[-1].stat().st_size == 0:
        return "0-byte file being created"
    f = IndexFile.open(names[-1], config.max_hash_slot_num, config.max_index_num)
    try:
        h = f.header
        count = max(h.index_count, 1)
        if count < f.index_num and any(f.entry(count)):
            return "torn put past indexCount"
        if count <= 1:
            return "fresh empty file"
        return "whole puts"
    finally:
        f.close()


def test_kill_9_during_live_indexing(tmp_path: Path) -> None:
    config = _live_config(tmp_path / "live")
    writer_config = StoreConfig.for_store(
        config.store_path_root_dir, mapped_file_size_commit_log=16384, message_index_enable=False
    )
    # The writer builds neither index nor consume queues: the killed rebuild-index --follow does both.
    writer = StoreWriter(writer_config, consume_queues=False)
    total = 900
    written: list[int] = []
    done = threading.Event()

    def write() -> None:
        try:
            for i in range(total):
                written.append(writer.append("Live", b"x" * (i % 200), keys=f"k{i} s{i % 7} t{i % 3}").offset)
                if i % 4 == 0:
                    time.sleep(0.01)  # ~2.5 s of writing: the kills land while records arrive
        finally:
            done.set()

    root = config.store_path_root_dir
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    rng = random.Random(7)
    kills = during_writes = 0
    states: list[str] = []
    try:
        while not done.is_set() or kills < 4:
            proc = _cli("rebuild-index", "--store", str(root), "--follow", "--interval", "0.005")
            time.sleep(rng.uniform(0.3, 0.9))
            during_writes += not done.is_set()
            _kill(proc)
            kills += 1
            states.append(_state_after_kill(config))
            assert kills < 40, "bounded"
    finally:
        thread.join(30)
        writer.close()
    assert len(written) == total
    assert during_writes >= 2, "kills landed while the writer was appending"
    print(f"{kills} kills ({during_writes} while writing); state left: {sorted(states)}")
    # Restart once more and catch up, then compare with a clean build of the same CommitLog.
    builder = IndexBuilder(config)
    builder.run_once()
    builder.close()
    cq_builder = ConsumeQueueBuilder(config)
    cq_builder.run_once()
    cq_builder.close()
    clean_root = tmp_path / "clean"
    clean_root.mkdir()
    shutil.copytree(config.store_path_commit_log, clean_root / "commitlog")
    clean = StoreConfig.for_store(
        clean_root, mapped_file_size_commit_log=16384, max_hash_slot_num=16, max_index_num=60
    )
    rebuild_index(clean)
    rebuild_consume_queues(clean)
    assert _cq_bytes(config) == _cq_bytes(clean), "consume queues: no duplicate, no loss either"
    assert len(_cq_bytes(config)) == 1
    ours = _index_bytes(config.index_dir)
    assert len(ours) > 50, "the small geometry rolled many files, so kills also hit file creation"
    assert ours == _index_bytes(clean.index_dir), "byte-identical to a clean build: no duplicate, no loss"
    assert (
        Checkpoint.read(config.checkpoint_path).index_msg_timestamp
        == Checkpoint.read(clean.checkpoint_path).index_msg_timestamp
    )
    with MessageStore.open(config) as store:
        for i in range(0, total, 7):
            hits = store.query_message("Live", f"k{i}", 64, 0, MAX, exact_key=True).buffers
            assert [int.from_bytes(b[28:36], "big") for b in hits] == [written[i]]


def test_broker_crash_with_torn_newest_file_is_repaired_not_destroyed(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    java, _ = golden_stores[0]
    config = _golden_copy(java, tmp_path / "s")
    (config.store_path_root_dir / "abort").touch()
    newest = sorted(config.index_dir.iterdir())[-1]
    f = IndexFile.open(newest, config.max_hash_slot_num, config.max_index_num)
    count = f.header.index_count
    f.close()
    entries_at = INDEX_HEADER_SIZE + config.max_hash_slot_num * 4
    data = bytearray(newest.read_bytes())
    # A lost page: the last 5 counted entries read as zeros (their slots still point at them) ...
    lo = entries_at + (count - 5) * INDEX_ENTRY_SIZE
    data[lo : lo + 5 * INDEX_ENTRY_SIZE] = bytes(5 * INDEX_ENTRY_SIZE)
    # ... and a torn put past the count: the entry and its slot written, the header not.
    key_hash = 123456
    slot_at = INDEX_HEADER_SIZE + (key_hash % config.max_hash_slot_num) * 4
    old_slot = SLOT.unpack_from(data, slot_at)[0]
    ENTRY.pack_into(data, entries_at + count * INDEX_ENTRY_SIZE, key_hash, 4_000_000, 3, old_slot)
    SLOT.pack_into(data, slot_at, count)
    newest.write_bytes(bytes(data))
    builder = IndexBuilder(config)
    assert [f.name for f in builder.index.files] == sorted(p.name for p in java.index_dir.iterdir()), "kept"
    builder.run_once()
    builder.close()
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir), "repaired: nothing lost or doubled"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("indexCount", 2**31 - 1),  # past the file: rollback used to allocate 40 GB (MemoryError)
        ("indexCount", -7),
        ("hashSlotCount", 10**6),
        ("beginTimestamp", -1),
    ],
)
def test_a_damaged_newest_header_is_rewritten_from_its_entries(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path, field: str, value: int
) -> None:
    """The builder (rebuild-index --follow, serve --build-index) starts on a newest file whose header
    no writer could leave: it must neither crash nor erase the file, and end byte-identical."""
    java, _ = golden_stores[0]
    config = _golden_copy(java, tmp_path / "s")
    newest = sorted(config.index_dir.iterdir())[-1]
    data = bytearray(newest.read_bytes())
    # IndexHeader: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset (i64), then two i32.
    at, fmt = {"beginTimestamp": (0, ">q"), "hashSlotCount": (32, ">i"), "indexCount": (36, ">i")}[field]
    struct.pack_into(fmt, data, at, value)
    newest.write_bytes(bytes(data))
    builder = IndexBuilder(config)
    builder.run_once()
    builder.close()
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir)


class _Crash(BaseException):
    """Stands in for SIGKILL inside the process: nothing catches it, nothing after it runs."""


class _Writes:
    """Counts the builder's writes to index files and the checkpoint; crashes before write ``limit``."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.count = 0

    def tick(self) -> None:
        self.count += 1
        if self.count == self.limit:
            raise _Crash


class _CountedLayout:
    def __init__(self, real: object, writes: _Writes) -> None:
        self._real = real
        self._writes = writes

    def pack_into(self, *args: object) -> None:
        self._writes.tick()
        self._real.pack_into(*args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def _instrument(monkeypatch: pytest.MonkeyPatch, writes: _Writes) -> None:
    from store.index import index_file

    for name in ("ENTRY", "SLOT", "HEADER", "_I64"):
        monkeypatch.setattr(index_file, name, _CountedLayout(getattr(index_file, name), writes))
    real_create = IndexFile.create.__func__  # type: ignore[attr-defined]

    def create(cls: type[IndexFile], path: Path, *args: object, **kw: object) -> IndexFile:
        try:
            writes.tick()
        except _Crash:
            path.touch()  # killed between creating the file and sizing it
            raise
        return real_create(cls, path, *args, **kw)

    monkeypatch.setattr(IndexFile, "create", classmethod(create))
    real_write = Checkpoint.write

    def write(self: Checkpoint, path: Path) -> None:
        writes.tick()
        real_write(self, path)

    monkeypatch.setattr(Checkpoint, "write", write)
    hook_compiled_writes(monkeypatch, writes.tick)  # the same three writes per put, in C


def test_crash_before_every_single_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index_range_impl: str
) -> None:
    """Every point a kill can land between two writes of the builder: each one, then a restart."""
    config = StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=4096, max_hash_slot_num=8, max_index_num=16
    )
    writer_config = StoreConfig.for_store(
        config.store_path_root_dir, mapped_file_size_commit_log=4096, message_index_enable=False
    )
    with StoreWriter(writer_config) as writer:
        for i in range(20):
            writer.append("C", b"y" * (i * 37 % 300), keys=f"k{i} s{i % 5}" if i % 6 else None)
    commitlog = CommitLog(config.store_path_commit_log, 4096)

    def build(name: str) -> IndexBuilder:
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        return IndexBuilder(config, commitlog, index_dir=d, checkpoint_path=d / "cp", now_millis=lambda: 0)

    clean = build("clean")
    clean.run_once()
    clean.close()
    want = [p.read_bytes() for p in sorted((tmp_path / "clean").iterdir()) if p.name != "cp"]
    want_cp = (tmp_path / "clean" / "cp").read_bytes()
    with monkeypatch.context() as m:
        counter = _Writes(None)
        _instrument(m, counter)
        probe = build("probe")
        probe.run_once()
        probe.close()
    total = counter.count
    assert total > 120
    for limit in range(1, total + 1):
        with monkeypatch.context() as m:
            _instrument(m, _Writes(limit))
            with pytest.raises(_Crash):
                crashed = build(f"c{limit}")
                crashed.run_once()
                crashed.close()
        resumed = build(f"c{limit}")  # the restart: repair, then resume
        resumed.run_once()
        resumed.close()
        got = [p.read_bytes() for p in sorted((tmp_path / f"c{limit}").iterdir()) if p.name != "cp"]
        assert got == want, f"crash before write {limit} of {total}"
        assert (tmp_path / f"c{limit}" / "cp").read_bytes() == want_cp, limit
        shutil.rmtree(tmp_path / f"c{limit}")
    commitlog.close()


def test_a_foreign_commitlog_never_erases_the_index(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    """The repair rolls back only what the CommitLog disproves; a CommitLog that disproves all of
    the newest file (a wrong --commitlog) is refused, and the index is left as it was."""
    java, _ = golden_stores[0]
    config = _golden_copy(java, tmp_path / "s")
    other = tmp_path / "other"
    with StoreWriter(StoreConfig.for_store(other, mapped_file_size_commit_log=262144)) as writer:
        for i in range(50):
            writer.append("Other", b"o" * 40, keys=f"o{i}")
    wrong = StoreConfig.load(
        config.store_path_root_dir / "broker.conf",
        overrides={
            "store_path_root_dir": config.store_path_root_dir,
            "store_path_commit_log": other / "commitlog",
        },
    )
    with pytest.raises(IndexFileError, match="wrong CommitLog or store"):
        IndexBuilder(wrong)
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir)


def test_a_commitlog_that_lost_its_tail_is_named_as_such(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path
) -> None:
    """When every entry of the newest file points past the CommitLog's end, the refusal says the
    CommitLog lost its tail (not "wrong CommitLog"), and the index is still left as it was."""
    java, _ = golden_stores[0]
    config = _golden_copy(java, tmp_path / "s")
    newest_path = sorted(config.index_dir.iterdir())[-1]
    newest = IndexFile.open(newest_path, config.max_hash_slot_num, config.max_index_num)
    first = newest.entry(1)[1]
    newest.close()
    size = config.mapped_file_size_commit_log
    for path in sorted(config.store_path_commit_log.iterdir()):
        start = int(path.name)
        if start >= first:
            path.unlink()
        elif start + size > first:
            os.truncate(path, first - start - 100)  # the record before the first indexed one is torn
    lost_tail = r"before the first record it indexes \(\d+\): CommitLog files lost or truncated"
    with pytest.raises(IndexFileError, match=lost_tail):
        IndexBuilder(config)
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir)
