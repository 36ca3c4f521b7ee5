"""The SIGBUS guard (``store.sigbus``): a read of a mapped page cut off by another process reads
zeros and is counted, instead of killing the process. Run in child processes: without the guard the
read kills whatever process makes it (status -7)."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("store._sigbus_guard", reason="the SIGBUS guard is not built (no C compiler)")

CHILD = """
import mmap, os, sys
from store import sigbus
path = sys.argv[1]
with open(path, "wb") as fh:
    fh.write(b"x" * 65536)
fd = os.open(path, os.O_RDONLY)
mm = mmap.mmap(fd, 65536, access=mmap.ACCESS_READ)
os.close(fd)
if sys.argv[2] == "guard":
    assert sigbus.install()
os.truncate(path, 100)  # another process would do this; the kernel does not care who
tail = mm[8192:8200]  # two pages past the new end
print(tail == bytes(8), mm[:4] == b"xxxx", sigbus.fault_count())
"""


def _child(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "cut"), mode],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),  # no core file
    )


def test_a_read_past_a_cut_reads_zeros_and_is_counted(tmp_path: Path) -> None:
    run = _child(tmp_path, "guard")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "1"]


def test_without_the_guard_the_same_read_kills_the_process(tmp_path: Path) -> None:
    """What the guard is for (and what ``serve`` did before it): status -7, SIGBUS."""
    run = _child(tmp_path, "none")
    assert run.returncode == -7


REMAP_CHILD = """
import os, sys
from store import sigbus
from store.commitlog import CommitLog
directory, offset, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = os.path.join(directory, f"{4194304:020d}")
data = open(path, "rb").read()
log = CommitLog(directory, 262144)
os.truncate(path, 100)  # cut under the map, then a read that skips the size check faults
assert log.files[-1].view()[offset - 4194304] == 0 and sigbus.fault_count() == 1
with open(path, "r+b") as fh:
    fh.write(data)  # whole again, the same size as mapped: only the fault count says remap
log.refresh()
record = log.read_record(offset)
print(record is not None and len(record) == size, log.max_offset)
"""


def test_refresh_remaps_the_pages_the_guard_zeroed(stores_dir: Path, tmp_path: Path) -> None:
    expected = json.loads((stores_dir / "java-4.9.7-a.expected.json").read_text(encoding="utf-8"))
    last = max(expected["messages"], key=lambda m: m["commitLogOffset"])
    shutil.copytree(stores_dir / "java-4.9.7-a" / "commitlog", tmp_path / "commitlog")
    for p in (tmp_path / "commitlog").iterdir():
        p.chmod(0o644)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            REMAP_CHILD,
            str(tmp_path / "commitlog"),
            str(last["commitLogOffset"]),
            str(last["size"]),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "4330405"]
