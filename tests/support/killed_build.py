"""A consume-queue build killed in the middle of its writes, for the tests of what the next build
does with what it left (``store/consumequeue/builder.py``'s mark and resume point).

The kill counts the bytes of every write of the build, the Python path's (``_write_all``) and the
compiled ``append_entries``' (its test fault, ``_set_fault``, which holds the one budget both draw
from), so a kill point falls at the same byte whichever path wrote it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

import store.consumequeue.builder as builder_module
from store.config.store_config import StoreConfig
from store.consumequeue import consume_queue_build
from store.consumequeue.builder import ConsumeQueueBuilder


class Killed(Exception):
    """Stands for the kill: raised from inside the build's write."""


_FAST = consume_queue_build._fast
#: What the kill raises: ours from the Python path's writes, the compiled module's from its own.
KILLED: tuple[type[BaseException], ...] = (Killed,) if _FAST is None else (Killed, _FAST.Killed)


@contextlib.contextmanager
def killed_after(monkeypatch: pytest.MonkeyPatch, n_bytes: int) -> Iterator[None]:
    """While inside, the consume-queue writes die after ``n_bytes`` bytes: the write that crosses
    them is torn at that byte and ``Killed`` (or the compiled module's) raised from it."""
    real = builder_module._write_all
    fast_on = _FAST is not None and builder_module.append_entries is not None
    left = {"n": n_bytes}

    def write_all(fd: int, data: bytes, at: int) -> None:
        if fast_on:
            left["n"] = _FAST._set_fault(-1, False)  # the budget the compiled writes left
        try:
            if len(data) > left["n"]:
                os.pwrite(fd, bytes(data[: left["n"]]), at)
                left["n"] = 0
                raise Killed
            left["n"] -= len(data)
            real(fd, data, at)
        finally:
            if fast_on:
                _FAST._set_fault(left["n"], True)

    monkeypatch.setattr(builder_module, "_write_all", write_all)
    if fast_on:
        _FAST._set_fault(n_bytes, True)
    try:
        yield
    finally:
        if fast_on:
            _FAST._set_fault(-1, False)
        monkeypatch.setattr(builder_module, "_write_all", real)


def build_killed_after(config: StoreConfig, monkeypatch: pytest.MonkeyPatch, n_bytes: int) -> None:
    """One ``run_once`` of a builder over ``config`` killed after ``n_bytes`` bytes of its writes: the
    write that crosses them is torn at that byte and left so (a kill splits a write at a page), and
    nothing after it is written. The builder's files are closed as the process's end would close them."""
    builder = ConsumeQueueBuilder(config)
    with killed_after(monkeypatch, n_bytes), pytest.raises(KILLED):
        builder.run_once()
    for queue in builder._queues.values():  # looked at inside on purpose: a kill closes them
        queue.close_fd()
