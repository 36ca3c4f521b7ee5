"""The batched consume queue build (issue 22): ``extract_entries`` and its compiled twin agree with
each other and with ``dispatch_entry``; the builder gives the Java broker's bytes through the
compiled path, the pure-Python path and the old one-record-at-a-time path alike, on batches that
cross file boundaries; a kill anywhere inside a stretch's batches (a write torn at any byte) and a
write failure mid-batch both end, after the next pass, in the same bytes.

Each build test runs once per path in the same session (the ``path`` fixture), whatever
``RMQ_PURE_PYTHON`` says: the compiled one is skipped only when it is not built."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import store.consumequeue.builder as builder_module
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue import consume_queue_build
from store.consumequeue.builder import RESUME_MARK, ConsumeQueueBuilder, rebuild_consume_queues
from store.consumequeue.consume_queue import delay_level_table
from store.consumequeue.consume_queue_build import BUDGET, END, SPECIAL, extract_entries_reference
from store.errors import ConsumeQueueWriteError
from store.reput.decode import dispatch_entry
from store.write.writer import StoreWriter
from tests.support.cq_full_disk import FullDisk
from tests.support.killed_build import build_killed_after

NAME = "java-4.9.7-a"
_FAST = consume_queue_build._fast


def _one_by_one(view: memoryview, pos: int, end: int, base: int, max_records: int) -> tuple:
    """The old dispatcher: every record left to ``dispatch_entry`` and ``put`` alone."""
    return SPECIAL, pos, 0, []


PATHS = {
    "compiled": _FAST.extract_entries if _FAST is not None else None,
    "reference": extract_entries_reference,
    "one-by-one": _one_by_one,
}


@pytest.fixture(params=["compiled", "reference"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The builder on the compiled ``extract_entries`` or on its pure-Python reference."""
    fn = PATHS[request.param]
    if fn is None:
        pytest.skip("the compiled twin is not built")
    monkeypatch.setattr(builder_module, "extract_entries", fn)
    if request.param != "compiled":
        monkeypatch.setattr(builder_module, "append_entries", None)  # the Python path alone
    return request.param


def _copy(stores_dir: Path, tmp_path: Path, **overrides: object) -> StoreConfig:
    dst = tmp_path / NAME
    shutil.copytree(stores_dir / NAME, dst)
    for p in [dst, *dst.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return StoreConfig.load(
        stores_dir / f"{NAME}.broker.conf",
        overrides={"store_path_root_dir": dst, "store_path_commit_log": dst / "commitlog", **overrides},
    )


def _java_cq_files(stores_dir: Path) -> dict[str, str]:
    files = json.loads((stores_dir / f"{NAME}.cq-expected.json").read_text("utf-8"))["consumequeueFiles"]
    return {f["path"]: f["sha256"] for f in files if f["path"].startswith("consumequeue/")}


def _cq_files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }


# -- the function and its twin ------------------------------------------------------------------


def _golden_files(stores_dir: Path) -> list[tuple[int, bytes]]:
    root = stores_dir / NAME / "commitlog"
    return [(int(p.name), p.read_bytes()) for p in sorted(root.iterdir())]


def _whole_end(data: bytes, base: int) -> int:
    """Where the whole records of one golden CommitLog file end (the reput's run end)."""
    from store.commitlog.record import check

    pos = 0
    while (size := check(data, pos, len(data), base + pos, check_crc=True)) > 0:
        pos += size
    return pos


@pytest.mark.skipif(_FAST is None, reason="the compiled twin is not built")
@pytest.mark.parametrize("budget", [1, 7, 1000, 1 << 40])
def test_twin_agrees_with_the_reference_on_the_golden_commitlog(stores_dir: Path, budget: int) -> None:
    calls = 0
    for base, data in _golden_files(stores_dir):
        end = _whole_end(data, base)
        pos = 0
        while pos < end:
            want = extract_entries_reference(data, pos, end, base, budget)
            got = _FAST.extract_entries(data, pos, end, base, budget)
            assert got == want
            assert got[0] in (END, BUDGET, SPECIAL) and got[1] > pos
            pos = got[1]
            calls += 1
    assert calls >= 17


