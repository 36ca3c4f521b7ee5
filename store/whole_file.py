"""Replacing a small file whole, one writer of a path at a time.

The config files (``config/*.json``), the delay offsets and the timer's delivery log are each
rewritten whole: the new content to ``<name>.tmp``, synced, then renamed over the file, so a crash
leaves the old content or the new one. That holds for one writer only. Two threads saving the same
path at once (the periodic offset flush still running when the stop saves the offsets again) open
the same ``.tmp``: each truncates the other's bytes, one rename moves the file away under the other
(``cannot write ... .tmp: No such file or directory``) or puts in place a file the other is still
writing, which a kill -9 then leaves torn. The broker's ``ConfigManager.persist`` is
``synchronized`` for the same reason. Here every replacement of a path holds that path's lock from
the first byte of its ``.tmp`` to the rename; one writer alone takes it uncontended (no extra cost
beside the write and fsync).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

#: One lock per path being replaced; an entry goes once no writer holds its lock any more, so
#: the table stays as small as the number of saves under way.
_LOCKS: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_LOCKS_GUARD = threading.Lock()


def path_lock(path: Path) -> threading.Lock:
    """The lock every writer of ``path`` (however spelt: it is made absolute) holds while replacing it."""
    key = os.path.abspath(path)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = threading.Lock()
            _LOCKS[key] = lock
        return lock


def replace_whole(path: Path, data: bytes, before_rename: Callable[[], None] | None = None) -> None:
    """``path`` replaced by ``data`` (synced) through ``<name>.tmp``, as the only writer of it in this
    process meanwhile; ``before_rename`` (e.g. keeping the old file as ``.bak``) runs under the same
    lock, after the new content is on disk and before the rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with path_lock(path):
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if before_rename is not None:
            before_rename()
        tmp.replace(path)
