"""The three facts of a file the store's per-put checks read: inode, link count and size.

A lone SEND's settle asks the operating system three times whether a file it writes through is still
the file it was (``StoreWriter._check_not_cut`` and ``CommitLog._written_file_unchanged`` of the
CommitLog file, ``IndexService.audit`` of the index file being written). Each asked ``os.fstat`` or
``os.stat``, whose ``stat_result`` (ten fields, three times as float and integer nanoseconds) cost
the interpreter about 4,000 instructions to build beside the system call itself: 4% of a lone
SEND's instructions for three numbers. These give only the numbers, from the same system call;
the checks that read them are unchanged.

``fd_facts`` and ``path_facts`` here are the pure-Python references; the compiled twins
(``_file_facts_fast.c``) make the same call and raise the same ``OSError`` (its subclass by errno,
the path named), and replace them unless ``RMQ_PURE_PYTHON`` is set
(``tests/store/platform/test_file_facts.py`` holds them to each other).
"""

from __future__ import annotations

import os

from protocol.accel import load


def fd_facts(fd: int) -> tuple[int, int, int]:
    """(inode, link count, size) of the file open as ``fd`` (``fstat``)."""
    st = os.fstat(fd)
    return st.st_ino, st.st_nlink, st.st_size


def path_facts(path: str | os.PathLike[str]) -> tuple[int, int, int]:
    """(inode, link count, size) of the file at ``path``, links followed (``stat``)."""
    st = os.stat(path)
    return st.st_ino, st.st_nlink, st.st_size


#: The pure-Python references under their own names (the tests compare them with the compiled twins).
fd_facts_reference = fd_facts
path_facts_reference = path_facts

_fast = load("store.platform._file_facts_fast")
if _fast is not None:
    fd_facts = _fast.fd_facts  # the compiled twins of the references above
    path_facts = _fast.path_facts
