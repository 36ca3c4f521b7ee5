"""The event loop's watchdog: a stall is measured and logged with the stack that held the loop."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path

import pytest

from server.loop_watchdog import LoopWatchdog


def hold_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a callback that never yields, as an O(topics^2) scrape did


async def test_a_stall_is_measured_and_its_stack_logged(caplog: pytest.LogCaptureFixture) -> None:
    dog = LoopWatchdog(interval=0.01, threshold=0.15)
    dog.start(asyncio.get_running_loop())
    try:
        await asyncio.sleep(0.05)
        assert dog.max_stall < 0.15
        with caplog.at_level(logging.WARNING, logger="server.loop_watchdog"):
            hold_the_loop_for(0.4)
            await asyncio.sleep(0.05)
    finally:
        dog.stop()
    assert 0.3 <= dog.max_stall < 1.0
    assert dog.stalls_over_threshold == 1
    assert dog.take_recent_max() == dog.max_stall
    assert dog.take_recent_max() < 0.15  # a new window
    [record] = [r for r in caplog.records if "event loop has been held" in r.getMessage()]
    assert "hold_the_loop_for" in record.getMessage()


def stall_holding_a_view_of(buffer: bytearray, seconds: float) -> int:
    view = memoryview(buffer)  # as the frame decoder's header holds a view of the connection's buffer
    time.sleep(seconds)
    return len(view)


async def test_a_logged_stall_leaves_no_view_of_the_loops_buffers_alive(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stack the watchdog logged must not outlive the log line: a frame object kept by its thread
    keeps that frame's locals, and a view of a connection's read buffer kept alive stops the buffer
    from being resized (``BufferError`` in ``data_received``: the connection dropped after a stall)."""
    buffer = bytearray(b"frame bytes")
    dog = LoopWatchdog(interval=0.01, threshold=0.1)
    dog.start(asyncio.get_running_loop())
    try:
        with caplog.at_level(logging.WARNING, logger="server.loop_watchdog"):
            stall_holding_a_view_of(buffer, 0.3)
            await asyncio.sleep(0.1)
        del buffer[:6]  # raises BufferError while a view of it is alive (the watchdog still runs)
    finally:
        dog.stop()
    assert buffer == b"bytes"
    [record] = [r for r in caplog.records if "event loop has been held" in r.getMessage()]
    assert "stall_holding_a_view_of" in record.getMessage()


def wakes_of(native_id: int) -> int:
    """How many times a thread of this process went to sleep (it woke as often), from the kernel."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc/self/task")
async def test_the_watchdog_thread_sleeps_while_the_loop_beats() -> None:
    """Issue 33: each wake of the watchdog's thread takes the GIL from the loop's, and a request in
    flight waits for it. While the loop beats (every 10 ms here, 40 beats in the window) the thread
    looks only when a stall could have reached the threshold: a few wakes, not one per beat."""
    dog = LoopWatchdog(interval=0.01, threshold=0.2)
    dog.start(asyncio.get_running_loop())
    try:
        await asyncio.sleep(0.05)
        assert dog._thread is not None and dog._thread.native_id is not None
        before = wakes_of(dog._thread.native_id)
        await asyncio.sleep(0.4)
        wakes = wakes_of(dog._thread.native_id) - before
    finally:
        dog.stop()
    assert wakes <= 8, wakes
    assert dog.stalls_over_threshold == 0
