"""Survive a mapped file cut under us: the SIGBUS guard, and how the store learns it fired.

The store reads its files through ``mmap``. Another process cutting a mapped file (a broker's
``truncateDirtyFiles``, a slave reset, ``truncate``, ``cp``/``>`` replacing it) or a disk error on a
page makes the next read of a page past the end raise SIGBUS, which kills the process. The size
checks of ``store.commitlog`` and ``store.index_file`` (the safe-length contract) keep reads inside
the file as it was a moment before; under load the server is nearly always between such a check
and its read, so a cut can still land in that window. ``store._sigbus_guard`` (C, built by
``setup.py`` like the accelerators) closes it: its handler maps a page of zeros over the faulting
page, so the read sees zeros (no record or index check accepts them) instead of killing the process,
and counts the faults. ``fault_count()`` moving tells ``CommitLog.refresh`` and
``IndexService.refresh`` to remap every file: the zero pages are ours, not the file's.

Without a C compiler the guard is absent and the size checks alone protect reads (one INFO line says
so: the server works, only that narrow window stays open, so it is not a warning that tests or
operators must silence). ``RMQ_PURE_PYTHON`` does not turn the guard off: it has no pure-Python twin.
"""

from __future__ import annotations

import importlib
import logging
import threading

log = logging.getLogger("store.sigbus")

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
                module = importlib.import_module("store._sigbus_guard")
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
