"""Survive a mapped file cut under us: the SIGBUS guard, and how the store learns it fired.

The store reads its files through ``mmap``. Another process cutting a mapped file (a broker's
``truncateDirtyFiles``, a slave reset, ``truncate``, ``cp``/``>`` replacing it) or a disk error on a
page makes the next read of a page past the end raise SIGBUS, which kills the process. The size
checks of ``store.commitlog.mapped_files`` and ``store.index.index_file`` (the safe-length contract)
keep reads inside
the file as it was a moment before; under load the server is nearly always between such a check
and its read, so a cut can still land in that window. ``store.platform._sigbus_guard`` (C, built by
``setup.py`` like the accelerators) closes it: its handler maps a page of zeros over the faulting
page, so the read sees zeros (no record or index check accepts them) instead of killing the process,
and counts the faults. It does so only inside the maps the store registered with ``track``: a fault
anywhere else in the process (another library's mmap, a bug in C code) is not ours to turn into zeros
and kills the process as it would without the guard. ``fault_count()`` moving tells ``CommitLog.refresh`` and
``IndexService.refresh`` to remap every file: the zero pages are ours, not the file's.

Without a C compiler the guard is absent and the size checks alone protect reads (one INFO line says
so: the server works, only that narrow window stays open, so it is not a warning that tests or
operators must silence). ``RMQ_PURE_PYTHON`` does not turn the guard off: it has no pure-Python twin.
"""

from __future__ import annotations

import importlib
import logging
import threading
import weakref
from collections.abc import Callable

log = logging.getLogger("store.platform.sigbus")

_lock = threading.Lock()
_guard = None
_tried = False


def install() -> bool:
    """Install the guard once per process; True when it is active."""
    global _guard, _tried
    with _lock:
        if not _tried:
            _tried = True
            try:
                module = importlib.import_module("store.platform._sigbus_guard")
            except ImportError as exc:
                log.info(
                    "the SIGBUS guard is not built (%s): a store file cut while it is mapped can still "
                    "kill this process in the moment between a size check and a read (pip install -e . "
                    "with a C compiler builds it)",
                    exc,
                )
            else:
                module.install()
                _guard = module
        return _guard is not None


def fault_count() -> int:
    """How many reads of a cut (or unreadable) mapped page the guard has turned into zeros."""
    guard = _guard
    return guard.faults() if guard is not None else 0


def _untrack(slot: int) -> None:
    guard = _guard
    if guard is not None:
        guard.unregister(slot)


def nothing() -> None:
    """The release of a map the guard does not cover."""
    return None


def track(mm: object) -> Callable[[], None]:
    """Let the guard zero-fill faults inside ``mm`` (a store file's map); returns the release call.

    Call the release right after ``mm.close()`` succeeds; if the close fails (a view still holds the
    map) do not: the release then runs when the map is collected, which is when it is unmapped.
    """
    if not install():  # a map made before any CommitLog or IndexService installed it is guarded too
        return nothing
    guard = _guard
    assert guard is not None
    slot = guard.register(mm)
    if slot < 0:
        return nothing  # empty, or more maps than the guard has slots: the size checks still apply
    return weakref.finalize(mm, _untrack, slot)
