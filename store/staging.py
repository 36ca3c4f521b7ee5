"""Write output beside its destination, then swap it in: a failed job never leaves half an index.

A rebuild that dies (out of memory, corrupt record, killed) must leave the previous index exactly as
it was. Output goes to a hidden sibling directory on the same filesystem; only when every file is
complete and flushed is the old directory renamed aside, the new one renamed into place and the old
one removed. Renames within one filesystem are atomic, so at every instant a reader sees either the
old index or the new one; if the process dies between the two renames, the old one survives whole
under its aside name (``.<name>.old-*`` beside it). The next job on the same destination puts it
back, and deletes the staging directories of jobs that were killed (their process is gone), which
would otherwise keep GiBs of half-written index files forever.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<tag>tmp|old)-(?P<pid>\d+)-\d+$")


def _sibling(target: Path, tag: str) -> Path:
    return target.parent / f".{target.name}.{tag}-{os.getpid()}-{time.monotonic_ns()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover_interrupted(target: Path) -> None:
    """Clean up after jobs on ``target`` that were killed: restore an old output moved aside whose
    replacement never arrived, delete unfinished staging. Leftovers of live processes are left alone.
    """
    try:
        names = sorted(os.listdir(target.parent))
    except FileNotFoundError:
        return
    for name in names:
        m = _LEFTOVER.match(name)
        if m is None or m["name"] != target.name or _pid_alive(int(m["pid"])):
            continue
        path = target.parent / name
        if m["tag"] == "old" and not os.path.lexists(target):
            log.warning("%s is missing after an interrupted job: restoring it from %s", target, path)
            os.replace(path, target)
        else:
            log.warning("removing %s, left by an interrupted job", path)
            _remove(path)


def fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` and the directory itself to disk."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` (a file or directory, possibly absent) with ``staging`` by renames."""
    aside: Path | None = None
    if target.exists():
        aside = _sibling(target, "old")
        os.replace(target, aside)
    try:
        os.replace(staging, target)
    except OSError:
        if aside is not None:
            os.replace(aside, target)
        raise
    if aside is not None:
        if aside.is_dir():
            shutil.rmtree(aside)
        else:
            aside.unlink()


@contextmanager
def staged_output(target: Path, *, directory: bool = True) -> Iterator[Path]:
    """Yield a staging path beside ``target``; swap it in if the block succeeds, delete it if not."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_interrupted(target)
    staging = _sibling(target, "tmp")
    if directory:
        staging.mkdir()
    try:
        yield staging
        if staging.is_dir():
            fsync_tree(staging)
        swap_in(staging, target)
    finally:
        if staging.exists():
            if staging.is_dir():
                shutil.rmtree(staging, ignore_errors=True)
            else:
                staging.unlink(missing_ok=True)
