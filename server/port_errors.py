"""A port the server cannot bind: which of its ports it was, where, and why.

``serve`` turns it into one line naming the flag that chose the port and a non-zero exit status
(``clients.cli.serve_ports``), never a traceback; a front door whose port was only a default is left
closed with a warning instead (``QueryServer.start_front_doors``). The roles are the server's own
words for its ports: ``listen``, ``fast`` (listen − 2), ``gRPC`` and ``HTTP``.
"""

from __future__ import annotations

import errno
import os
import socket


class PortUnusableError(OSError):
    """``host:port`` of ``role`` could not be bound; ``reason`` says why (e.g. "address already in use")."""

    def __init__(self, role: str, host: str, port: int, reason: str, code: int | None = None) -> None:
        super().__init__(f"cannot listen on {host}:{port} for the {role} port: {reason}")
        self.role = role
        self.host = host
        self.port = port
        self.reason = reason
        #: The ``errno`` of the failure when known (EADDRINUSE: another process holds the port).
        self.code = code

    @classmethod
    def from_os_error(cls, role: str, host: str, port: int, exc: OSError) -> PortUnusableError:
        return cls(role, host, port, _reason(exc.errno, str(exc)), exc.errno)

    @property
    def in_use(self) -> bool:
        return self.code == errno.EADDRINUSE


def _reason(code: int | None, fallback: str) -> str:
    if code == errno.EADDRINUSE:
        return "address already in use (another process listens there)"
    if code is not None and code > 0:
        return os.strerror(code).lower()
    return fallback


def probe(role: str, host: str, port: int, fallback: str) -> PortUnusableError:
    """The error for a port a library could not bind without saying why (grpcio): bind a plain socket
    there once (closed at once) and report what the system answers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host or "0.0.0.0", port))
    except OSError as exc:
        return PortUnusableError.from_os_error(role, host, port, exc)
    return PortUnusableError(role, host, port, fallback)
