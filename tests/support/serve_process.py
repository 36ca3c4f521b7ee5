"""``rmq-query serve`` as a child process, for the tests that run the command the way a user does.

``start_serve`` runs ``python -m clients.cli serve ARGS`` from the repository root and waits for its
"serving on" log line (the ports it bound); ``serving`` wraps it so that a test that ran to the end
also pins a clean SIGTERM stop (exit status 0), and a process left by a failing test is killed.
``start_writable`` starts ``serve --writable`` on a store for the kill -9 and damage tests: it waits
for the ``NAMESRV_ADDR=`` line on standard output, printed once serving with the SIGTERM handler in
place, and leaves the log where the test says (nowhere by default: an undrained pipe could stall a
server logging under load).
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

SERVING = re.compile(r"serving on 127\.0\.0\.1:(\d+) and fast port 127\.0\.0\.1:(\d+)")

#: Seconds a serve process gets to start or to stop before the test fails.
PROCESS_TIMEOUT = 20

ServeProcess = tuple[asyncio.subprocess.Process, list[str], int, int]


async def start_serve(*args: str, preexec_fn: Callable[[], None] | None = None) -> ServeProcess:
    """Start ``serve ARGS``; returns the process, its log lines so far, the port and the fast port.

    ``preexec_fn`` runs in the child before ``serve`` starts (e.g. to lower its open-file limit).
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "serve",
        *args,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=preexec_fn,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    while True:
        raw = await asyncio.wait_for(proc.stderr.readline(), PROCESS_TIMEOUT)
        if not raw:
            pytest.fail("serve exited early:\n" + "".join(lines))
        lines.append(raw.decode())
        match = SERVING.search(lines[-1])
        if match:
            return proc, lines, int(match.group(1)), int(match.group(2))


async def start_writable(
    store: Path, *, log: Path | None = None, args: tuple[str, ...] = ()
) -> tuple[asyncio.subprocess.Process, int]:
    """``serve --writable --store STORE --port 0 ARGS``; returns the process and its port once serving.

    ``log``: a file the server's log is appended to (default: discarded)."""
    with open(log if log is not None else "/dev/null", "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), "--port", "0",
            *args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), PROCESS_TIMEOUT)).decode()
    assert line.startswith("NAMESRV_ADDR=127.0.0.1:"), f"serve --writable exited early: {line!r}"
    return proc, int(line.strip().rsplit(":", 1)[1])


async def start_writable_grpc(
    store: Path, *args: str, log: Path | None = None
) -> tuple[asyncio.subprocess.Process, int, int]:
    """``serve --writable --store STORE --port 0 ARGS`` (gRPC on a free port too); returns the process,
    its remoting port and its gRPC port, read from the ``NAMESRV_ADDR=`` and ``GRPC_ENDPOINTS=`` lines.

    ``log``: a file the server's log is appended to (default: discarded)."""
    with open(log if log is not None else "/dev/null", "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), "--port", "0",
            *args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    assert proc.stdout is not None
    lines = [(await asyncio.wait_for(proc.stdout.readline(), PROCESS_TIMEOUT)).decode() for _ in range(2)]
    assert lines[0].startswith("NAMESRV_ADDR=127.0.0.1:"), f"serve --writable exited early: {lines!r}"
    assert lines[1].startswith("GRPC_ENDPOINTS=127.0.0.1:"), f"no gRPC port announced: {lines!r}"
    return proc, int(lines[0].strip().rsplit(":", 1)[1]), int(lines[1].strip().rsplit(":", 1)[1])


async def kill_if_running(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


@asynccontextmanager
async def serving(*args: str) -> AsyncIterator[ServeProcess]:
    """``start_serve`` for the block; after it, SIGTERM must stop the process with exit status 0."""
    started = await start_serve(*args)
    proc = started[0]
    try:
        yield started
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        await kill_if_running(proc)


def free_port_block(offsets: tuple[int, ...] = (-2, 0, 2, 3)) -> int:
    """A listen port P whose ``P + offset`` ports are all free on 127.0.0.1 now (serve's own layout
    by default), for the tests about serve's fixed and derived ports: port 0 cannot say which."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if not all(1024 < port + o <= 65535 for o in offsets):
            continue
        held: list[socket.socket] = []
        try:
            for offset in offsets:
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError("no free block of ports found")


def listen_on(port: int) -> socket.socket | None:
    """A plain listener on 127.0.0.1:PORT (what a 5.x Proxy on 8081 is to us); None when another
    process holds the port already, which leaves it just as taken."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()
        return None
    return sock
