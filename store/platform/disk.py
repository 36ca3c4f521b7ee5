"""How full the disk under a store directory is, as the broker measures it for its answers.

``UtilAll.getDiskPartitionSpaceUsedPercent``: used = total - free, over used + usable (the space an
unprivileged writer may still take, ``f_bavail``), rounded up to a hundredth; -1 for a path that does
not exist or cannot be measured. The broker puts it in its "disk is full" answer
(``SendMessageProcessor.diskUtil``).
"""

from __future__ import annotations

import os


def disk_used_ratio(path: str | os.PathLike[str]) -> float:
    """The used share of the file system holding ``path`` (0.0-1.0, two decimals), or -1.0."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0  # Java's division by zero, caught: -1
    rounded = used * 100 // entire + (1 if used * 100 % entire else 0)
    return rounded / 100.0
