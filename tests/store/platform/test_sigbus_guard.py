"""The SIGBUS guard (``store.platform.sigbus``): a read of a mapped page cut off by another process reads
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

from tests.support.paths import REPO_ROOT

pytest.importorskip("store.platform._sigbus_guard", reason="the SIGBUS guard is not built (no C compiler)")

CHILD = """
import mmap, os, sys
from store.platform import sigbus
path = sys.argv[1]
with open(path, "wb") as fh:
    fh.write(b"x" * 65536)
fd = os.open(path, os.O_RDONLY)
mm = mmap.mmap(fd, 65536, access=mmap.ACCESS_READ)
os.close(fd)
if sys.argv[2] in ("guard", "untracked"):
    assert sigbus.install()
if sys.argv[2] == "guard":
    sigbus.track(mm)  # a store map; "untracked" is any other map in the process
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


def test_a_cut_under_a_map_the_store_did_not_register_still_kills_the_process(tmp_path: Path) -> None:
    """The guard hides faults only in the store's own maps: a fault in any other mapping (another
    library's mmap, a stray pointer in C code) must not silently read zeros."""
    run = _child(tmp_path, "untracked")
    assert run.returncode == -7, (run.returncode, run.stdout, run.stderr)


def test_a_released_store_map_is_no_longer_guarded(tmp_path: Path) -> None:
    """After the store unmaps a file its range may be reused by any mapping: the slot is freed."""
    code = CHILD.replace("sigbus.track(mm)", "sigbus.track(mm)(); mm2 = mm")
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cut"), "guard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    )
    assert run.returncode == -7, (run.returncode, run.stdout, run.stderr)


def test_without_the_guard_the_same_read_kills_the_process(tmp_path: Path) -> None:
    """What the guard is for (and what ``serve`` did before it): status -7, SIGBUS."""
    run = _child(tmp_path, "none")
    assert run.returncode == -7


REMAP_CHILD = """
import os, sys
from store.platform import sigbus
from store.commitlog.mapped_files import CommitLog
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


INDEX_CHILD = """
import os, sys
from store.platform import sigbus
from store.index.index_file import IndexFile
path, slots, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
f = IndexFile.open(path, slots, entries)  # the first map of this process: no CommitLog installed the guard
os.truncate(path, 0)  # `cp` or `>` over the file: O_TRUNC first
print(f.buffer[-8:] == bytes(8), sigbus.fault_count())
f.close()
"""


def test_an_index_file_map_is_guarded_even_when_it_is_the_first_map(stores_dir: Path, tmp_path: Path) -> None:
    """Index maps are registered with the guard (installing it if nothing did yet): a read of an
    index file cut to zero bytes reads zeros, where an unregistered map would kill the process."""
    source = sorted((stores_dir / "java-4.9.7-a" / "index").iterdir())[0]
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    conf = (stores_dir / "java-4.9.7-a.broker.conf").read_text(encoding="utf-8")
    settings = dict(
        line.split("=", 1) for line in conf.splitlines() if "=" in line and not line.startswith("#")
    )
    run = subprocess.run(
        [sys.executable, "-c", INDEX_CHILD, str(copy), settings["maxHashSlotNum"], settings["maxIndexNum"]],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    )
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.stdout.split() == ["True", "1"]
