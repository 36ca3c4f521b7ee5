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

TLS (``server.grpc.tls``): ``disabled`` is grpcio's plaintext port itself. ``permissive`` (the
Proxy's default) and ``enforcing`` bind grpcio on loopback only, a TLS port (grpcio's
``ssl_server_credentials``: the given or a generated self-signed certificate, client certificates
required when a client CA is given) and for ``permissive`` a plaintext one, and put the relay
(``server.grpc.relay``) on the public port; a TLS handshake must finish within the handshake
timeout there too (``grpc.server_handshake_timeout_ms``).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import grpc

from server.grpc.admission import Admission
from server.grpc.defaults import (
    DEFAULT_MAX_CONCURRENT_RPCS,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
)
from server.grpc.relay import RelayPort
from server.grpc.request_budget import RequestBudget
from server.grpc.service import MessagingService
from server.grpc.tls import DISABLED, PERMISSIVE, GrpcTls, certificate_names, fingerprint, self_signed
from server.grpc.v2 import service_grpc
from server.port_errors import PortUnusableError, probe

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
        tls: GrpcTls | None = None,
        advertised_host: str = "",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_request_bytes_per_connection: int = DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION,
        read_timeout: float = 30.0,
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        self.tls = tls if tls is not None else GrpcTls(mode=DISABLED)
        self.advertised_host = advertised_host or host or "127.0.0.1"
        self.idle_timeout = idle_timeout
        options: list[tuple[str, int]] = [
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_length),
            ("grpc.max_send_message_length", max_message_length),
            ("grpc.max_concurrent_streams", max_concurrent_streams),
            ("grpc.http2.bdp_probe", 0),
        ]
        if idle_timeout > 0:
            options.append(("grpc.max_connection_idle_ms", int(idle_timeout * 1000)))
        if self.tls.mode != DISABLED:
            options.append(("grpc.server_handshake_timeout_ms", int(self.tls.handshake_timeout * 1000)))
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
        #: The public port's relay (None with TLS disabled: grpcio's port is the public one).
        self.relay: RelayPort | None = None
        #: The certificate served (PEM; None with TLS disabled) and whether it was generated.
        self.certificate: bytes | None = None
        self.generated_certificate = False

    async def start(self) -> int:
        """Bind and serve; the bound port (the one picked for port 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host or "0.0.0.0"
        if self.tls.mode == DISABLED:
            bound = self._bind(
                lambda: self._server.add_insecure_port(f"{host}:{self.port}"), self.host, self.port
            )
            await self._server.start()
            self._started = True
            self.port = bound
            return bound
        tls_port = self._bind(
            lambda: self._server.add_secure_port("127.0.0.1:0", self._credentials()), "127.0.0.1", 0
        )
        plaintext_port = None
        if self.tls.mode == PERMISSIVE:
            plaintext_port = self._bind(lambda: self._server.add_insecure_port("127.0.0.1:0"), "127.0.0.1", 0)
        relay = RelayPort(
            self.host,
            self.port,
            tls_port=tls_port,
            plaintext_port=plaintext_port,
            handshake_timeout=self.tls.handshake_timeout,
            max_connections=self.tls.max_connections,
            stall_timeout=self.idle_timeout,
        )
        await self._server.start()
        self._started = True
        try:
            self.port = await relay.start()
        except OSError as exc:
            await self.stop(0)
            raise PortUnusableError.from_os_error("gRPC", self.host, self.port, exc) from None
        self.relay = relay
        self.service.peer_of = relay.peer_of
        self.admission.peer_of = relay.peer_of
        assert self.certificate is not None
        log.info(
            "gRPC TLS %s (%s): %s certificate, SHA-256 %s%s",
            self.tls.mode,
            "TLS and plaintext clients on one port" if plaintext_port else "TLS clients only",
            "a generated self-signed" if self.generated_certificate else "the given",
            fingerprint(self.certificate),
            ", client certificates required" if self.tls.client_ca_pem else "",
        )
        return self.port

    @staticmethod
    def _bind(add_port: Callable[[], int], host: str, port: int) -> int:
        try:
            bound = add_port()
        except RuntimeError as exc:  # grpcio raises when it cannot bind, without saying why
            raise probe("gRPC", host, port, str(exc)) from None
        if bound == 0:
            raise probe("gRPC", host, port, "grpc could not bind it")
        return int(bound)

    def _credentials(self) -> grpc.ServerCredentials:
        """grpcio's TLS: the given certificate, else a self-signed one for the names clients dial."""
        cert, key = self.tls.cert_pem, self.tls.key_pem
        if cert is None or key is None:
            cert, key = self_signed(certificate_names(self.host, self.advertised_host, socket.gethostname()))
            self.generated_certificate = True
        self.certificate = cert
        ca = self.tls.client_ca_pem
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )

    async def stop(self, grace: float) -> None:
        """Stop taking calls, give those in flight ``grace`` seconds, then cancel the rest."""
        if self.relay is not None:
            self.relay.close()
        if self._started:
            self._started = False
            await self._server.stop(grace)
        if self.relay is not None:
            self.relay.abort_all()
            self.relay = None
