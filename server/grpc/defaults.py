"""The gRPC port's defaults, apart from the server so that settings and the command line can name
them without importing grpcio (``serve`` announces its remoting port before the gRPC libraries are
loaded)."""

from __future__ import annotations

#: Streams one HTTP/2 connection may have open at once.
DEFAULT_MAX_CONCURRENT_STREAMS = 100
#: gRPC calls in flight on all connections together; past it grpc answers RESOURCE_EXHAUSTED.
DEFAULT_MAX_CONCURRENT_RPCS = 10_000
