"""A full disk under the consume queues' writes, for the Python path and the compiled one alike.

The Python path writes with ``os.pwrite`` (patched here); the compiled ``append_entries`` writes
without it, so its test fault (``_set_fault``) holds the room left while the disk is full and the
Python writes draw from that same room: a full disk falls at the same byte whichever path wrote."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest

import store.consumequeue.builder as builder_module
from store.consumequeue import consume_queue_build
from store.consumequeue.builder import RESUME_MARK

_FAST = consume_queue_build._fast


class FullDisk:
    """Consume-queue ``pwrite``s take ``room`` more bytes, then a short write, then ENOSPC (the build
    mark's writes and zeros undoing a part written are let through: their blocks exist)."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.real = os.pwrite
        self.fast = _FAST if builder_module.append_entries is not None else None
        if self.fast is not None:
            self.fast._set_fault(room, False)

    def free(self) -> None:
        """The disk has room again (for the compiled writes; the caller puts ``os.pwrite`` back)."""
        if self.fast is not None:
            self.fast._set_fault(-1, False)
            self.fast = None

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if "consumequeue" not in path or path.endswith(RESUME_MARK) or not any(data):
            return self.real(fd, data, offset)
        if self.fast is not None:
            self.room = self.fast._set_fault(-1, False)
        try:
            if self.room <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = self.real(fd, bytes(data)[: self.room], offset)
            self.room -= n
            return n
        finally:
            if self.fast is not None:
                self.fast._set_fault(self.room, False)


def full_disk_while(monkeypatch: pytest.MonkeyPatch, room: int) -> Iterator[FullDisk]:
    """The disk full (``room`` bytes left) until the generator is closed: for a fixture's body."""
    disk = FullDisk(room)
    monkeypatch.setattr(os, "pwrite", disk.pwrite)
    try:
        yield disk
    finally:
        monkeypatch.setattr(os, "pwrite", disk.real)
        disk.free()
