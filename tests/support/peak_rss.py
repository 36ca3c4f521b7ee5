"""This process's resident set and its peak, for tests that bound how much memory a walk keeps.

Linux only: ``/proc/self/status`` gives VmRSS and VmHWM, and writing 5 to ``/proc/self/clear_refs``
(Linux 4.0+) resets the peak to the current resident set, so a test measures one call's growth.
"""

from __future__ import annotations


def status_bytes(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``, ...) in bytes."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def reset_peak() -> bool:
    """Reset VmHWM to the current VmRSS; False when this kernel cannot (the caller skips)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return status_bytes("VmHWM") <= status_bytes("VmRSS") + (1 << 20)
