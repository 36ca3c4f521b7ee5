"""``serve`` on an installation without a front door's extra (issue 35, packaging).

Each test runs ``serve`` in a child process whose import system cannot see the libraries of the
``[grpc]`` or ``[console]`` extra (``sys.modules[name] = None``: ``import`` raises and ``find_spec``
answers None, as on an install without them). A door the command line names stops the start with
exit status 2 and the extra to install; a door that was only a default stays closed with a warning
and the remoting ports serve as before.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT
from tests.support.serve_process import PROCESS_TIMEOUT, SERVING

GRPC_LIBRARIES = ("grpc", "google.protobuf", "rocketmq", "cryptography")
HTTP_LIBRARIES = ("aiohttp", "prometheus_client")


def _command(hidden: tuple[str, ...], *args: str) -> list[str]:
    code = (
        "import sys\n"
        f"for name in {hidden!r}: sys.modules[name] = None\n"
        "from clients.cli import main\n"
        f"sys.exit(main({['serve', *args]!r}))\n"
    )
    return [sys.executable, "-c", code]


def _run(hidden: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(hidden, *args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=PROCESS_TIMEOUT
    )


def test_a_named_grpc_port_without_the_grpc_extra_is_refused_with_the_extra_to_install() -> None:
    done = _run(GRPC_LIBRARIES, "--demo", "--port", "0", "--grpc-port", "0")
    assert done.returncode == 2, done.stderr
    assert "--grpc-port 0: the gRPC port for RocketMQ 5 clients needs grpcio" in done.stderr
    assert "rmq-query[grpc]" in done.stderr
    assert "serving on" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_named_http_port_without_the_console_extra_is_refused_with_the_extra_to_install() -> None:
    done = _run(HTTP_LIBRARIES, "--demo", "--port", "0", "--http", "0")
    assert done.returncode == 2, done.stderr
    assert "needs aiohttp, prometheus_client (not installed)" in done.stderr
    assert "rmq-query[console]" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_demo_serves_lookups_without_the_front_doors_libraries() -> None:
    """The base install: ``serve --demo`` with neither extra serves its remoting port, says which
    doors stay closed and why, and stops cleanly on SIGTERM."""
    proc = subprocess.Popen(
        _command(GRPC_LIBRARIES + HTTP_LIBRARIES, "--demo", "--port", "0"),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        while not lines or not SERVING.search(lines[-1]):
            line = proc.stderr.readline()
            assert line, "serve exited early:\n" + "".join(lines)
            lines.append(line)
        port = int(SERVING.search(lines[-1]).group(1))  # type: ignore[union-attr]
        assert "HTTP on" not in lines[-1]
        assert any("serving without the HTTP port" in line and "rmq-query[console]" in line for line in lines)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(PROCESS_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_writable_serves_without_its_default_grpc_port_when_grpc_is_missing(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        _command(
            GRPC_LIBRARIES, "--writable", "--store", str(tmp_path / "store"), "--port", "0", "--http", "off"
        ),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("NAMESRV_ADDR=127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT)
        assert proc.returncode == 0, err
        assert "GRPC_ENDPOINTS" not in out
        assert "serving without the gRPC port for RocketMQ 5 clients" in err and "rmq-query[grpc]" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
