"""The golden data is never written by a test: a snapshot of ``tests/golden`` taken when the session
starts, compared when it ends.

Before the data moved into the repository it sat in a folder that CI lays read-only, so a test that
wrote into it failed there. In a checkout the files are writable, and a test that opened a golden store
in place (a broker's ``lock`` or ``abort``, a rebuilt index, a consumer offset) would change the
expectations of every later run without failing. Size and modification time of every file, and the set
of files, catch each of those; the check costs a ``stat`` per file (about 750).
"""

from __future__ import annotations

from pathlib import Path

Snapshot = dict[str, tuple[int, int]]


def snapshot(root: Path) -> Snapshot:
    """Every file under ``root`` (relative path) with its size and modification time in ns."""
    out: Snapshot = {}
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            st = path.stat()
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What happened between two snapshots, one line per file, sorted; empty when nothing did."""
    lines = [f"added: {name}" for name in after.keys() - before.keys()]
    lines += [f"removed: {name}" for name in before.keys() - after.keys()]
    lines += [f"modified: {name}" for name in before.keys() & after.keys() if before[name] != after[name]]
    return sorted(lines)
