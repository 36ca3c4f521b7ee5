"""The compiled file facts (``store/platform/_file_facts_fast.c``) against their pure-Python references
(``store.platform.file_facts``): the same (inode, link count, size) for every state the store's checks
tell apart (whole, cut, grown, unlinked, replaced by a rename, hard-linked), and the same errors.

The compiled module is imported directly, so these compare the twins in either run of the suite
(compiled or ``RMQ_PURE_PYTHON=1``); the store's checks that read the facts are the cut and replaced
file tests (``tests/server/broker/test_append_settle.py``, ``test_settle_fixed_costs.py``,
``tests/store/write``), which run on whichever twin the run loads."""

from __future__ import annotations

import errno
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from store.platform import file_facts


def _fast() -> ModuleType:
    try:
        return importlib.import_module("store.platform._file_facts_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


@pytest.fixture
def fd_of(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"r" * 4096)
    fd = os.open(path, os.O_RDWR)
    try:
        yield path, fd
    finally:
        os.close(fd)


def _both(path: Path, fd: int) -> None:
    fast = _fast()
    expected = os.fstat(fd)
    assert file_facts.fd_facts_reference(fd) == (expected.st_ino, expected.st_nlink, expected.st_size)
    assert fast.fd_facts(fd) == file_facts.fd_facts_reference(fd)
    if path.exists():
        at_path = os.stat(path)
        assert file_facts.path_facts_reference(path) == (at_path.st_ino, at_path.st_nlink, at_path.st_size)
        assert fast.path_facts(path) == file_facts.path_facts_reference(path)
        assert fast.path_facts(str(path)) == file_facts.path_facts_reference(str(path))


def test_the_twins_agree_on_every_state_the_checks_tell_apart(fd_of: tuple[Path, int]) -> None:
    path, fd = fd_of
    _both(path, fd)  # whole
    os.truncate(path, 1000)  # cut under the writer
    _both(path, fd)
    assert _fast().fd_facts(fd)[2] == 1000
    os.truncate(path, 8192)  # grown
    _both(path, fd)
    os.link(path, path.with_name("other"))  # two names
    _both(path, fd)
    assert _fast().fd_facts(fd)[1] == 2
    spare = path.with_name("spare")
    spare.write_bytes(b"s" * 4096)
    os.replace(spare, path)  # replaced by a rename: the descriptor's inode has one name left
    _both(path, fd)
    assert _fast().path_facts(path)[0] != _fast().fd_facts(fd)[0]
    path.with_name("other").unlink()
    path.unlink()  # deleted: still open, no name at all
    _both(path, fd)
    assert _fast().fd_facts(fd)[1] == 0


def test_the_twins_raise_the_same_errors(tmp_path: Path) -> None:
    fast = _fast()
    for fn in (fast.fd_facts, file_facts.fd_facts_reference):
        with pytest.raises(OSError) as bad:
            fn(-1)
        assert bad.value.errno == errno.EBADF
    missing = tmp_path / "gone" / "00000000000000000000"
    for fn in (fast.path_facts, file_facts.path_facts_reference):
        with pytest.raises(FileNotFoundError) as gone:
            fn(missing)
        assert gone.value.filename == str(missing)  # os.stat names the path as a str
    (tmp_path / "plain").write_bytes(b"")
    through_file = tmp_path / "plain" / "x"
    for fn in (fast.path_facts, file_facts.path_facts_reference):
        with pytest.raises(NotADirectoryError):
            fn(through_file)
    for fn in (fast.fd_facts, file_facts.fd_facts_reference):
        with pytest.raises((TypeError, OverflowError)):
            fn(2**40)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            fn("3")  # type: ignore[arg-type]


def test_the_store_loads_the_compiled_twins_unless_pure_python_is_asked() -> None:
    from protocol.accel import pure_python

    fast = _fast()
    if pure_python():
        assert file_facts.fd_facts is file_facts.fd_facts_reference
    else:
        assert file_facts.fd_facts is fast.fd_facts
        assert file_facts.path_facts is fast.path_facts
