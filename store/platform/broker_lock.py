"""Who holds a store's ``lock``: a broker, a writer of ours in another process, or this process.

A 4.9.x broker opens ``<storeRoot>/lock`` and takes ``FileChannel.tryLock(0, 1, false)`` on it at
start (``DefaultMessageStore.start``), holding it until it exits; on Linux that is a POSIX record
lock (``fcntl F_SETLK``) on byte 0. ``F_GETLK`` reports the holder without taking the lock, so asking
never stops a broker that starts at the same moment (a test lock would make its ``tryLock`` fail).
That tells "``abort`` exists because a broker is running" (normal) from "``abort`` exists because the
last broker died" (a crash to repair).

Our writer (``hold_store_lock``) locks the same byte with an open file description lock
(``F_OFD_SETLK``) instead of a POSIX one. A POSIX lock belongs to the process and is dropped when the
process closes *any* descriptor of the file: the check above, run by the writer's own query side,
used to open and close ``lock`` and so silently released the writer's lock, letting a second writer
and the Java broker start on a store being written. An OFD lock belongs to its own descriptor, lives
until that descriptor is closed, and conflicts with the broker's POSIX lock and with any other OFD
lock, even one taken in the same process. ``/proc/locks`` lists it as ``OFDLCK`` with pid -1, so the
holder's pid is found through ``/proc/PID/fdinfo``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path

#: ``struct flock`` on Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t), padding.
_FLOCK = struct.Struct("@hhqqi4x")
#: The range the broker locks (``tryLock(0, 1, false)``): byte 0, one byte.
_LOCK_START, _LOCK_LEN = 0, 1
#: ``F_OFD_SETLK`` / ``F_OFD_GETLK`` (Linux 3.15+; the fcntl module has them from Python 3.9).
_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
#: The pid ``F_GETLK`` and ``/proc/locks`` report for an open file description lock.
OFD_PID = -1

#: Lock files this process holds (``(st_dev, st_ino)`` -> the descriptor holding it).
_HELD: dict[tuple[int, int], int] = {}


class StoreLockBusy(OSError):
    """Another open file description (a broker, or another writer, maybe in this process) holds ``lock``."""

    def __init__(self, path: Path, holder: int | None, in_this_process: bool) -> None:
        self.path = path
        self.holder = holder
        self.in_this_process = in_this_process
        if in_this_process:
            who = "another writer in this process"
        elif holder is None or holder == OFD_PID:
            who = "another process (a running broker or another writer)"
        else:
            who = f"process {holder} (a running broker or another writer)"
        super().__init__(errno.EAGAIN, f"{path} is locked by {who}")


def hold_store_lock(store_root: str | os.PathLike[str]) -> int:
    """Lock ``<storeRoot>/lock`` for as long as the returned descriptor stays open, or ``StoreLockBusy``.

    The byte the broker locks, with an open file description lock: nothing else this process does
    with the file (opening and closing it to ask who holds it) can release it.
    """
    path = Path(store_root) / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        in_this_process = key in _HELD
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LOCK_START, _LOCK_LEN, 0))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = None if in_this_process else _holder_of(fd, st)
            raise StoreLockBusy(path, holder, in_this_process) from None
    except BaseException:
        os.close(fd)
        raise
    _HELD[key] = fd
    return fd


def release_store_lock(fd: int) -> None:
    """Release a lock ``hold_store_lock`` took (closing its descriptor is what releases it)."""
    for key, held in list(_HELD.items()):
        if held == fd:
            del _HELD[key]
    os.close(fd)


def held_here(store_root: str | os.PathLike[str]) -> bool:
    """Does a writer in this process hold ``<storeRoot>/lock``?"""
    try:
        st = os.stat(Path(store_root) / "lock")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in _HELD


def broker_lock_holder(store_root: str | os.PathLike[str]) -> int | None:
    """The pid of another process holding ``<storeRoot>/lock`` (a running broker, or a writer of ours),
    or None (no lock, no file, no answer, or the holder is this process's own writer).

    A writer in this process is not "a broker running": its own query side asks this while it opens,
    and must treat an ``abort`` marker as a crash to repair. It is answered without opening the file.
    A holder whose process cannot be found (an OFD lock of a process whose ``/proc`` we may not
    read) is reported as ``OFD_PID`` (-1).
    """
    if held_here(store_root):
        return None
    try:
        fd = os.open(Path(store_root) / "lock", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        return _holder_of(fd, st)
    except OSError:
        return None
    finally:
        # Closing drops POSIX locks of this process on the file; this process takes none (its
        # writer's lock is an OFD lock, which only closing its own descriptor releases).
        os.close(fd)


def _holder_of(fd: int, st: os.stat_result) -> int | None:
    """The pid ``F_GETLK`` reports for byte 0 of the file open as ``fd``, an OFD holder's looked up."""
    probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LOCK_START, _LOCK_LEN, 0)
    try:
        l_type, _whence, _start, _len, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    if l_type == fcntl.F_UNLCK:
        return None
    if pid == OFD_PID or pid <= 0:
        found = _ofd_lock_owner(st)
        return found if found is not None else OFD_PID
    return pid


def _ofd_lock_owner(st: os.stat_result) -> int | None:
    """The process with a descriptor of this file carrying an OFD lock (``/proc/PID/fdinfo``'s ``lock:``
    lines), or None. Only descriptors of the same file are read, so this costs a ``readlink`` per
    descriptor on the machine, and only when an OFD lock is held."""
    me = os.getpid()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in fds:
            try:
                target = os.stat(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if (target.st_dev, target.st_ino) != (st.st_dev, st.st_ino):
                continue
            try:
                with open(f"/proc/{pid}/fdinfo/{name}", encoding="ascii", errors="replace") as fh:
                    info = fh.read()
            except OSError:
                continue
            # A descriptor's fdinfo lists the locks taken through it, on its own file.
            if any(line.startswith("lock:") and "OFDLCK" in line for line in info.splitlines()):
                return pid
    return None


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
