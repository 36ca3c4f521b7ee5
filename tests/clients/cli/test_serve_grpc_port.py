"""``serve --grpc-port``: a read-only server opens it when asked, on the port given (0: a free one,
printed on the start-up line); the defaults are in ``test_serve_ports``."""

from __future__ import annotations

import re
from pathlib import Path

import grpc

from clients.cli.serve_ports import grpc_port_of
from server.grpc.v2 import Code, definition, service, service_grpc
from tests.support.serve_process import serving


def test_default_grpc_port() -> None:
    assert grpc_port_of(None, 10911, writable=True) == 10914
    assert grpc_port_of(None, 10911, writable=False) is None
    assert grpc_port_of(None, 0, writable=True) == 0
    assert grpc_port_of(0, 10911, writable=False) == 0
    assert grpc_port_of(9876, 0, writable=False) == 9876


async def test_read_only_serve_answers_grpc_on_the_port_it_prints(tmp_path: Path) -> None:
    args = ("--demo", "--store", str(tmp_path / "demo"), "--port", "0", "--grpc-port", "0")
    async with serving(*args) as (_, lines, port, _):
        match = re.search(r"gRPC on 127\.0\.0\.1:(\d+)", lines[-1])
        assert match is not None, lines[-1]
        grpc_port = int(match.group(1))
        assert grpc_port not in (0, port, port - 2)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            answer = await stub.QueryRoute(
                service.QueryRouteRequest(topic=definition.Resource(name="NoSuchTopic")),
                metadata=(("x-mq-client-id", "cli-test"),),
                timeout=5,
            )
        assert answer.status.code == Code.TOPIC_NOT_FOUND
