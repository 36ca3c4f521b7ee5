"""The name server's port: remoting connections answering ``NameServerRequests`` only.

It shares the process and event loop with the brokers it names, and nothing else: a broker made
``down`` (``server.cluster``) leaves this port answering, without that broker's routes. Its
``route_watch`` follows which connection was told which broker's routes (``server.namesrv.route_watch``).
"""

from __future__ import annotations

import asyncio
import logging

from server.file_budget import LISTEN_BACKLOG
from server.namesrv.processor import NameServerRequests
from server.namesrv.registry import NameRegistry
from server.namesrv.route_watch import RouteWatch
from server.port_errors import PortUnusableError
from server.remoting.connection import ConnectionLogs, RemotingConnection
from server.remoting.dispatch import Dispatcher

log = logging.getLogger(__name__)


class NameServer:
    """One listening port whose connections are answered from ``registry``."""

    def __init__(self, registry: NameRegistry, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = registry
        self.host = host
        self._wanted_port = port
        self.port = 0
        self.dispatcher = Dispatcher()
        #: Who was told which broker's routes, for a broker coming back (``server.cluster``).
        self.route_watch = RouteWatch()
        NameServerRequests(registry, self.route_watch).register_on(self.dispatcher)
        self._server: asyncio.Server | None = None
        self._connections: set[RemotingConnection] = set()
        self._logs = ConnectionLogs()

    def _protocol(self) -> RemotingConnection:
        connection = RemotingConnection(self.dispatcher, on_close=self._closed, logs=self._logs)
        self._connections.add(connection)
        return connection

    def _closed(self, connection: RemotingConnection) -> None:
        self._connections.discard(connection)
        self.route_watch.forget(connection.peer)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._protocol, self.host, self._wanted_port, backlog=LISTEN_BACKLOG
            )
        except OSError as exc:
            raise PortUnusableError.from_os_error("name server", self.host, self._wanted_port, exc) from None
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("name server on %s:%d", self.host, self.port)

    async def stop(self, timeout: float = 5.0) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        connections = list(self._connections)
        if connections:
            await asyncio.gather(*(c.shutdown(timeout) for c in connections))
        await server.wait_closed()
