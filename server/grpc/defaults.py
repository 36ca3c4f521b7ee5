"""The gRPC port's defaults, apart from the server so that settings and the command line can name
them without importing grpcio (``serve`` announces its remoting port before the gRPC libraries are
loaded)."""

from __future__ import annotations

#: Streams one HTTP/2 connection may have open at once.
DEFAULT_MAX_CONCURRENT_STREAMS = 100
#: gRPC calls in flight on all connections together; past it grpc answers RESOURCE_EXHAUSTED.
DEFAULT_MAX_CONCURRENT_RPCS = 10_000

#: Bytes of gRPC request messages all calls together may hold.
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: Bytes of request messages the calls of one connection may hold.
DEFAULT_MAX_REQUEST_BYTES_PER_CONNECTION = 32 * 1024 * 1024
