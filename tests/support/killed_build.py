"""A consume-queue build killed in the middle of its writes, for the tests of what the next build
does with what it left (``store/consumequeue/builder.py``'s mark and resume point)."""

from __future__ import annotations

import os

import pytest

import store.consumequeue.builder as builder_module
from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder


class Killed(Exception):
    """Stands for the kill: raised from inside the build's write."""


def build_killed_after(config: StoreConfig, monkeypatch: pytest.MonkeyPatch, n_bytes: int) -> None:
    """One ``run_once`` of a builder over ``config`` killed after ``n_bytes`` bytes of its writes: the
    write that crosses them is torn at that byte and left so (a kill splits a write at a page), and
    nothing after it is written. The builder's files are closed as the process's end would close them."""
    real = builder_module._write_all
    left = {"n": n_bytes}

    def write_all(fd: int, data: bytes, at: int) -> None:
        if len(data) > left["n"]:
            os.pwrite(fd, bytes(data[: left["n"]]), at)
            raise Killed
        left["n"] -= len(data)
        real(fd, data, at)

    monkeypatch.setattr(builder_module, "_write_all", write_all)
    builder = ConsumeQueueBuilder(config)
    with pytest.raises(Killed):
        builder.run_once()
    monkeypatch.setattr(builder_module, "_write_all", real)
    for queue in builder._queues.values():  # looked at inside on purpose: a kill closes them
        queue.close_fd()
