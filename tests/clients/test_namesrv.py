"""The route lookup QueryAdmin and Producer share (``clients.namesrv``), against a real writable
server on 127.0.0.1 port 0: name servers tried in turn, a found route cached, a missing one not."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.errors import ConnectError
from clients.producer import Producer
from clients.response_errors import TopicNotExistError
from clients.testkit.server import RmqServer, kit_store_config


@pytest.fixture
def server(tmp_path: Path):
    running = RmqServer(kit_store_config(tmp_path / "store"))
    yield running
    running.close()


def closed_port() -> str:
    """A loopback address nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_both_skip_an_unreachable_name_server(server: RmqServer) -> None:
    namesrv = f"{closed_port()};{server.address}"
    async with Producer(namesrv) as producer:
        sent = await producer.send("Shared", b"hello", keys="k1")
    assert sent is not None and sent.broker_addr == server.address
    async with QueryAdmin(namesrv) as admin:
        found = await admin.query_by_key("Shared", "k1")
    assert [m.msg_id for m in found.messages] == [sent.msg_id]


async def test_none_reachable_is_the_last_transport_error() -> None:
    dead = closed_port()
    for user in (QueryAdmin(dead), Producer(dead)):
        async with user:
            with pytest.raises(ConnectError) as info:
                await user.fetch_route("Any")
        assert info.value.addr == dead


async def test_a_found_route_is_cached_and_a_missing_one_asked_again(server: RmqServer) -> None:
    async with QueryAdmin(server.address) as admin:
        with pytest.raises(TopicNotExistError):
            await admin.get_route("Later")
        async with Producer(server.address) as producer:
            await producer.send("Later", b"creates the topic")
        route = await admin.get_route("Later")  # asked again: now there
        assert await admin.route("Later") is route  # and from now on cached
