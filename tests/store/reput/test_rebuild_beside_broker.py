"""``rebuild-index`` beside a running broker: refused when the broker maintains the index (it has the
IndexFiles mapped: a swapped-in index would receive none of its later keys, and they would be lost
with the files moved aside), allowed when it does not (``messageIndexEnable=false``: maps none).

The "broker" is a child process doing what a 4.9.x broker does to be seen: a POSIX lock on byte 0
of ``<storeRoot>/lock`` (``FileChannel.tryLock``) and, when it indexes, a map of each IndexFile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clients.cli import main
from tests.support.gap_damage import copy_store

BROKER = """
import fcntl, mmap, os, sys
root, mode = sys.argv[1], sys.argv[2]
lock = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT)
fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
held = []
for top in {"index": ["index"], "cq": ["consumequeue"]}.get(mode, []):
    for dirpath, _dirs, names in os.walk(os.path.join(root, top)):
        for name in sorted(names):
            with open(os.path.join(dirpath, name), "r+b") as fh:
                held.append(mmap.mmap(fh.fileno(), 0))
open(os.path.join(root, "abort"), "w").close()
print("ready", flush=True)
sys.stdin.read()
"""


def _broker(root: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BROKER, str(root), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _index_state(root: Path) -> tuple[int, list[tuple[str, bytes]]]:
    index = root / "index"
    return index.stat().st_ino, [(p.name, p.read_bytes()) for p in sorted(index.iterdir())]


@pytest.mark.parametrize("follow", [False, True])
def test_refused_while_a_broker_that_indexes_runs(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], follow: bool
) -> None:
    root = tmp_path / "store"
    copy_store(stores_dir, root)
    before = _index_state(root)
    broker = _broker(root, "index")
    try:
        code = main(["rebuild-index", "--store", str(root), *(["--follow"] if follow else [])])
    finally:
        broker.communicate("", timeout=60)
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"pid {broker.pid}" in err and f"maintains {root / 'index'}" in err
    assert "nothing was replaced" in err
    assert _index_state(root) == before  # the very same directory and bytes the broker writes


def test_allowed_beside_a_broker_that_does_not_index(stores_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    copy_store(stores_dir, root)
    broker = _broker(root, "none")
    try:
        code = main(["rebuild-index", "--store", str(root), "--only", "index"])
    finally:
        broker.communicate("", timeout=60)
    assert code == 0


def test_serve_build_index_beside_a_broker_that_indexes_serves_its_index_read_only(
    stores_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``serve --build-index`` would be a second writer of the broker's IndexFiles: it serves them."""
    from store.message_store import MessageStore

    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    before = _index_state(root)
    broker = _broker(root, "index")
    try:
        with MessageStore.open(config, build_index=True) as store:
            assert store._builder is None
            # 18: the messages of TopicB keyed k-49 in java-4.9.7-a.expected.json
            assert len(store.query_message("TopicB", "k-49", 64, 0, 2**63 - 1).buffers) == 18
    finally:
        broker.communicate("", timeout=60)
    assert any("maintains it" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    assert _index_state(root) == before


def test_consume_queues_refused_beside_any_running_broker(
    stores_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every broker writes its consume queues (``messageIndexEnable`` or not): not rebuilt under it."""
    root = tmp_path / "store"
    copy_store(stores_dir, root)
    cq = root / "consumequeue"
    before = sorted((p.relative_to(cq), p.read_bytes()) for p in cq.rglob("*") if p.is_file())
    broker = _broker(root, "cq")
    try:
        code = main(["rebuild-index", "--store", str(root), "--only", "consumequeue"])
    finally:
        broker.communicate("", timeout=60)
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"maintains {cq}" in err
    assert sorted((p.relative_to(cq), p.read_bytes()) for p in cq.rglob("*") if p.is_file()) == before


def test_serve_build_index_beside_a_broker_that_does_not_index_builds_no_consume_queues(
    stores_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker with messageIndexEnable=false still writes its consume queues: ``--build-index``
    indexes (nobody else does) but leaves the queues to the broker."""
    from store.message_store import MessageStore

    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    broker = _broker(root, "cq")
    try:
        with MessageStore.open(config, build_index=True) as store:
            assert store._builder is not None and store._cq_builder is None
    finally:
        broker.communicate("", timeout=60)
    assert any("not building consume queues" in r.getMessage() for r in caplog.records)