def test_entries_are_dispatch_entrys(stores_dir: Path) -> None:
    """Every entry equals what ``dispatch_entry`` gives its record, grouped per queue in order."""
    delays = delay_level_table(StoreConfig.load(stores_dir / f"{NAME}.broker.conf").message_delay_level)
    fn = PATHS["compiled"] or extract_entries_reference
    total = 0
    for base, data in _golden_files(stores_dir):
        end = _whole_end(data, base)
        stop, pos, seen, groups = fn(data, 0, end, base, 1 << 40)
        assert (stop, pos) == (END, end)
        want: dict[tuple[bytes, int], list[tuple[int, int, int, int, int]]] = {}
        at = records = 0
        while at < end:
            size = int.from_bytes(data[at : at + 4], "big")
            entry = dispatch_entry(memoryview(data)[at : at + size], delays)
            if entry is not None:
                topic, qid, qoff, code, ts = entry
                want.setdefault((topic.encode(), qid), []).append((base + at, size, code, qoff, ts))
            at += size
            records += 1
        got = {}
        for topic, qid, entries, qoffs, times, consecutive in groups:
            offs, tss = array("q", qoffs), array("q", times)
            unpacked = builder_module._ENTRY.iter_unpack(entries)
            rows = [(*e, q, t) for e, q, t in zip(unpacked, offs, tss, strict=True)]
            got[(topic, qid)] = rows
            assert consecutive == all(b == a + 1 for a, b in itertools.pairwise(offs))
        assert got == want
        assert seen == records
        total += records
    assert total == 5000


def _record_store(tmp_path: Path) -> StoreConfig:
    """Records of every kind the extraction tells apart: non-ASCII and empty tags, repeated TAGS
    items, SCHEDULE_TOPIC_XXXX with and without DELAY (and a DELAY that is not an int), no
    properties, PREPARED / COMMIT / ROLLBACK, queue offsets that jump."""
    root = tmp_path / "kinds"
    config = StoreConfig.for_store(
        root, message_index_enable=False, broker_ip1="127.0.0.1", mapped_file_size_commit_log=64 * 1024
    )
    with StoreWriter(config) as writer:
        for n in range(600):
            kind = n % 12
            if kind == 0:
                writer.append("T", b"x" * 50, tags="标签-é", queue_id=n % 3)
            elif kind == 1:
                writer.append("T", b"y", tags="😀 emoji", queue_id=n % 3)
            elif kind == 2:
                writer.append("SCHEDULE_TOPIC_XXXX", b"d", tags="t", properties={"DELAY": "3"}, queue_id=2)
            elif kind == 3:
                writer.append("SCHEDULE_TOPIC_XXXX", b"d", tags="t", queue_id=2)
            elif kind == 4:
                writer.append("SCHEDULE_TOPIC_XXXX", b"d", properties={"DELAY": "x1"}, queue_id=2)
            elif kind == 5:
                writer.append("U", b"z" * 300, unique_key=False, queue_id=0)
            elif kind == 6:
                writer.append("T", b"p", tags="prep", sys_flag=0x4, queue_id=1)
            elif kind == 7:
                writer.append("T", b"r", tags="roll", sys_flag=0xC, queue_id=1)
            elif kind == 8:
                writer.append("T", b"c", tags="commit", sys_flag=0x8, queue_id=1)
            else:
                writer.append(
                    f"Topic{kind}", bytes(n % 200), tags=f"tag{n % 5}", keys=f"k{n}", queue_id=n % 4
                )
    return config


def _build(config: StoreConfig, fn: object, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(builder_module, "extract_entries", fn)
    shutil.rmtree(config.consume_queue_dir, ignore_errors=True)
    rebuild_consume_queues(config)
    return _cq_files(config.store_path_root_dir)


def test_every_path_builds_the_same_queues_from_every_record_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _record_store(tmp_path)
    old = _build(config, _one_by_one, monkeypatch)
    assert len(old) == 7  # T/0-2, U/0, SCHEDULE_TOPIC_XXXX/2, Topic9/1, Topic10/2, Topic11/3
    assert _build(config, extract_entries_reference, monkeypatch) == old
    if _FAST is not None:
        assert _build(config, _FAST.extract_entries, monkeypatch) == old
        commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
        try:
            for f in commitlog.files:
                with f.view() as view:
                    end = _whole_end(bytes(view), f.start)
                    for budget in (1, 5, 1 << 40):
                        pos = 0
                        while pos < end:
                            want = extract_entries_reference(view, pos, end, f.start, budget)
                            assert _FAST.extract_entries(view, pos, end, f.start, budget) == want
                            pos = (
                                want[1] if want[1] > pos else pos + int.from_bytes(view[pos : pos + 4], "big")
                            )
        finally:
            commitlog.close()


@pytest.mark.skipif(_FAST is None, reason="the compiled twin is not built")
def test_twin_agrees_on_hostile_bytes(stores_dir: Path) -> None:
    """Records with lengths and flags overwritten at random: the same answers (or the same stop),
    never a read outside the view."""
    rng = random.Random(22)
    base, data = _golden_files(stores_dir)[0]
    end = _whole_end(data, base)
    for _ in range(3000):
        buf = bytearray(data[:end])
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(buf))
            buf[at] = rng.randrange(256)
        cut = rng.randrange(len(buf) + 1)
        pos = 0
        view = bytes(buf)
        for _ in range(50):
            want = extract_entries_reference(view, pos, cut, base, 1 << 40)
            assert _FAST.extract_entries(view, pos, cut, base, 1 << 40) == want
            if want[0] != SPECIAL or want[1] >= cut:
                break
            size = int.from_bytes(view[want[1] : want[1] + 4], "big", signed=True)
            if size <= 0:
                break
            pos = want[1] + size
            if pos > cut:
                break
    with pytest.raises(ValueError):
        _FAST.extract_entries(data, 10, 5, base, 1)
    with pytest.raises(ValueError):
        extract_entries_reference(data, 0, len(data) + 1, base, 1)


