"""``rmq-query serve`` as a process: it says what it serves and where, answers, and stops on a signal.

The command is run the way a user runs it (``python -m clients.cli serve ...``) on port 0 over a copy
of the Java store; the log names the store and the bound ports, a request is answered on both ports,
and SIGTERM / SIGINT end it with exit status 0 after its "stopped" line.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clients.cli.arg_types import host_port
from clients.cli.serve import add_arguments, load_config, settings_from
from clients.testkit.demo import make_demo_store
from protocol.codes import RequestCode, ResponseCode
from server.app import advertised_address
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient, key_query_fields
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import kill_if_running, serving, start_serve


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_serve_answers_then_stops_on_a_signal(sig: signal.Signals, java_store_copy: Path) -> None:
    conf = java_store_copy.parent / f"{java_store_copy.name}.broker.conf"
    proc, lines, port, fast_port = await start_serve("--config", str(conf), "--port", "0")
    try:
        assert fast_port == port - 2
        assert any(str(java_store_copy) in line and "3 topic(s)" in line for line in lines)
        for p in (port, fast_port):
            client = await RawClient.connect("127.0.0.1", p)
            try:
                answer = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
                assert (answer.code, len(answer.body or b"")) == (ResponseCode.SUCCESS, 503)
            finally:
                await client.close()
        proc.send_signal(sig)
        assert proc.stderr is not None
        rest = (await asyncio.wait_for(proc.stderr.read(), 20)).decode()
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert "stopped" in rest
    finally:
        await kill_if_running(proc)


async def test_serve_refuses_a_directory_without_a_commitlog(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "serve",
        "--store",
        str(tmp_path),
        "--port",
        "0",
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    assert b"no CommitLog directory" in err


async def test_serve_demo_writes_and_serves_a_fresh_store(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    async with serving("--demo", "--store", str(root), "--port", "0") as (_, lines, port, _):
        assert (root / "commitlog").is_dir() and (root / "broker.conf").is_file()
        key_line = next(line for line in lines if "demo: topic DemoOrders, keys" in line)
        key = key_line.rsplit("keys ", 1)[1].split()[0]
        client = await RawClient.connect("127.0.0.1", port)
        try:
            route = await client.call(
                RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "DemoOrders"})
            )
            assert route.code == ResponseCode.SUCCESS and b"demo-broker" in bytes(route.body or b"")
            fields = key_query_fields("DemoOrders", key)
            answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields))
            assert answer.code == ResponseCode.SUCCESS
        finally:
            await client.close()


async def test_serve_reads_the_broker_conf_inside_the_store(tmp_path: Path) -> None:
    """``--store DIR`` alone reads ``DIR/broker.conf``: a demo-store's small index geometry and broker
    name come from there (with the broker's defaults the IndexFiles would be refused as mis-sized)."""
    root = tmp_path / "kept"
    summary = make_demo_store(root, messages=200)
    assert (root / "broker.conf").is_file()
    topic = sorted(summary.sample_keys)[0]
    key = summary.sample_keys[topic][0]
    async with serving("--store", str(root), "--port", "0") as (_, _, port, _):
        client = await RawClient.connect("127.0.0.1", port)
        try:
            route = await client.call(RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            assert route.code == ResponseCode.SUCCESS
            assert b'"brokerName":"demo-broker"' in bytes(route.body or b"")
            answer = await client.call(
                RawClient.request(RequestCode.QUERY_MESSAGE, key_query_fields(topic, key))
            )
            assert answer.code == ResponseCode.SUCCESS
        finally:
            await client.close()


async def test_serve_with_workers_shares_the_ports_and_stops_them_all(java_store_copy: Path) -> None:
    conf = java_store_copy.parent / f"{java_store_copy.name}.broker.conf"
    proc, _, port, _ = await start_serve("--config", str(conf), "--port", "0", "--workers", "2")
    assert proc.stderr is not None
    try:
        worker_line = ""
        while "worker-" not in worker_line or "serving on" not in worker_line:
            worker_line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
            assert worker_line, "the worker never started"
        assert f":{port} " in worker_line
        clients = [await RawClient.connect("127.0.0.1", port) for _ in range(8)]
        try:
            for client in clients:
                answer = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
                assert answer.code == ResponseCode.SUCCESS
        finally:
            for client in clients:
                await client.close()
        proc.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert re.search(r"worker-\d+ server\.app: stopped", rest)
    finally:
        await kill_if_running(proc)


async def _requests_counted(http_port: int, code: int) -> float:
    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        async with session.get(f"http://127.0.0.1:{http_port}/metrics") as response:
            text = await response.text()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "rmq_query_requests"
        for sample in family.samples
        if sample.name == "rmq_query_requests_total" and sample.labels["code"] == str(code)
    )


async def test_metrics_count_the_requests_of_every_worker(java_store_copy: Path) -> None:
    """``--workers 2``: /metrics, served by the first process, counted its own requests only (7
    queries showed as 1, issue 35 item 5). The workers report their counters to it every second:
    24 VIEWs over 24 connections, which the kernel spreads over both processes, count as 24."""
    conf = java_store_copy.parent / f"{java_store_copy.name}.broker.conf"
    proc, lines, port, _ = await start_serve(
        "--config", str(conf), "--port", "0", "--http", "0", "--workers", "2"
    )
    assert proc.stderr is not None
    try:
        match = re.search(r"HTTP on http://127\.0\.0\.1:(\d+)/", lines[-1])
        assert match, lines[-1]
        http_port = int(match.group(1))
        worker_line = ""
        while "worker-" not in worker_line or "serving on" not in worker_line:
            worker_line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
            assert worker_line, "the worker never started"
        for _ in range(24):
            client = await RawClient.connect("127.0.0.1", port)
            try:
                answer = await client.call(RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
                assert answer.code == ResponseCode.SUCCESS
            finally:
                await client.close()
        counted = 0.0
        for _ in range(50):  # the workers report every second: wait for the reports, at most 10 s
            counted = await _requests_counted(http_port, RequestCode.VIEW_MESSAGE_BY_ID)
            if counted >= 24:
                break
            await asyncio.sleep(0.2)
        assert counted == 24
    finally:
        # SIGTERM first, also when the test failed: the first process stops its workers, which
        # hold the log pipe (a kill of the first process alone would leave them, and the pipe, open)
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.stderr.read(), 30)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            await kill_if_running(proc)


# (A port outside 0..65535 is a usage error: tests/clients/cli/test_flag_checks.py.)
@pytest.mark.parametrize("port", ["2", "busy"])
async def test_serve_reports_a_port_it_cannot_use(port: str, java_store_copy: Path) -> None:
    conf = java_store_copy.parent / f"{java_store_copy.name}.broker.conf"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if port == "busy":
            port = str(taken.getsockname()[1])
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            "serve",
            "--config",
            str(conf),
            "--port",
            port,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    # a port in use: exit status 4 and the flag that named it (clients.cli.serve_ports); a port
    # whose fast port (port - 2) cannot exist: 1
    assert proc.returncode == (1 if port == "2" else 4)
    assert b"cannot listen" in err and b"Traceback" not in err
    if port != "2":
        assert f"address already in use (another process listens there) (--port {port})".encode() in err


@pytest.mark.parametrize("value", ["mq.example:10911", "10.0.0.5:1", "[::1]:10911"])
def test_advertise_accepts_host_port(value: str) -> None:
    assert host_port(value) == value


@pytest.mark.parametrize("value", ["mq.example", ":10911", "mq.example:", "mq.example:0", "h:70000", "h:x"])
def test_advertise_rejects_anything_else(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        host_port(value)


@pytest.mark.parametrize(
    ("host", "advertise", "expected"),
    [
        ("0.0.0.0", None, "10.1.2.3:20911"),  # every interface: brokerIP1, as the broker registers
        ("::", None, "10.1.2.3:20911"),
        ("127.0.0.1", None, "127.0.0.1:20911"),  # a specific address: that address
        ("192.0.2.7", None, "192.0.2.7:20911"),
        ("0.0.0.0", "mq.example:10911", "mq.example:10911"),  # --advertise always wins
    ],
)
def test_routes_advertise_broker_ip1_for_a_wildcard_bind(
    host: str, advertise: str | None, expected: str, tmp_path: Path
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = ["--store", str(tmp_path), "--host", host, "--port", "20911"]
    args = parser.parse_args(argv + (["--advertise", advertise] if advertise else []))
    config = StoreConfig.for_store(tmp_path, broker_ip1="10.1.2.3")
    assert advertised_address(settings_from(args, config), 20911) == expected


def test_defaults_are_the_brokers_on_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No flags: store ~/store, port 10911 (fast port 10909), bound to 127.0.0.1 only; a broker.conf
    (named, or inside --store) supplies listenPort and the identity; --port wins over both."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    monkeypatch.setenv("HOME", str(tmp_path))
    bare = parser.parse_args([])
    config = load_config(bare)
    assert config.store_path_root_dir == tmp_path / "store"
    settings = settings_from(bare, config)
    assert (settings.host, settings.port, settings.advertise) == ("127.0.0.1", 10911, None)

    conf = tmp_path / "b.conf"
    conf.write_text("listenPort=20911\nbrokerName=b-1\nbrokerClusterName=C1\n", encoding="utf-8")
    named = parser.parse_args(["--config", str(conf)])
    settings = settings_from(named, load_config(named))
    assert (settings.port, settings.broker_name, settings.cluster) == (20911, "b-1", "C1")
    overridden = parser.parse_args(["--config", str(conf), "--port", "30911"])
    assert settings_from(overridden, load_config(overridden)).port == 30911


def test_serve_refuses_a_bad_advertise_address() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--advertise", "no-port-here"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "expected HOST:PORT" in result.stderr


def test_the_connection_limits_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18's bounds (held pulls, queued answers, request deadline): defaults, then each flag."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    monkeypatch.setenv("HOME", str(tmp_path))
    bare = parser.parse_args([])
    settings = settings_from(bare, load_config(bare))
    assert (settings.max_held_pulls, settings.max_held_pulls_per_connection) == (10_000, 1_000)
    given = parser.parse_args(["--max-held-pulls", "7", "--max-held-pulls-per-connection", "3"])
    settings = settings_from(given, load_config(given))
    assert (settings.max_held_pulls, settings.max_held_pulls_per_connection) == (7, 3)
    assert (settings.max_queued_bytes, settings.max_queued_bytes_per_connection) == (256 * 2**20, 64 * 2**20)
    given = parser.parse_args(["--max-queued-mib", "5", "--max-queued-mib-per-connection", "2"])
    settings = settings_from(given, load_config(given))
    assert (settings.max_queued_bytes, settings.max_queued_bytes_per_connection) == (5 * 2**20, 2 * 2**20)
    assert (settings.grpc_max_request_bytes, settings.grpc_max_request_bytes_per_connection) == (
        64 * 2**20,
        32 * 2**20,
    )
    given = parser.parse_args(["--grpc-max-request-mib", "48", "--grpc-max-request-mib-per-connection", "20"])
    settings = settings_from(given, load_config(given))
    assert (settings.grpc_max_request_bytes, settings.grpc_max_request_bytes_per_connection) == (
        48 * 2**20,
        20 * 2**20,
    )
    assert settings.request_timeout == 30.0
    given = parser.parse_args(["--request-timeout", "0"])
    assert settings_from(given, load_config(given)).request_timeout == 0.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-held-pulls", "0"])
