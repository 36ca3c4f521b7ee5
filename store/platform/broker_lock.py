"""Is a broker running on this store now? Asked the way the broker itself would find out.

A 4.9.x broker opens ``<storeRoot>/lock`` and takes ``FileChannel.tryLock(0, 1, false)`` on it at
start (``DefaultMessageStore.start``), holding it until it exits; on Linux that is a POSIX record
lock (``fcntl F_SETLK``) on byte 0. ``F_GETLK`` reports the holder without taking the lock, so asking
never stops a broker that starts at the same moment (a test lock would make its ``tryLock`` fail).
That tells "``abort`` exists because a broker is running" (normal) from "``abort`` exists because the
last broker died" (a crash to repair).
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

#: ``struct flock`` on Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t), padding.
_FLOCK = struct.Struct("@hhqqi4x")


def broker_lock_holder(store_root: str | os.PathLike[str]) -> int | None:
    """The pid holding ``<storeRoot>/lock`` (a running broker), or None (no lock, no file, no answer)."""
    try:
        fd = os.open(Path(store_root) / "lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        l_type, _whence, _start, _len, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    if l_type == fcntl.F_UNLCK:
        return None
    return pid


def index_files_mapped_by(pid: int, index_dir: str | os.PathLike[str]) -> list[str] | None:
    """The files under ``index_dir`` that process ``pid`` has mapped, or None when that cannot be read.

    A broker with ``messageIndexEnable=true`` keeps every IndexFile of its store mapped (and writes
    the newest one); one with ``messageIndexEnable=false`` maps none. Its ``/proc/PID/maps`` tells the
    two apart whatever broker.conf this tool was given.
    """
    root = os.path.realpath(index_dir) + os.sep
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    mapped: set[str] = set()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(root):
            mapped.add(fields[5].removesuffix(" (deleted)"))
    return sorted(mapped)
