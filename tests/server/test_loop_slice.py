"""The event loop thread's scheduling slice (``server.loop_slice``): asked of the kernel at start."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.loop_slice import DEFAULT_SLICE_US, current_slice_us, request_slice
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import kill_if_running, start_writable


def in_new_thread(work: Callable[[], Any]) -> Any:
    """``work()``'s result, run on a thread of its own (whose slice the test may change)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


def kernel_gives_slices() -> bool:
    """Linux 6.12 or later on x86-64 or arm64: a thread may ask for a scheduling slice of its own
    (decided from the kernel's version, not by ``request_slice``, so that a broken one fails here)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return False
    numbers = re.match(r"(\d+)\.(\d+)", platform.release())
    return numbers is not None and (int(numbers.group(1)), int(numbers.group(2))) >= (6, 12)


@pytest.fixture
def settable() -> None:
    """Skip where the kernel gives a thread no scheduling slice of its own: there is then nothing to
    ask for (``request_slice`` says False)."""
    if not kernel_gives_slices():
        pytest.skip("this kernel gives a thread no scheduling slice of its own (Linux 6.12+)")


@pytest.fixture
def this_threads_slice_kept() -> Any:
    """The test thread's slice as it was, given back afterwards (it runs the rest of the suite)."""
    before = current_slice_us()
    yield before
    if before is not None and before >= 100:
        request_slice(before)


def test_request_slice_sets_the_calling_threads_slice_only(settable: None) -> None:
    mine = current_slice_us()
    assert mine != 300

    def ask() -> tuple[bool, int | None]:
        return request_slice(300), current_slice_us()

    assert in_new_thread(ask) == (True, 300)
    assert current_slice_us() == mine


def test_a_slice_outside_the_kernels_bounds_is_refused() -> None:
    for bad in (0, 99, 100_001):
        with pytest.raises(ValueError, match="100-100000"):
            request_slice(bad)


async def test_the_server_asks_for_its_slice_on_the_loops_thread(
    tmp_path: Path, settable: None, this_threads_slice_kept: int | None
) -> None:
    store = WritableStore(StoreConfig.for_store(tmp_path / "store", broker_name="b1"))
    try:
        # a server built in code asks for none: the thread's slice stays
        plain = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
        await plain.start()
        await plain.stop()
        assert current_slice_us() == this_threads_slice_kept
        server = QueryServer(
            store.reader, ServerSettings(port=0, loop_slice_us=400), configure=write_path(store)
        )
        await server.start()
        try:
            assert current_slice_us() == 400  # the loop's thread is this one
        finally:
            await server.stop()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), None),
        (("--loop-slice-us", "100"), 100),
        (("--loop-slice-us", "2000"), 2000),
        (("--loop-slice-us", "0"), None),
    ],
)
async def test_serve_asks_for_the_slice_it_was_given(
    tmp_path: Path, settable: None, args: tuple[str, ...], expected: int | None
) -> None:
    """A slice given is asked for; ``serve``'s default (``DEFAULT_SLICE_US``, 0) and 0 leave the slice
    the process inherited (this thread's)."""
    assert DEFAULT_SLICE_US == 0
    inherited = current_slice_us()
    assert inherited not in (100, 2000)
    proc, _ = await start_writable(tmp_path / "store", args=args)
    try:
        # the loop runs on the main thread, whose id is the process's
        assert current_slice_us(proc.pid) == (inherited if expected is None else expected)
    finally:
        await kill_if_running(proc)


def test_serve_refuses_a_slice_the_kernel_would_clamp() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--loop-slice-us", "50", "--store", "/nonexistent"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    expected = "--loop-slice-us: expected 0 (the kernel's default) or 100-100000 microseconds, got '50'"
    assert expected in result.stderr
