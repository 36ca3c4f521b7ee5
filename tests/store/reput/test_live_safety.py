"""Beside a running broker (issue 10): its layout is not damage, torn records are never indexed,
an unreadable file does not stop the files after it, and index files that vanish are reported.

Every case runs on a writable copy of ``tests/golden/stores/java-4.9.7-a`` and takes its expectations from
the Java store itself (its index files, checkpoint and ``expected.json``), never from this code. What
could fault (SIGBUS) on the code before the fix either asserts first what the old code got wrong, or
runs in ``tests/server/test_live_truncation.py`` (a ``serve`` process).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from store.checkpoint import Checkpoint
from store.commitlog import mapped_files as commitlog_module
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.index.builder import IndexBuilder
from store.message_store import MessageStore
from tests.support.paths import REPO_ROOT

JAVA = "java-4.9.7-a"
FILE_SIZE = 262144
#: The Java store's data ends in this file (offset 4330405); a live broker would have the next one.
LAST_DATA_FILE = 4194304
NEXT_FILE = LAST_DATA_FILE + FILE_SIZE
MAX = 2**63 - 1
FSCK = (sys.executable, "-m", "clients.cli", "fsck")


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{JAVA}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def messages(expected: dict) -> list[dict]:
    return sorted(expected["messages"], key=lambda m: m["commitLogOffset"])


def _copy(stores_dir: Path, tmp_path: Path, *, index: bool = True) -> tuple[StoreConfig, Path]:
    """A writable copy of the Java store and its broker.conf beside it; (config, broker.conf)."""
    root = tmp_path / JAVA
    shutil.copytree(stores_dir / JAVA, root, ignore=None if index else shutil.ignore_patterns("index"))
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conf = tmp_path / f"{JAVA}.broker.conf"
    shutil.copy(stores_dir / f"{JAVA}.broker.conf", conf)
    os.chmod(conf, 0o644)
    return StoreConfig.load(conf), conf


def _commitlog_path(config: StoreConfig, start: int) -> Path:
    return config.store_path_commit_log / f"{start:020d}"


def _index_bytes(index_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(index_dir.iterdir()) if p.name.isdigit()]


@contextmanager
def _broker_lock(root: Path) -> Iterator[int]:
    """Another process holding ``root/lock`` the way a running broker does (fcntl lock on byte 0)."""
    (root / "lock").write_bytes(b"lock")
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(root / 'lock')!r}, os.O_RDWR)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _live_layout(config: StoreConfig) -> None:
    """What a running 4.9.x broker leaves: the next file pre-created (zeros, full size), ``abort``."""
    with open(_commitlog_path(config, NEXT_FILE), "wb") as fh:
        fh.truncate(FILE_SIZE)
    (config.store_path_root_dir / "abort").touch()


# -- item 2: the broker's own layout is not corruption ------------------------------------------------


def test_fsck_and_serve_take_a_live_brokers_layout_as_healthy(
    stores_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config, conf = _copy(stores_dir, tmp_path)
    _live_layout(config)
    with _broker_lock(config.store_path_root_dir) as pid:
        run = subprocess.run(
            [*FSCK, "--store", str(config.store_path_root_dir), "--config", str(conf)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"a broker (pid {pid}) is running on this store" in run.stdout
        assert f"{NEXT_FILE:020d} is pre-created" in run.stdout
        assert "PROBLEM" not in run.stdout
        caplog.set_level(logging.INFO)
        with MessageStore.open(config) as store:
            assert store.commitlog.max_offset == 4330405
            assert store.commitlog.corrupt == {}
            store.refresh()
            hits = store.query_message("TopicB", "k-49", 64, 0, MAX).buffers
            assert 4330121 in [int.from_bytes(b[28:36], "big") for b in hits]
        # ``serve --build-index`` beside a broker that does not index (messageIndexEnable=false).
        shutil.rmtree(config.index_dir)
        with MessageStore.open(config, build_index=True) as store:
            store.refresh()
            assert store.commitlog.corrupt == {}
            assert len(store.query_message("TopicB", "k-49", 64, 0, MAX).buffers) > 0
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    # Without a broker holding the lock, the same abort marker is a crash to report.
    run = subprocess.run(
        [*FSCK, "--store", str(config.store_path_root_dir), "--config", str(conf)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1 and "abort exists" in run.stdout


def test_a_pre_created_file_with_data_in_it_is_still_reported(stores_dir: Path, tmp_path: Path) -> None:
    config, conf = _copy(stores_dir, tmp_path)
    _live_layout(config)
    fd = os.open(_commitlog_path(config, NEXT_FILE), os.O_WRONLY)
    os.pwrite(fd, b"\x07", 5000)
    os.close(fd)
    run = subprocess.run(
        [*FSCK, "--store", str(config.store_path_root_dir), "--config", str(conf)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert (
        f"{NEXT_FILE:020d} begins with zeros but has non-zero bytes at offset {NEXT_FILE + 5000}"
        in run.stdout
    )


def test_refresh_visits_only_what_was_appended(
    stores_dir: Path, tmp_path: Path, messages: list[dict], caplog: pytest.LogCaptureFixture
) -> None:
    """The zeros after the write position (and the pre-created file) are looked at once per refresh
    (8 bytes), never searched again; appended records are visited once each."""
    config, _conf = _copy(stores_dir, tmp_path)
    _live_layout(config)
    tail = messages[-3:]
    path = _commitlog_path(config, LAST_DATA_FILE)
    data = path.read_bytes()
    cut = tail[0]["commitLogOffset"] - LAST_DATA_FILE
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(len(data) - cut), cut)  # the last 3 records not written yet
        log = CommitLog(config.store_path_commit_log, FILE_SIZE)
        try:
            assert log.max_offset == tail[0]["commitLogOffset"]
            for _ in range(5):
                before = log.bytes_visited
                log.refresh()
                assert log.bytes_visited - before == 8, "only the 8 bytes at the known end are looked at"
            os.pwrite(fd, data[cut:], cut)  # the broker appends them
            before = log.bytes_visited
            log.refresh()
            assert log.bytes_visited - before == sum(m["size"] for m in tail) + 8
            assert log.max_offset == 4330405 == log.settled_end
            assert log.corrupt == {}
        finally:
            log.close()
    finally:
        os.close(fd)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- item 3: torn records are never indexed ----------------------------------------------------------


def test_random_pieces_writer_ends_with_javas_index(stores_dir: Path, tmp_path: Path) -> None:
    """A writer copies the Java CommitLog into an empty store in seeded random pieces (a slave's
    batches, page commits), pre-creating each next file as the broker does; the indexer refreshes
    after every piece and sometimes twice. When the writer stops, the index files and the
    checkpoint's indexMsgTimestamp are the Java broker's, byte for byte."""
    source = stores_dir / JAVA / "commitlog"
    names = sorted(p.name for p in source.iterdir())
    root = tmp_path / "live"
    (root / "commitlog").mkdir(parents=True)
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=FILE_SIZE, max_hash_slot_num=512, max_index_num=2048
    )
    rng = random.Random(20261122)
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 1000))
    builder = IndexBuilder(config, now_millis=lambda: next(clock))
    torn_seen = 0
    try:
        for i, name in enumerate(names):
            for n in names[i : i + 2]:  # the current file and the pre-created next one
                if not (root / "commitlog" / n).exists():
                    with open(root / "commitlog" / n, "wb") as fh:
                        fh.truncate(FILE_SIZE)
            data = (source / name).read_bytes()
            end = len(data.rstrip(b"\0"))
            fd = os.open(root / "commitlog" / name, os.O_WRONLY)
            try:
                pos = 0
                while pos < end:
                    step = rng.choice((rng.randint(1, 64), rng.randint(1, 1500), rng.randint(1, 9000)))
                    os.pwrite(fd, data[pos : min(pos + step, end)], pos)
                    pos = min(pos + step, end)
                    for _ in range(rng.choice((1, 1, 2))):
                        builder.commitlog.refresh()
                        log = builder.commitlog
                        torn_seen += getattr(log, "settled_end", log.max_offset) < log.max_offset
                        builder.run_once()
            finally:
                os.close(fd)
        builder.commitlog.refresh()
        builder.run_once()
    finally:
        builder.close()
    assert _index_bytes(config.index_dir) == _index_bytes(stores_dir / JAVA / "index")
    java = Checkpoint.read(stores_dir / JAVA / "checkpoint")
    assert Checkpoint.read(config.checkpoint_path).index_msg_timestamp == java.index_msg_timestamp
    assert torn_seen > 50, "the pieces must often end inside a record's properties"


def test_follow_waits_for_a_torn_last_record(stores_dir: Path, tmp_path: Path, messages: list[dict]) -> None:
    """The issue's reproduction: blank the last bytes of the last record (from its KEYS property on)
    of a store without its index, start ``rebuild-index --follow``, write the bytes back: every
    index file equals Java's (before the fix: 5 of 6, key k-49 of the last record missing)."""
    config, conf = _copy(stores_dir, tmp_path, index=False)
    last = messages[-1]
    path = _commitlog_path(config, LAST_DATA_FILE)
    pos = last["commitLogOffset"] - LAST_DATA_FILE
    record = path.read_bytes()[pos : pos + last["size"]]
    keys_at = record.index(b"KEYS\x01")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, bytes(len(record) - keys_at), pos + keys_at)
    java_last = sorted(stores_dir.joinpath(JAVA, "index").iterdir())[-1].read_bytes()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clients.cli",
            "rebuild-index",
            "--store",
            str(config.store_path_root_dir),
            "--config",
            str(conf),
            "--follow",
            "--interval",
            "0.05",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        previous = messages[-2]["commitLogOffset"]
        assert _wait_for(lambda: _newest_end_phy(config) == previous), "the records before it are indexed"
        time.sleep(0.5)  # ten polls with the torn record in view
        assert _newest_end_phy(config) == previous, "the torn record must not be indexed"
        os.pwrite(fd, record[keys_at:], pos + keys_at)
        assert _wait_for(lambda: _newest_bytes(config) == java_last), (
            "the whole record is indexed as Java did"
        )
    finally:
        os.close(fd)
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert _index_bytes(config.index_dir) == _index_bytes(stores_dir / JAVA / "index")


