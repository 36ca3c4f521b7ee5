"""Write output beside its destination, then swap it in: a failed job never leaves half an index.

A rebuild that dies (out of memory, corrupt record, killed) must leave the previous index exactly as
it was. Output goes to a hidden sibling directory on the same filesystem; only when every file is
complete and flushed is the old directory renamed aside, the new one renamed into place and the old
one removed. Renames within one filesystem are atomic, so at every instant a reader sees either the
old index or the new one; if the process dies between the two renames, the old one survives whole
under its aside name (``.<name>.old-*`` beside it). The next job on the same destination puts it
back, and deletes the staging directories of jobs that were killed (their process is gone), which
would otherwise keep GiBs of half-written index files forever.

Once the new output is renamed into place the job has succeeded, whatever happens next: removing the
old copy is best effort (a read-only directory is made writable first, since it is ours to delete),
and a copy that still cannot be removed is reported by its path (``leftovers``), never raised as if
the swap had failed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
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


def _remove(path: Path) -> bool:
    """Delete ``path`` (a file or a tree); True when it is gone.

    A directory someone made read-only (``chmod a-w index``) cannot have its entries unlinked by its
    owner: its mode is opened up and the removal tried again, once per directory.
    """

    def open_up(_func: object, failed: str, _exc: object) -> None:
        parent = os.path.dirname(failed)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, os.stat(failed).st_mode | stat.S_IRWXU)
            shutil.rmtree(failed)
        else:
            os.unlink(failed)

    try:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, path.stat().st_mode | stat.S_IRWXU)
            shutil.rmtree(path, onerror=open_up)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        log.debug("cannot remove %s: %s", path, exc)
    return not os.path.lexists(path)


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
            if not _remove(path):
                log.warning("cannot remove %s: delete it by hand", path)


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


def swap_in(staging: Path, target: Path) -> Path | None:
    """Replace ``target`` (a file or directory, possibly absent) with ``staging`` by renames.

    Returns the old copy when it could not be removed afterwards (the swap itself succeeded).
    """
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
    if aside is not None and not _remove(aside):
        return aside
    return None


@contextmanager
def staged_output(
    target: Path, *, directory: bool = True, leftovers: list[Path] | None = None
) -> Iterator[Path]:
    """Yield a staging path beside ``target``; swap it in if the block succeeds, delete it if not.

    An old copy that cannot be removed after the swap is appended to ``leftovers`` (and logged).
    """
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
        left = swap_in(staging, target)
        if left is not None:
            if leftovers is None:
                log.warning("%s is in place, but its old copy could not be removed: %s is left", target, left)
            else:
                leftovers.append(left)
    finally:
        if os.path.lexists(staging):
            _remove(staging)
