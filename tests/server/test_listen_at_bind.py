"""The remoting ports listen as soon as they are bound (``server.app._listen_now``).

Linux lets two sockets with SO_REUSEADDR bind one port while neither listens. A server that bound
its ports and listened only at ``start_serving`` could therefore share a port-0 pair with another
process's bind, and then fail its start with EADDRINUSE (seen once in CI, four xdist workers). Each
test here is the other process: its REUSEADDR bind of a port the server bound must be refused at
once, on asyncio's loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable

import pytest

from server.app import QueryServer
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.java_store import settings_for


def _reuse_addr_bind(port: int) -> OSError | None:
    """What a REUSEADDR bind of 127.0.0.1:``port`` by someone else gives: None when it was let in."""
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", port))
    except OSError as exc:
        return exc
    finally:
        other.close()
    return None


def _loops() -> list[Callable[[], asyncio.AbstractEventLoop]]:
    loops: list[Callable[[], asyncio.AbstractEventLoop]] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return loops
    return [*loops, uvloop.new_event_loop]


@pytest.mark.parametrize("loop_factory", _loops(), ids=lambda f: f.__module__.split(".")[0])
def test_both_ports_refuse_another_bind_between_bind_and_serving(
    java_store: MessageStore,
    java_store_config: StoreConfig,
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def bound_only() -> None:
        server = QueryServer(java_store, settings_for(java_store_config, port=0))
        main, fast = await server._bind_pair()  # bound, not serving yet
        try:
            for port in (main.sockets[0].getsockname()[1], fast.sockets[0].getsockname()[1]):
                refused = _reuse_addr_bind(port)
                assert refused is not None and refused.errno == errno.EADDRINUSE, port
        finally:
            main.close()
            fast.close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(bound_only())
