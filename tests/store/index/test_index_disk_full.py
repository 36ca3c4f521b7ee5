"""IndexFiles on a full disk (issue 18, gaps item 1): no SIGBUS, no key lost.

IndexFiles are written through a shared map. A file the broker (and this builder) creates is sparse:
its pages get blocks only when first written, and on a full disk a store into such a page cannot be
backed, so the kernel kills the process with SIGBUS (the SIGBUS guard only turns *read* faults of a
cut file into zeros). The builder now reserves the blocks (``posix_fallocate``) of the header, the
slots and the entries it may write before it writes them, and a reservation the disk refuses is an
``IndexWriteError``: nothing is written, and indexing resumes from the same record once space returns.

The real cases run in a child process on a small tmpfs (a SIGBUS must not take pytest down); the
incremental reservation is checked by refusing ``posix_fallocate`` in this process.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig, index_file_size
from store.errors import IndexWriteError
from store.index import index_file
from store.message_store import MessageStore
from store.write.writer import StoreWriter
from tests.support.paths import REPO_ROOT

SLOTS = 64
ENTRIES = 4096
RECORDS = 20
KEYS_PER_RECORD = 150  # 20 x 150 = 3,000 entries: 60 KB, 15 pages of entries, one file


def _config(root: Path, **kw: object) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=256 * 1024,
        max_hash_slot_num=SLOTS,
        max_index_num=kw.pop("max_index_num", ENTRIES),  # type: ignore[arg-type]
        broker_ip1="127.0.0.1",
        **kw,
    )


def _keys(i: int) -> list[str]:
    return [f"k{i}-{j}" for j in range(KEYS_PER_RECORD)]


# The child: a store on the tmpfs at argv[1]; argv[2] says whether the index file exists before the
# disk fills ("before") or must be created on the full disk ("after"). Prints what happened as JSON.
_CHILD = r"""
import errno, json, os, sys
from pathlib import Path
from store.config.store_config import StoreConfig
from store.errors import IndexWriteError
from store.write.writer import StoreWriter

mnt, when = Path(sys.argv[1]), sys.argv[2]
config = StoreConfig.for_store(mnt / "store", mapped_file_size_commit_log=256 * 1024,
    max_hash_slot_num=%(slots)d, max_index_num=%(entries)d, broker_ip1="127.0.0.1")
out = {"refused": None}
with StoreWriter(config, clock=lambda: 1_000) as w:
    w.append("T", b"first", keys="k-first")
    if when == "before":
        w.index()  # the IndexFile is created while there is room
    for i in range(%(records)d):
        w.append("T", b"r%%d" %% i, keys=" ".join(f"k{i}-{j}" for j in range(%(per)d)))
    filler = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(filler, bytes(4096)) == 4096:
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(filler)
    try:
        w.index()  # the keys go into pages never written before, on a full disk
    except IndexWriteError as exc:
        out["refused"] = str(exc)
        out["index_files"] = sorted(os.listdir(config.index_dir)) if config.index_dir.exists() else []
    (mnt / "filler").unlink()
    w.index()
print(json.dumps(out))
"""


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, timeout=30
    )
    return done.returncode == 0


@pytest.mark.parametrize("when", ["before", "after"])
def test_indexing_on_a_full_tmpfs_neither_kills_the_process_nor_loses_a_key(
    tmp_path: Path, when: str
) -> None:
    """``before``: the IndexFile exists (created with room), its entry pages were never written;
    ``after``: the IndexFile must be created on the full disk. Before the fix the child died of
    SIGBUS (-7) in both; now ``before`` indexes every key at once (its blocks were reserved when it
    was created) and ``after`` is refused without an IndexFile left behind, then indexes every key
    once the filler is removed."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        child = _CHILD % {"slots": SLOTS, "entries": ENTRIES, "records": RECORDS, "per": KEYS_PER_RECORD}
        done = subprocess.run(
            [sys.executable, "-c", child, str(mnt), when],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"child exit {done.returncode}: {done.stderr[-2000:]}"
        out = json.loads(done.stdout.strip().splitlines()[-1])
        if when == "before":
            assert out["refused"] is None
        else:
            assert out["refused"] is not None and "No space left on device" in out["refused"]
            assert out["index_files"] == [], "a file whose blocks could not be reserved is removed"
        config = _config(mnt / "store")
        with MessageStore.open(config) as store:
            for key in ["k-first"] + [k for i in range(RECORDS) for k in _keys(i)[:: KEYS_PER_RECORD // 5]]:
                hits = store.query_message("T", key, 32, 0, 2**63 - 1).buffers
                assert len(hits) == 1, key
            files = sorted(config.index_dir.iterdir())
            assert len(files) == 1
            count = store.index.files[0].header.index_count
            assert count == 1 + 2 + RECORDS * (KEYS_PER_RECORD + 1)  # entry 0; first: key + uniq
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def test_reservation_grows_ahead_of_the_entries_and_a_refusal_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file bigger than one reservation step: blocks are reserved in steps ahead of the entries
    (never the whole 2 MB file for a few keys); when the disk refuses a step, ``index()`` raises
    ``IndexWriteError`` with no entry written past the reserved part, and the next ``index()`` once
    space returns puts every key exactly once."""
    entries = 100_000
    config = _config(tmp_path / "s", max_index_num=entries)
    size = index_file_size(SLOTS, entries)
    calls: list[tuple[int, int]] = []
    refuse = {"on": False}
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        if refuse["on"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        calls.append((offset, length))
        real(fd, offset, length)

    monkeypatch.setattr(index_file.os, "posix_fallocate", fallocate)
    monkeypatch.setattr(index_file, "RESERVE_STEP", 64 * 1024)
    with StoreWriter(config, clock=lambda: 1_000) as w:
        w.append("T", b"a", keys="a-0")
        w.index()
        (path,) = list(config.index_dir.iterdir())
        reserved = sum(n for _, n in calls)
        assert calls[0][0] == 0 and reserved < size // 4, "a few keys reserve a step, not the file"
        assert os.stat(path).st_blocks * 512 >= reserved
        refuse["on"] = True
        for i in range(RECORDS):
            w.append("T", b"r", keys=" ".join(_keys(i)))  # 3,020 keys: past the first 64 KiB step
        with pytest.raises(IndexWriteError, match="No space left on device"):
            w.index()
        with MessageStore.open(config) as store:
            count = store.index.files[0].read_header().index_count
        assert 40 + SLOTS * 4 + count * 20 <= reserved, "nothing written past the reserved blocks"
        refuse["on"] = False
        w.index()
    with MessageStore.open(config) as store:
        assert store.index.files[0].header.index_count == 1 + 2 + RECORDS * (KEYS_PER_RECORD + 1)
        for i in range(RECORDS):
            for key in _keys(i)[::50]:
                assert len(store.query_message("T", key, 32, 0, 2**63 - 1).buffers) == 1
