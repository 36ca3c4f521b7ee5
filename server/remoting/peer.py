"""The address of the client whose request is being processed, for processors that store it.

The broker records a SEND's sender (``ctx.channel().remoteAddress()``) as the message's born host.
Processors here are called with the request only, so the connection sets this context variable
around each dispatch; a coroutine processor's task copies the context when it is created, so it
sees the right peer too.
"""

from __future__ import annotations

from contextvars import ContextVar

#: ``(host, port)`` of the peer, or None outside a connection (a processor called directly).
CURRENT_PEER: ContextVar[tuple[str, int] | None] = ContextVar("rmq_current_peer", default=None)
