"""Binding the HTTP port inside the running loop (aiohttp's ``AppRunner`` and ``TCPSite``)."""

from __future__ import annotations

import socket

from aiohttp import web

from server.file_budget import LISTEN_BACKLOG
from server.port_errors import PortUnusableError

#: Seconds in-flight HTTP requests get when the server stops.
HTTP_STOP_GRACE = 2.0


class HttpServer:
    """One aiohttp application on ``host:port`` (0 picks a port), started and stopped with the server."""

    def __init__(self, app: web.Application, host: str, port: int, *, reuse_port: bool = False) -> None:
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=HTTP_STOP_GRACE
        )
        self.host = host
        self.port = port
        self._reuse_port = reuse_port

    async def start(self) -> int:
        """Bind and serve; the bound port."""
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host, self.port, backlog=LISTEN_BACKLOG, reuse_port=self._reuse_port or None
        )
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise PortUnusableError.from_os_error("HTTP", self.host, self.port, exc) from None
        except BaseException:
            await self._runner.cleanup()
            raise
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                self.port = int(address[1])
                break
        return self.port

    @property
    def app(self) -> web.Application:
        return self._runner.app

    async def stop(self) -> None:
        await self._runner.cleanup()


def url_host(host: str) -> str:
    """How a URL names ``host``: a wildcard bind is reached on this machine's loopback."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    try:
        socket.inet_pton(socket.AF_INET6, host)
    except OSError:
        return host
    return f"[{host}]"
