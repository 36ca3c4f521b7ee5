"""``serve``'s ports never stop its start on their own (issue 31, item 9).

The rule (``clients.cli.serve_ports``): listen P, fast P - 2, HTTP P + 2, gRPC P + 3 only with
``--writable`` or when ``--grpc-port`` names one; ``off`` for the optional ones; a default port that is
taken leaves its door closed with a warning; a port the operator named that is taken ends the start
with a line naming the flag and exit status 4, no traceback. Every process here is bounded by
``PROCESS_TIMEOUT`` and killed if it outlives its test.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.cli.arg_types import PORT_OFF
from clients.cli.serve_ports import grpc_port_of, http_port_of
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import (
    PROCESS_TIMEOUT,
    free_port_block,
    kill_if_running,
    listen_on,
    serving,
)

#: A 5.x Proxy's gRPC port, the old default of ours.
PROXY_GRPC_PORT = 8081


@contextlib.contextmanager
def listening(*ports: int) -> Iterator[None]:
    held = [sock for sock in map(listen_on, ports) if sock is not None]
    try:
        yield
    finally:
        for sock in held:
            sock.close()


def test_the_rule() -> None:
    assert (http_port_of(None, 10911), grpc_port_of(None, 10911, True)) == (10913, 10914)
    assert grpc_port_of(None, 10911, False) is None  # read-only: no gRPC unless asked
    assert grpc_port_of(9000, 10911, False) == 9000 and grpc_port_of(0, 10911, False) == 0
    assert grpc_port_of(PORT_OFF, 10911, True) is None and http_port_of(PORT_OFF, 10911) is None
    assert (http_port_of(None, 0), grpc_port_of(None, 0, True)) == (0, 0)
    with pytest.raises(ValueError, match="--grpc-port"):
        grpc_port_of(None, 65533, True)


def ports(p: int) -> set[int]:
    return {p, p - 2, http_port_of(None, p), grpc_port_of(None, p, True)}  # type: ignore[arg-type]


@pytest.mark.parametrize("p", [1026, 8081, 9876, 10911, 20911, 65000])
def test_two_servers_six_or_more_apart_never_collide(p: int) -> None:
    for q in range(p + 6, min(p + 3000, 65532)):
        assert not ports(p) & ports(q), (p, q)
    for q in range(p + 1, p + 6):  # the block is as small as it can be: nearer ports do collide
        assert ports(p) & ports(q), (p, q)


async def test_read_only_serve_starts_beside_a_listener_on_8081(tmp_path: Path) -> None:
    port = free_port_block()
    with listening(PROXY_GRPC_PORT, port + 3):
        async with serving("--demo", "--store", str(tmp_path / "demo"), "--port", str(port)) as started:
            _, lines, bound, fast = started
            assert (bound, fast) == (port, port - 2)
            assert "gRPC" not in lines[-1], lines[-1]
            assert f"HTTP on http://127.0.0.1:{port + 2}/" in lines[-1]


async def read_line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    return (await asyncio.wait_for(proc.stdout.readline(), PROCESS_TIMEOUT)).decode().strip()


async def start_writable(store: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), *args,
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def stop(proc: asyncio.subprocess.Process) -> str:
    """SIGTERM, exit status 0; the process's log."""
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    assert proc.stderr is not None
    return (await proc.stderr.read()).decode()


async def test_writable_opens_grpc_beside_its_listen_port(tmp_path: Path) -> None:
    port = free_port_block()
    with listening(PROXY_GRPC_PORT):
        proc = await start_writable(tmp_path / "store", "--port", str(port))
        try:
            lines = [await read_line(proc) for _ in range(3)]
            assert lines == [
                f"NAMESRV_ADDR=127.0.0.1:{port}",
                f"GRPC_ENDPOINTS=127.0.0.1:{port + 3}",
                f"HTTP_URL=http://127.0.0.1:{port + 2}/",
            ]
            await stop(proc)
        finally:
            await kill_if_running(proc)


async def test_a_taken_default_grpc_port_leaves_grpc_off_and_says_why(tmp_path: Path) -> None:
    port = free_port_block()
    with listening(PROXY_GRPC_PORT, port + 3):
        proc = await start_writable(tmp_path / "store", "--port", str(port))
        try:
            lines = [await read_line(proc) for _ in range(2)]
            assert lines == [f"NAMESRV_ADDR=127.0.0.1:{port}", f"HTTP_URL=http://127.0.0.1:{port + 2}/"]
            log = await stop(proc)
        finally:
            await kill_if_running(proc)
    assert f"gRPC is off: its default port {port + 3}" in log and "--grpc-port N" in log
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("args", "front_doors"),
    [
        (("--grpc-port", "off"), "HTTP on"),
        (("--grpc-port", "OFF", "--http", "off"), ""),
    ],
)
async def test_off_turns_a_front_door_off(tmp_path: Path, args: tuple[str, ...], front_doors: str) -> None:
    proc = await start_writable(tmp_path / "store", "--port", "0", *args)
    try:
        first = await read_line(proc)
        assert first.startswith("NAMESRV_ADDR=127.0.0.1:")
        log = await stop(proc)
    finally:
        await kill_if_running(proc)
    assert "GRPC_ENDPOINTS" not in first
    line = next(line for line in log.splitlines() if "serving on" in line)
    assert "gRPC" not in line
    assert ("HTTP on" in line) == bool(front_doors), line


@pytest.mark.parametrize(
    ("flag", "named", "taken", "says"),
    [
        ("--grpc-port", 10, 10, "(--grpc-port {named})"),
        ("--http", 10, 10, "(--http {named})"),
        ("--port", 0, 0, "(--port {named})"),
        ("--port", 0, -2, "(the fast port is --port - 2"),
    ],
    ids=["grpc", "http", "listen", "fast"],
)
async def test_a_named_port_taken_ends_the_start_naming_its_flag(
    tmp_path: Path, flag: str, named: int, taken: int, says: str
) -> None:
    port = free_port_block((-2, 0, 2, 3, 10))
    named_port, taken_port = port + named, port + taken
    with listening(taken_port):
        proc = await start_writable(tmp_path / "store", "--port", str(port), flag, str(named_port))
        try:
            status = await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.stderr is not None and proc.stdout is not None
    log = (await proc.stderr.read()).decode()
    assert status == 4, log
    assert await proc.stdout.read() == b""  # it never said it serves
    assert "Traceback" not in log
    error = next(line for line in log.splitlines() if " ERROR " in line)
    where = rf"cannot listen on 127\.0\.0\.1:{taken_port} for the \w+ port: address already in use"
    assert re.search(where, error), error
    assert says.format(named=named_port) in error, error