# -- the builder: Java's bytes, file boundaries, kills and failures mid-batch ------------------


@pytest.mark.parametrize("file_size", [20000, 2000, 60])
def test_batches_give_javas_bytes_across_file_boundaries(
    stores_dir: Path, tmp_path: Path, path: str, file_size: int
) -> None:
    """20000: the broker's own geometry for this store (its golden files); 2000 and 60: 100 and 3
    entries a file, so most batches cross a file boundary; the files are Java's bytes cut up."""
    config = _copy(stores_dir, tmp_path, mapped_file_size_consume_queue=file_size)
    java_root = stores_dir / NAME / "consumequeue"
    shutil.rmtree(config.consume_queue_dir)
    builder = rebuild_consume_queues(config)
    assert (builder.records_read, builder.entries_written) == (5000, 4980)
    if file_size == 20000:
        assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir)
    for java in java_root.glob("*/*/" + "0" * 20):
        qdir = config.consume_queue_dir / java.parent.parent.name / java.parent.name
        data = java.read_bytes()
        used = next(i for i in range(0, len(data) + 20, 20) if data[i + 8 : i + 12] in (b"", bytes(4)))
        built = b"".join((qdir / name).read_bytes() for name in sorted(os.listdir(qdir)))
        names = sorted(os.listdir(qdir))
        assert names == [f"{start:020d}" for start in range(0, max(used, 1), file_size)]
        assert built == data[:used] + bytes(len(names) * file_size - used)
    assert not (config.consume_queue_dir / RESUME_MARK).exists()


@pytest.mark.parametrize("batch", [1, 7, 333])
def test_stretches_of_any_size_give_javas_bytes(
    stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, batch: int
) -> None:
    """``BATCH_RECORDS`` cut every run into stretches (one mark each): the same bytes."""
    monkeypatch.setattr(builder_module, "BATCH_RECORDS", batch)
    config = _copy(stores_dir, tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    builder = rebuild_consume_queues(config)
    assert (builder.records_read, builder.entries_written) == (5000, 4980)
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir)


class _Kill(Exception):
    pass


@pytest.mark.parametrize("kill_after_bytes", [0, 8, 20, 36, 10_016, 20_004, 40_010, 99_596])
def test_a_kill_mid_batch_is_taken_back_and_rebuilt(
    stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, kill_after_bytes: int
) -> None:
    """Killed after N bytes of writes (the last one torn at that byte, not undone: a kill splits a
    write at a page), with the batches of other queues not yet written, and a torn entry appended
    to one queue: the next builder takes the stretch back and ends with Java's bytes."""
    config = _copy(stores_dir, tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    build_killed_after(config, monkeypatch, kill_after_bytes)
    written = sorted(config.consume_queue_dir.rglob("0" * 20))
    if written:
        with open(written[-1], "r+b") as f:
            data = f.read()
            end = next(i for i in range(0, len(data), 20) if data[i + 8 : i + 12] == b"\0\0\0\0")
            f.seek(end)
            f.write((12345).to_bytes(8, "big"))
    builder = ConsumeQueueBuilder(config)
    assert not (config.consume_queue_dir / RESUME_MARK).exists()  # taken back at open
    builder.run_once()
    builder.close()
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir)


