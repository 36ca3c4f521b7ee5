"""``max_connections``: connections over the limit are answered SYSTEM_BUSY and closed, clearly.

The connections within the limit keep being served throughout, a freed slot is reused, a refused
peer that never sends is closed after the grace period, refusals are logged once per burst, and
``rmq-query`` pointed at a full ``serve --max-connections`` reports the busy answer (exit 4) at once
instead of hanging until its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from server.app import QueryServer
from server.remoting import refusal
from server.remoting.refusal import busy_remark
from tests.support.harness import RawClient, StartServer
from tests.support.paths import REPO_ROOT
from tests.support.pulls import heartbeat
from tests.support.serve_process import start_serve


def view(offset: int = 0, **kw: object) -> RemotingCommand:
    return RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}, **kw)  # type: ignore[arg-type]


async def _wait_for(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


@pytest.fixture
async def limited(start_server: StartServer) -> QueryServer:
    return await start_server(max_connections=2)


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_a_connection_over_the_limit_is_answered_system_busy_then_closed(
    limited: QueryServer, serialize_type: SerializeType
) -> None:
    served = [await RawClient.connect("127.0.0.1", limited.port) for _ in range(2)]
    extra = await RawClient.connect("127.0.0.1", limited.fast_port)  # the limit spans both ports
    try:
        for client in served:
            assert (await client.call(view())).code == ResponseCode.SUCCESS
        request = view(serialize_type=serialize_type)
        answer = await extra.call(request)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY, busy_remark(2))
        assert answer.serialize_type == serialize_type
        assert await extra.closed_by_server()
        for client in served:
            assert (await client.call(view())).code == ResponseCode.SUCCESS
        assert limited.refuser.refused == 1
    finally:
        for client in [*served, extra]:
            await client.close()


async def test_a_freed_slot_is_served_again(limited: QueryServer) -> None:
    first = await RawClient.connect("127.0.0.1", limited.port)
    second = await RawClient.connect("127.0.0.1", limited.port)
    try:
        assert (await first.call(view())).code == ResponseCode.SUCCESS
        assert (await second.call(view())).code == ResponseCode.SUCCESS
        await first.close()
        await _wait_for(lambda: len(limited.connections) == 1)
        third = await RawClient.connect("127.0.0.1", limited.port)
        try:
            assert (await third.call(view())).code == ResponseCode.SUCCESS
        finally:
            await third.close()
    finally:
        await second.close()


async def test_a_refused_connection_that_sends_nothing_or_garbage_is_closed(
    limited: QueryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refusal, "REFUSAL_GRACE", 0.2)
    served = [await RawClient.connect("127.0.0.1", limited.port) for _ in range(2)]
    silent = await RawClient.connect("127.0.0.1", limited.port)
    garbage = await RawClient.connect("127.0.0.1", limited.port)
    oneway = await RawClient.connect("127.0.0.1", limited.port)
    try:
        for client in served:
            assert (await client.call(view())).code == ResponseCode.SUCCESS
        await garbage.send_bytes(b"\x7f\xff\xff\xff" + b"x" * 100)  # a 2 GiB frame: never buffered
        await oneway.send(view(flag=RPC_ONEWAY))
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await garbage.closed_by_server(timeout=2)
        assert await silent.closed_by_server(timeout=2)
        assert await oneway.closed_by_server(timeout=2)  # never answered, closed after the grace
        assert loop.time() - start < 2
        await _wait_for(lambda: limited.refuser.waiting == 0)
    finally:
        for client in [*served, silent, garbage, oneway]:
            await client.close()


async def test_refusals_are_logged_once_per_burst(
    limited: QueryServer, caplog: pytest.LogCaptureFixture
) -> None:
    served = [await RawClient.connect("127.0.0.1", limited.port) for _ in range(2)]
    refused: list[RawClient] = []
    try:
        for client in served:
            assert (await client.call(view())).code == ResponseCode.SUCCESS
        with caplog.at_level(logging.INFO, logger="server.remoting.refusal"):
            for _ in range(8):
                client = await RawClient.connect("127.0.0.1", limited.port)
                refused.append(client)
                assert (await client.call(view())).code == ResponseCode.SYSTEM_BUSY
        lines = [r.getMessage() for r in caplog.records if r.name == "server.remoting.refusal"]
        assert len(lines) == 1, lines
        assert "connection limit 2 reached" in lines[0]
        assert limited.refuser.refused == 8
    finally:
        for client in [*served, *refused]:
            await client.close()


async def test_refused_connections_waiting_at_once_are_capped(start_server: StartServer) -> None:
    """Past ``max_waiting`` refused connections that have not yet sent anything, more are closed at
    once: a flood of silent connections cannot hold sockets for the grace period."""
    server = await start_server(max_connections=1)
    server.refuser.max_waiting = 2
    held = await RawClient.connect("127.0.0.1", server.port)
    waiting = [await RawClient.connect("127.0.0.1", server.port) for _ in range(2)]
    try:
        assert (await held.call(view())).code == ResponseCode.SUCCESS
        await _wait_for(lambda: server.refuser.waiting == 2)
        flood = await RawClient.connect("127.0.0.1", server.port)
        try:
            assert await flood.closed_by_server(timeout=1)
        finally:
            await flood.close()
        answer = await waiting[0].call(view())
        assert answer.code == ResponseCode.SYSTEM_BUSY
    finally:
        for client in [held, *waiting]:
            await client.close()


async def test_stop_closes_refused_connections_too(start_server: StartServer) -> None:
    server = await start_server(max_connections=1)
    held = await RawClient.connect("127.0.0.1", server.port)
    silent = await RawClient.connect("127.0.0.1", server.port)
    try:
        assert (await held.call(view())).code == ResponseCode.SUCCESS
        await _wait_for(lambda: server.refuser.waiting == 1)
        await asyncio.wait_for(server.stop(), 5)
        assert await silent.closed_by_server(timeout=1)
    finally:
        await held.close()
        await silent.close()


def test_max_connections_must_be_positive(java_store: object) -> None:
    from server.app import ServerSettings

    with pytest.raises(ValueError, match="max_connections"):
        QueryServer(java_store, ServerSettings(max_connections=0))


async def test_rmq_query_against_a_full_serve_reports_system_busy_at_once(java_store_dir: Path) -> None:
    conf = java_store_dir.parent / f"{java_store_dir.name}.broker.conf"
    proc, _, port, _ = await start_serve("--config", str(conf), "--port", "0", "--max-connections", "1")
    held = await RawClient.connect("127.0.0.1", port)
    try:
        assert (await held.call(view())).code == ResponseCode.SUCCESS
        # a live client's connection (it heart-beat) is never evicted for a newcomer, however long
        # the query's interpreter takes to start; an idle one would be after EVICTABLE_AFTER (1 s)
        beat = RawClient.request(RequestCode.HEART_BEAT, None, heartbeat("held", "G", {"TopicA": "*"}))
        assert (await held.call(beat)).code == ResponseCode.SUCCESS
        query = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            "query-key",
            "-n",
            f"127.0.0.1:{port}",
            "-t",
            "TopicA",
            "-k",
            "k-3",
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(query.communicate(), 20)
        assert query.returncode == 4, (out, err)
        assert f"CODE: 2  DESC: {busy_remark(1)}" in err.decode()
    finally:
        await held.close()
        proc.terminate()
        assert proc.stderr is not None
        rest = (await asyncio.wait_for(proc.stderr.read(), 20)).decode()
        await asyncio.wait_for(proc.wait(), 20)
    assert "connection limit 1 reached" in rest


def test_serve_rejects_a_non_positive_max_connections() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--max-connections", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "expected a positive integer" in result.stderr
