"""The gRPC port: grpcio's asyncio server for ``MessagingService``, its bounds, start and stop.

It runs on the event loop of the remoting ports (same process, same store). Bounds as on the
remoting port: a message larger than ``max_message_length`` (the remoting frame limit, 16 MiB by
default) is refused by grpc with RESOURCE_EXHAUSTED before it is decoded; each HTTP/2 connection
may have at most ``max_concurrent_streams`` streams open (the SETTINGS the server announces); all
connections together at most ``max_concurrent_rpcs`` calls in flight, past which grpc answers
RESOURCE_EXHAUSTED; idle connections are closed after ``idle_timeout``. The bytes of the request
messages in flight are bounded per connection and in total, and a caller without a valid signature
is answered before its message is read (``admission``, ``request_budget``); for that the
transport's bandwidth-delay probe is off, so that grpc takes no more of a message than one
flow-control window (64 KiB) until the call is let in (with the probe on, each stream's window grows
to megabytes: 30 calls left waiting held 500 MB). ``SO_REUSEPORT``, which grpc
turns on by default, is off: a second server on the same port must fail to start, not share it.
"""

from __future__ import annotations

import logging

import grpc

from server.grpc.admission import Admission
from server.grpc.defaults import (
    DEFAULT_MAX_CONCURRENT_RPCS,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
)
from server.grpc.request_budget import RequestBudget
from server.grpc.service import MessagingService
from server.grpc.v2 import service_grpc

log = logging.getLogger(__name__)


class GrpcServer:
    """One listening gRPC port serving ``service``."""

    def __init__(
        self,
        service: MessagingService,
        host: str,
        port: int,
        *,
        max_message_length: int,
        max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
        max_concurrent_rpcs: int = DEFAULT_MAX_CONCURRENT_RPCS,
        idle_timeout: float = 120.0,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_request_bytes_per_connection: int = DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
        read_timeout: float = 30.0,
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        options: list[tuple[str, int]] = [
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_length),
            ("grpc.max_send_message_length", max_message_length),
            ("grpc.max_concurrent_streams", max_concurrent_streams),
            ("grpc.http2.bdp_probe", 0),
        ]
        if idle_timeout > 0:
            options.append(("grpc.max_connection_idle_ms", int(idle_timeout * 1000)))
        # Room for at least one message of the largest size, whatever the limits say.
        per_connection = max(max_request_bytes_per_connection, max_message_length)
        #: The bytes of request messages in flight (``request_budget``).
        self.budget = RequestBudget(
            reserve=max_message_length,
            per_connection=per_connection,
            limit=max(max_request_bytes, per_connection),
        )
        self.admission = Admission(self.budget, service.access, read_timeout)
        self._server = grpc.aio.server(
            options=options, maximum_concurrent_rpcs=max_concurrent_rpcs, interceptors=[self.admission]
        )
        service_grpc.add_MessagingServiceServicer_to_server(service, self._server)
        self._started = False

    async def start(self) -> int:
        """Bind and serve; the bound port (the one picked for port 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host or "0.0.0.0"
        try:
            bound = self._server.add_insecure_port(f"{host}:{self.port}")
        except RuntimeError as exc:  # grpcio raises when it cannot bind
            raise OSError(f"cannot listen for gRPC on {host}:{self.port}: {exc}") from None
        if bound == 0:
            raise OSError(f"cannot listen for gRPC on {host}:{self.port}")
        await self._server.start()
        self._started = True
        self.port = bound
        return bound

    async def stop(self, grace: float) -> None:
        """Stop taking calls, give those in flight ``grace`` seconds, then cancel the rest."""
        if self._started:
            self._started = False
            await self._server.stop(grace)
