"""A store's data files as bytes, for comparing two stores that should hold the same records."""

from __future__ import annotations

from pathlib import Path


def data_files(root: Path) -> dict[str, bytes]:
    """Every data file of the store: the CommitLog, the consume queues, the index files (named by
    the wall clock at their creation, so by their order here). Config, lock, abort and checkpoint
    files are left out: they say when, not what."""
    files = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.parent.name not in ("config", "index")
        and p.name not in ("lock", "abort", "checkpoint")
    }
    for i, p in enumerate(sorted((root / "index").iterdir())):
        files[f"index #{i}"] = p.read_bytes()
    return files