def _newest_bytes(config: StoreConfig) -> bytes | None:
    files = sorted(p for p in config.index_dir.glob("*") if p.name.isdigit())
    return files[-1].read_bytes() if files else None


def _newest_end_phy(config: StoreConfig) -> int | None:
    data = _newest_bytes(config)
    return int.from_bytes(data[24:32], "big") if data and len(data) >= 40 else None


def _wait_for(condition: object, timeout: float = 60.0) -> bool:
    """Poll ``condition`` (a bound on the wait, 10x and more what it needs, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


# -- item 5 (last sentence): one unreadable file ------------------------------------------------------


def test_an_unreadable_file_does_not_stop_the_files_after_it(
    stores_dir: Path,
    tmp_path: Path,
    messages: list[dict],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A middle file fails with EIO (chmod 000 does not stop root): the store opens, answers from
    the other files, and keeps following the tail; the failure is logged once."""
    config, _conf = _copy(stores_dir, tmp_path)
    bad = 2097152
    real_map = commitlog_module._map

    def failing_map(path: Path) -> object:
        if path.name == f"{bad:020d}":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return real_map(path)

    monkeypatch.setattr(commitlog_module, "_map", failing_map)
    last = messages[-1]
    path = _commitlog_path(config, LAST_DATA_FILE)
    pos = last["commitLogOffset"] - LAST_DATA_FILE
    record = path.read_bytes()[pos : pos + last["size"]]
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(len(record)), pos)  # the last record is not written yet
        with MessageStore.open(config) as store:
            assert store.commitlog.max_offset == last["commitLogOffset"]
            after = next(m for m in messages if m["commitLogOffset"] >= bad + FILE_SIZE)
            assert store.view_message(after["commitLogOffset"]) is not None
            assert store.view_message(bad + 10) is None
            os.pwrite(fd, record, pos)
            for _ in range(3):
                store.refresh()
            buf = store.view_message(last["commitLogOffset"])
            assert buf is not None and len(buf) == last["size"]
            assert store.commitlog.max_offset == 4330405
            assert store.commitlog.unreadable == {bad: os.strerror(errno.EIO)}
    finally:
        os.close(fd)
    eio = [r for r in caplog.records if f"{bad:020d}" in r.getMessage()]
    assert len(eio) == 1 and r"Input/output error" in eio[0].getMessage()


def test_builder_follows_past_an_unreadable_file(
    stores_dir: Path, tmp_path: Path, messages: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _conf = _copy(stores_dir, tmp_path, index=False)
    bad = 2097152
    real_map = commitlog_module._map

    def failing_map(path: Path) -> object:
        if path.name == f"{bad:020d}":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_map(path)

    monkeypatch.setattr(commitlog_module, "_map", failing_map)
    with MessageStore.open(config, build_index=True) as store:
        later = [m for m in messages if m["commitLogOffset"] >= bad + FILE_SIZE and m["keys"]]
        key = later[-1]["keys"].split(" ")[0]
        hits = store.query_message(later[-1]["topic"], key, 64, 0, MAX).buffers
        assert later[-1]["commitLogOffset"] in [int.from_bytes(b[28:36], "big") for b in hits]


# -- item 8 (first sentence): index files deleted or zeroed while serving ------------------------------


def test_index_files_deleted_cut_or_zeroed_while_serving_are_logged_once(
    stores_dir: Path, tmp_path: Path, expected: dict, caplog: pytest.LogCaptureFixture
) -> None:
    config, _conf = _copy(stores_dir, tmp_path)
    files = sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())
    caplog.set_level(logging.INFO)
    with MessageStore.open(config) as store:
        files[0].unlink()
        files[1].write_bytes(bytes(files[1].stat().st_size))  # zeroed in place, same inode and size
        fd = os.open(files[2], os.O_WRONLY | os.O_TRUNC)  # `> file` (and cp's first step)
        os.close(fd)
        for _ in range(3):
            store.refresh()
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len([w for w in warnings if files[0].name in w and "deleted" in w]) == 1, warnings
        assert len([w for w in warnings if files[1].name in w and "indexCount went down" in w]) == 1, warnings
        assert len([w for w in warnings if files[2].name in w and "cut short" in w]) == 1, warnings
        assert [f.name for f in store.index.files] == [files[1].name, *(p.name for p in files[3:])]
        # The intact newer files answer as Java's did for the records they index.
        q = next(q for q in expected["queries"] if q["label"] == "kN" and q["key"] == "k-5")
        cut_end = int.from_bytes((stores_dir / JAVA / "index" / files[2].name).read_bytes()[24:32], "big")
        got = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"]).buffers
        want = [r["commitLogOffset"] for r in q["results"] if r["commitLogOffset"] > cut_end]
        assert want and [int.from_bytes(b[28:36], "big") for b in got] == want
        shutil.copyfile(stores_dir / JAVA / "index" / files[2].name, files[2])  # the copy completes
        store.refresh()
        assert files[2].name in [f.name for f in store.index.files]
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == warnings


# -- item 1: a file cut under the reader is re-walked on refresh ---------------------------------------


def test_a_cut_commitlog_file_is_walked_again_to_its_last_whole_record(
    stores_dir: Path, tmp_path: Path, messages: list[dict], caplog: pytest.LogCaptureFixture
) -> None:
    """``truncate`` to mid-record: the end moves back to the last whole record before the cut (not
    the cut itself, which is inside a record); rewriting the bytes brings the records back."""
    config, _conf = _copy(stores_dir, tmp_path)
    path = _commitlog_path(config, LAST_DATA_FILE)
    data = path.read_bytes()
    victim = messages[-10]
    cut = victim["commitLogOffset"] + 50
    with MessageStore.open(config) as store:
        os.truncate(path, cut - LAST_DATA_FILE)
        for _ in range(3):
            store.refresh()
        assert store.commitlog.max_offset == victim["commitLogOffset"]
        assert store.commitlog.settled_end == victim["commitLogOffset"]
        assert store.view_message(victim["commitLogOffset"]) is None
        assert store.view_message(messages[-11]["commitLogOffset"]) is not None
        path.write_bytes(data)
        store.refresh()
        assert store.commitlog.max_offset == 4330405
        assert store.view_message(messages[-1]["commitLogOffset"]) is not None
    shrank = [r for r in caplog.records if "shrank" in r.getMessage()]
    assert len(shrank) == 1 and f"to {cut - LAST_DATA_FILE} bytes" in shrank[0].getMessage()


def test_a_commitlog_file_cut_while_mapped_is_one_warning(
    stores_dir: Path, tmp_path: Path, messages: list[dict], caplog: pytest.LogCaptureFixture
) -> None:
    """One cut, one line: the shrink is reported, not also as "has N bytes, not
    mappedFileSizeCommitLog" for the same file and length (the remap that follows it)."""
    config, _conf = _copy(stores_dir, tmp_path)
    path = _commitlog_path(config, LAST_DATA_FILE)
    cut = messages[-10]["commitLogOffset"] + 50 - LAST_DATA_FILE
    with MessageStore.open(config) as store:
        caplog.clear()
        os.truncate(path, cut)
        for _ in range(3):
            store.refresh()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "shrank" in warnings[0], warnings


def test_a_commitlog_file_cut_again_after_a_restore_is_reported_again(
    stores_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Once per event, not once per process: the same cut after the file was restored is news."""
    config, _conf = _copy(stores_dir, tmp_path)
    path = _commitlog_path(config, LAST_DATA_FILE)
    data = path.read_bytes()
    with MessageStore.open(config) as store:
        for _ in range(2):
            os.truncate(path, 100000)
            store.refresh()
            store.refresh()
            path.write_bytes(data)
            store.refresh()
    shrank = [r for r in caplog.records if "shrank" in r.getMessage()]
    assert len(shrank) == 2


def test_index_files_of_a_building_store_deleted_or_cut_are_logged_once(
    stores_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``serve --build-index``: its own files vanish or shrink under the builder: said once each,
    and the builder stops writing into a file cut short (a write there would fault) instead."""
    config, _conf = _copy(stores_dir, tmp_path, index=False)
    with MessageStore.open(config, build_index=True) as store:
        files = sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())
        files[0].unlink()
        os.truncate(files[-1], 100)
        for _ in range(3):
            assert store.refresh(max_records=100) is False
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len([w for w in warnings if files[0].name in w and "was deleted" in w]) == 1, warnings
        assert len([w for w in warnings if files[-1].name in w and "cut short to 100" in w]) == 1, warnings
