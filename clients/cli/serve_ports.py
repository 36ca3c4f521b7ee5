"""Which ports ``serve`` binds: every default derived from ``--port``, ``off``, and the flag a port
that cannot be bound belongs to.

A server on listen port P takes:

- P, the listen port (``--port``; broker.conf's ``listenPort``, else 10911);
- P − 2, the fast port (the broker's rule, always with P);
- P + 2, the HTTP port (``--http``; on by default);
- P + 3, the gRPC port (``--grpc-port``): opened by ``--writable`` (RocketMQ 5 clients send and
  receive through it), by a read-only server only when ``--grpc-port N`` asks (a 5.x client does no
  lookups, so a read-only store has nothing to give it), never on its own beside a 5.x Proxy's 8081.

P + 1 stays free: it is the broker's HA port, so a broker on P elsewhere keeps its layout. Every port
lies in P − 2 .. P + 3, so two servers whose ``--port`` differ by 6 or more never collide, whatever
each of them opens (the usual layouts, 10911 / 10921 / 11911, are far apart). With ``--port 0``
every default is 0 too: each port is a free one, printed on the start-up line.

``--http`` and ``--grpc-port`` take ``off``. A port the operator named (``--port``, ``--http N``,
``--grpc-port N``) that cannot be bound stops the start with one line naming the flag and exit
status ``EXIT_PORT_UNUSABLE``; a default HTTP or gRPC port that is taken only leaves that door
closed, with a warning naming the flag that would move it (``optional_front_doors``).
"""

from __future__ import annotations

import argparse

from clients.cli.arg_types import PORT_OFF
from server.port_errors import PortUnusableError

#: Exit status when a port cannot be bound (in use, or not allowed): nothing was served.
EXIT_PORT_UNUSABLE = 4
#: Default HTTP port: the listen port + this.
HTTP_PORT_OFFSET = 2
#: Default gRPC port (``--writable``): the listen port + this.
GRPC_PORT_OFFSET = 3


def _derived(port: int, offset: int, flag: str) -> int:
    if port == 0:
        return 0
    if port + offset > 65535:
        raise ValueError(f"no default {flag} port above listen port {port}: give {flag} PORT or {flag} off")
    return port + offset


def http_port_of(given: int | None, port: int) -> int | None:
    """``--http``: the port given, None for ``off``, else the listen port + 2 (0 with ``--port 0``)."""
    if given == PORT_OFF:
        return None
    if given is not None:
        return given
    return _derived(port, HTTP_PORT_OFFSET, "--http")


def grpc_port_of(given: int | None, port: int, writable: bool) -> int | None:
    """``--grpc-port``: the port given, None for ``off``; unnamed, the listen port + 3 under
    ``--writable`` (0 with ``--port 0``), else None (a read-only server opens no gRPC port)."""
    if given == PORT_OFF:
        return None
    if given is not None:
        return given
    if not writable:
        return None
    return _derived(port, GRPC_PORT_OFFSET, "--grpc-port")


def optional_front_doors(args: argparse.Namespace) -> frozenset[str]:
    """The front doors whose port ``serve`` chose itself: taken, they stay closed and serving goes on."""
    doors = set()
    if getattr(args, "http", None) is None:
        doors.add("http")
    if getattr(args, "grpc_port", None) is None:
        doors.add("grpc")
    return frozenset(doors)


def unusable_port_message(exc: PortUnusableError, args: argparse.Namespace) -> str:
    """One line for a port that could not be bound: where, why, and the flag that chose it."""
    if exc.role == "fast":
        chosen = "the fast port is --port - 2: choose another --port"
    elif exc.role == "listen":
        chosen = (
            f"--port {args.port}"
            if args.port is not None
            else "the default listen port, broker.conf's listenPort else 10911: choose another with --port"
        )
    elif exc.role == "HTTP":
        chosen = f"--http {args.http}" if args.http is not None else "the default --http port"
    else:
        chosen = f"--grpc-port {args.grpc_port}" if args.grpc_port is not None else "the default --grpc-port"
    return f"{exc} ({chosen})"


def door_left_closed(door: str, port: int) -> str:
    """The warning for a default port that was taken: which door is closed and what moves it."""
    if door == "grpc":
        return (
            f"gRPC is off: its default port {port} (--port + {GRPC_PORT_OFFSET}) cannot be bound; give "
            "--grpc-port N (or --grpc-port off to say so)"
        )
    return (
        f"HTTP is off: its default port {port} (--port + {HTTP_PORT_OFFSET}) cannot be bound; give "
        "--http N (or --http off to say so)"
    )
