"""One writer per store, for the writer's whole life (issue 18, item 1).

The writer's lock on ``<store>/lock`` used to be a POSIX lock, which the kernel drops when the process
closes any descriptor of the file; the writable store's own query side asked "does a broker hold
the lock?" by opening and closing ``lock``, so from then on nothing was locked: a second
``serve --writable`` and the real broker started on a store being written. These tests look at what
the kernel says (``/proc/locks``), at what another process can take, and at ``serve`` itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.errors import IndexGeometryError
from store.message_store import MessageStore
from store.platform.broker_lock import broker_lock_holder
from store.write.writer import StoreWriter, WriterLockedError
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_SKIP_REASON, rocketmq_home
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, serving

#: Seconds the real broker gets to refuse (it refuses in 1-3 s here; its JVM alone starts in about 1).
JAVA_TIMEOUT = 60


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(root, mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1")


def _kernel_locks_on(path: Path) -> list[str]:
    """The lines of ``/proc/locks`` naming the inode of ``path`` (``MAJ:MIN:INODE``)."""
    ino = os.stat(path).st_ino
    lines = Path("/proc/locks").read_text(encoding="ascii").splitlines()
    return [line for line in lines if any(field.endswith(f":{ino}") for field in line.split())]


#: Run in another process against a store this process writes: what can it take?
_PROBE = """
import fcntl, os, sys
from store.config.store_config import StoreConfig
from store.errors import IndexGeometryError
from store.platform.broker_lock import broker_lock_holder
from store.write.writer import StoreWriter, WriterLockedError
root = sys.argv[1]
config = StoreConfig.for_store(root, mapped_file_size_commit_log=64 * 1024, broker_ip1="127.0.0.1")
try:
    StoreWriter(config).close()
    print("writer: opened")
except WriterLockedError as exc:
    print(f"writer: refused holder={exc.holder}")
fd = os.open(os.path.join(root, "lock"), os.O_RDWR)
try:  # what Java's FileChannel.tryLock(0, 1, false) asks the kernel: F_SETLK, write lock, byte 0
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    print("broker lock: taken")
except OSError:
    print("broker lock: refused")
print(f"holder: {broker_lock_holder(root)}")
"""


def _probe(root: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=True,
    )
    return done.stdout.splitlines()


def test_the_kernel_shows_the_lock_for_the_writable_stores_whole_life(tmp_path: Path) -> None:
    """Opening the writable store runs its query side's broker check (open and close of ``lock``);
    a read-only open and the check asked again must not release it either (before: no line)."""
    config = _config(tmp_path / "s")
    lock = config.store_path_root_dir / "lock"
    with WritableStore(config):
        assert len(_kernel_locks_on(lock)) == 1, "the writer's lock must be held once the store is open"
        MessageStore.open(config).close()
        assert broker_lock_holder(config.store_path_root_dir) is None  # ourselves: not a broker
        with open(lock, "rb"):
            pass  # any descriptor of the file, opened and closed in this process
        assert len(_kernel_locks_on(lock)) == 1
    assert _kernel_locks_on(lock) == []  # released at close


def test_another_process_can_take_neither_the_writers_lock_nor_the_brokers(tmp_path: Path) -> None:
    """A ``StoreWriter`` of another process is refused naming this process, the lock a broker takes
    cannot be had, and the read-only check there reports this process (before: all three taken)."""
    config = _config(tmp_path / "s")
    with WritableStore(config) as store:
        store.create_topic("T")
        assert _probe(config.store_path_root_dir) == [
            f"writer: refused holder={os.getpid()}",
            "broker lock: refused",
            f"holder: {os.getpid()}",
        ]
    assert _probe(config.store_path_root_dir) == ["writer: opened", "broker lock: taken", "holder: None"]


def test_a_second_writer_in_this_process_is_refused_and_the_first_keeps_its_lock(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    lock = config.store_path_root_dir / "lock"
    with StoreWriter(config) as writer:
        writer.append("T", b"x", keys="k")
        with pytest.raises(WriterLockedError, match="another writer in this process"):
            StoreWriter(config)
        with pytest.raises(WriterLockedError):
            WritableStore(config)
        assert len(_kernel_locks_on(lock)) == 1, "a refused writer must not release the holder's lock"
    StoreWriter(config).close()  # released at close


def test_a_writer_that_fails_to_open_releases_the_lock(tmp_path: Path) -> None:
    """A writer whose open fails after it took the lock (here: an IndexFile that does not match the
    configured geometry) leaves the store unlocked: the process may go on, another writer may start."""
    config = _config(tmp_path / "s")
    config.index_dir.mkdir(parents=True)
    (config.index_dir / "20240101000000000").write_bytes(bytes(1000))
    with pytest.raises(IndexGeometryError):
        StoreWriter(config)
    assert _kernel_locks_on(config.store_path_root_dir / "lock") == []


async def test_a_second_serve_writable_on_the_same_store_is_refused(tmp_path: Path) -> None:
    """The second ``serve --writable`` exits 3 naming the first one's pid, and writes nothing."""
    store = tmp_path / "store"
    async with serving("--writable", "--store", str(store), "--port", "0") as (proc, _lines, _port, _fast):
        before = sorted(p.name for p in store.rglob("*"))
        second = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            "serve",
            "--writable",
            "--store",
            str(store),
            "--port",
            "0",
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _out, err = await asyncio.wait_for(second.communicate(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(second)
        assert second.returncode == 3, err.decode()
        assert f"is locked by process {proc.pid}" in err.decode()
        assert sorted(p.name for p in store.rglob("*")) == before
        assert broker_lock_holder(store) == proc.pid  # still held by the first


def _free_broker_port() -> int:
    """A port P with P - 2 (the broker's VIP channel) and P + 1 (its HA port) free as well."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise OSError("no free port triple")


@pytest.mark.skipif(
    shutil.which("java") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)
def test_the_real_broker_refuses_to_start_on_a_store_being_written(tmp_path: Path) -> None:
    """``start-broker.sh`` on the store of an open ``WritableStore`` exits non-zero with the broker's
    "Lock failed,MQ already started" (its ``tryLock`` refused) instead of serving (before: it booted).
    The broker runs from a copy of the shared folder, on free loopback ports, and is killed by its
    pid if it is still running after ``JAVA_TIMEOUT`` seconds."""
    rmq = tmp_path / "rmq"
    shutil.copytree(rocketmq_home(), rmq)
    config = _config(tmp_path / "store")
    log = tmp_path / "broker.out"
    with WritableStore(config) as store:
        store.create_topic("T")
        with open(log, "wb") as out:
            broker = subprocess.Popen(
                [
                    str(rmq / "bin" / "start-broker.sh"),
                    str(config.store_path_root_dir),
                    str(_free_broker_port()),
                    f"127.0.0.1:{_free_broker_port()}",  # a name server nobody listens on
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + JAVA_TIMEOUT
            while broker.poll() is None and time.monotonic() < deadline:
                if "boot success" in log.read_text(errors="replace"):
                    break
                time.sleep(0.2)
            text = log.read_text(errors="replace")
            assert "boot success" not in text, "the broker started on a store being written"
            assert broker.poll() is not None, f"the broker neither failed nor booted in {JAVA_TIMEOUT} s"
            assert broker.returncode != 0
            assert "Lock failed,MQ already started" in text
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait()
        assert len(_kernel_locks_on(config.store_path_root_dir / "lock")) == 1