def test_without_the_mark_a_kill_mid_batch_would_lose_entries(
    stores_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the mark is for: the same kill with the mark file deleted before restarting resumes
    past entries a queue never got, so the bytes differ (this test fails if the build went back to
    writing in CommitLog order and the mark were no longer needed: then drop the mark)."""
    config = _copy(stores_dir, tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    real = builder_module._write_all
    calls = {"n": 0}

    def write_all(fd: int, data: bytes, at: int) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # the mark, then two queues' batches: the third queue's is lost
            raise _Kill
        real(fd, data, at)

    monkeypatch.setattr(builder_module, "_write_all", write_all)
    builder = ConsumeQueueBuilder(config)
    with pytest.raises(_Kill):
        builder.run_once()
    monkeypatch.setattr(builder_module, "_write_all", real)
    (config.consume_queue_dir / RESUME_MARK).unlink()
    builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    assert _cq_files(config.store_path_root_dir) != _java_cq_files(stores_dir)


@pytest.fixture
def full_disk() -> Iterator[Callable[[int], FullDisk]]:
    """Makes a ``FullDisk``; the compiled fault is cleared at the end whatever the test did."""
    made: list[FullDisk] = []

    def make(room: int) -> FullDisk:
        made.append(FullDisk(room))
        return made[-1]

    yield make
    for disk in made:
        disk.free()


@pytest.mark.parametrize("room", [0, 30, 20_010, 60_000])
@pytest.mark.parametrize("then", ["same builder", "new builder"])
def test_a_write_failure_mid_batch_raises_and_the_next_pass_completes(
    stores_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    room: int,
    then: str,
    full_disk: Callable[[int], FullDisk],
) -> None:
    config = _copy(stores_dir, tmp_path)
    shutil.rmtree(config.consume_queue_dir)
    disk = full_disk(room)
    monkeypatch.setattr(os, "pwrite", disk.pwrite)
    builder = ConsumeQueueBuilder(config)
    with pytest.raises(ConsumeQueueWriteError):
        builder.run_once()
    failed_at = builder.next_offset
    # The stretch that failed starts there, in memory and on disk (the mark a new builder reads).
    mark = (config.consume_queue_dir / RESUME_MARK).read_bytes()
    assert int.from_bytes(mark, "big", signed=True) == failed_at
    # Still full: the same error, nothing torn left behind (the partial write was zeroed).
    with pytest.raises(ConsumeQueueWriteError):
        builder.run_once()
    assert builder.next_offset == failed_at
    monkeypatch.setattr(os, "pwrite", disk.real)
    disk.free()
    if then == "new builder":
        builder.close()
        assert (config.consume_queue_dir / RESUME_MARK).exists()  # left set: taken back at open
        builder = ConsumeQueueBuilder(config)
    builder.run_once()
    builder.close()
    assert _cq_files(config.store_path_root_dir) == _java_cq_files(stores_dir)
    assert not (config.consume_queue_dir / RESUME_MARK).exists()


# -- rebuild-index: both from one CommitLog pass ------------------------------------------------


def _index_bytes(root: Path) -> list[bytes]:
    """The index files' contents in name order (a rebuild names files by its own creation time)."""
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def test_one_pass_rebuilds_both_as_java_wrote_them(
    stores_dir: Path, tmp_path: Path, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from clients.cli import main
    from store.checkpoint import Checkpoint

    config = _copy(stores_dir, tmp_path)
    root = config.store_path_root_dir
    java_index = _index_bytes(root)
    before = Checkpoint.read(config.checkpoint_path)
    conf = stores_dir / f"{NAME}.broker.conf"
    assert main(["rebuild-index", "--store", str(root), "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "indexed 11650 keys of" in out
    assert "built 4980 consume queue entries of 5000 records into 12 queues in the same CommitLog pass" in out
    assert _index_bytes(root) == java_index
    assert _cq_files(root) == _java_cq_files(stores_dir)
    after = Checkpoint.read(config.checkpoint_path)
    assert after.logics_msg_timestamp == before.logics_msg_timestamp
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


def test_a_queue_write_failure_in_the_one_pass_replaces_neither(
    stores_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    full_disk: Callable[[int], FullDisk],
) -> None:
    from clients.cli import main

    config = _copy(stores_dir, tmp_path)
    root = config.store_path_root_dir
    java_index = _index_bytes(root)
    monkeypatch.setattr(os, "pwrite", full_disk(100).pwrite)
    conf = stores_dir / f"{NAME}.broker.conf"
    assert main(["rebuild-index", "--store", str(root), "--config", str(conf)]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err
    assert f"nothing was replaced; {root / 'index'} is unchanged" in err
    assert _index_bytes(root) == java_index
    assert _cq_files(root) == _java_cq_files(stores_dir)
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []
