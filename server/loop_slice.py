"""A short scheduling slice for the event loop's thread: how soon a request gets the core back.

All requests wait on the one event-loop thread, which sleeps between them. When a request arrives
while another process is running on the same core, Linux's fair scheduler (EEVDF, 6.6 and later)
lets the woken thread take the core at once only if its virtual deadline - where it is plus its
slice - comes before the running task's, and it protects a running task for the shortest slice
queued. With the default slice (0.7-3 ms, scaled by the core count) a lone SEND that arrives while a
busy neighbour runs can wait for the rest of the neighbour's slice: on a shared core, that wait and
not the server's own work was the end-to-end row's tail (issue 33; ``benchmarks/loop_turns.py``
measured the loop's thread runnable but waiting for its core for over a second in 17 s).

Since Linux 6.12 a task may ask for a slice of its own (``sched_setattr`` with ``sched_runtime`` for
SCHED_OTHER, which the kernel clamps to 0.1-100 ms; no privilege needed). A short one gives the loop's
thread an earlier deadline when it wakes, so it preempts sooner, while its share of the CPU (its
weight, its nice value) is unchanged: a thread that keeps running just gets preempted in shorter
turns. The thread's policy and nice value are kept as they are; a real-time thread is left alone.

Elsewhere (another OS or architecture, a kernel that ignores the field, a filter refusing the call)
nothing changes: ``request_slice`` says False and the server runs with the kernel's default.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import struct
import sys

log = logging.getLogger(__name__)

#: What ``serve`` asks for unless told otherwise: 0, the kernel's own slice. 100 µs measured 0.91x the
#: e2e p99 in five pairs of a probe but not better on the wire against main (BENCHMARKS.md, h36):
#: a request longer than a short slice can also be preempted part way on a busy core. The kernel's
#: bounds for a slice asked for (µs):
DEFAULT_SLICE_US = 0
MIN_SLICE_US = 100
MAX_SLICE_US = 100_000

#: ``sched_setattr`` / ``sched_getattr`` system call numbers, by machine.
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
#: ``struct sched_attr`` (SCHED_ATTR_SIZE_VER1): size, policy, flags, nice, priority, runtime,
#: deadline, period, util_min, util_max.
_ATTR = struct.Struct("IIQiIQQQII")
#: The policies the fair scheduler runs (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE).
_FAIR_POLICIES = (0, 3, 5)


def _calls() -> tuple[ctypes.CDLL, int, int] | None:
    if not sys.platform.startswith("linux"):
        return None
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return None
    return ctypes.CDLL(None, use_errno=True), numbers[0], numbers[1]


def _get_attr(libc: ctypes.CDLL, get_call: int, tid: int = 0) -> tuple[int, ...] | None:
    """Thread ``tid``'s ``sched_attr`` (0: the calling thread's), or None when the kernel does not
    give it."""
    buffer = ctypes.create_string_buffer(_ATTR.size)
    if libc.syscall(get_call, tid, buffer, _ATTR.size, 0) != 0:
        return None
    return _ATTR.unpack(buffer.raw)


def current_slice_us(tid: int = 0) -> int | None:
    """Thread ``tid``'s scheduling slice in µs (0: the calling thread's; ``sched_getattr``'s
    ``sched_runtime`` for a fair policy), or None where it cannot be read."""
    calls = _calls()
    if calls is None:
        return None
    attr = _get_attr(calls[0], calls[2], tid)
    if attr is None or attr[1] not in _FAIR_POLICIES or attr[5] == 0:
        return None
    return attr[5] // 1000


def request_slice(slice_us: int) -> bool:
    """Ask for a ``slice_us`` µs scheduling slice for the calling thread, keeping its policy and
    nice value. True when the kernel took it; False where it cannot be asked (see the module's
    docstring), which is not an error. ``ValueError`` outside the kernel's 100-100,000 µs."""
    if not MIN_SLICE_US <= slice_us <= MAX_SLICE_US:
        raise ValueError(f"a scheduling slice is {MIN_SLICE_US}-{MAX_SLICE_US} µs, not {slice_us}")
    calls = _calls()
    if calls is None:
        return False
    libc, set_call, get_call = calls
    attr = _get_attr(libc, get_call)
    if attr is None or attr[1] not in _FAIR_POLICIES:
        return False  # unreadable, or a real-time or deadline thread: not ours to change
    _, policy, _, nice, _, _, _, _, _, _ = attr
    wanted = _ATTR.pack(_ATTR.size, policy, 0, nice, 0, slice_us * 1000, 0, 0, 0, 0)
    if libc.syscall(set_call, 0, ctypes.create_string_buffer(wanted, _ATTR.size), 0) != 0:
        error = ctypes.get_errno()
        log.debug("the loop thread keeps the kernel's slice: sched_setattr failed (%s)", os.strerror(error))
        return False
    return current_slice_us() == slice_us
