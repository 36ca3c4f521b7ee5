"""Settings the suite gives the official 5.x Python client (``rocketmq-python-client``).

``V5_REQUEST_TIMEOUT``: the client's per-call deadline (seconds; its default is 3). Under the
suite's four workers a QueryRoute to a pure-Python server once took longer than 3 s while JVMs
started beside it, and the SimpleConsumer then failed with "failed to fetch topic ... route". No
test checks that deadline: each checks what the calls answer, so they get room for a loaded machine.

``bind_telemetry_callers_to_the_io_loop``: a race in the client itself (5.x Python, as pinned). A
route answer is handled by a done-callback of a ``concurrent.futures.Future``; when the answer is
already there as the callback is added (the calling thread was descheduled between the two: a loaded
machine), the callback runs in the calling thread rather than the client's I/O loop thread. For a new
broker address that callback opens the Telemetry stream, which grpc.aio creates on the calling
thread's current event loop: a worker thread (``asyncio.to_thread``, the tests' way of calling the
blocking client) has none, so it fails ("There is no current event loop in thread 'asyncio_0'"), the
route is never cached, and every send then fails with "failed to fetch topic ... route". The client's
own ``RpcChannel.create_channel`` sets its I/O loop as the calling thread's current loop when that
thread creates a channel; the wrapper does the same for the thread that opens a Telemetry stream,
only when that thread is not the main thread and has no loop of its own. Seen in the pure pass at
load 7-9 (tests/server/grpc/test_official_transactions.py); ``tests/server/grpc/test_v5_client_race.py``
reproduces the failing call.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

V5_REQUEST_TIMEOUT = 10


def bind_telemetry_callers_to_the_io_loop() -> bool:
    """Wrap the client's ``RpcClient.telemetry_stream`` as the docstring above says; False when the
    client is not installed. Idempotent."""
    try:
        from rocketmq.v5.client.connection.rpc_client import RpcClient
    except ImportError:
        return False
    original = RpcClient.telemetry_stream
    if getattr(original, "_rmq_bound_to_io_loop", False):
        return True

    @functools.wraps(original)
    def telemetry_stream(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            try:
                asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:  # no loop in this thread: the client's own I/O loop, as create_channel does
                asyncio.set_event_loop(RpcClient.get_channel_io_loop())
        return original(self, *args, **kwargs)

    telemetry_stream._rmq_bound_to_io_loop = True  # type: ignore[attr-defined]
    RpcClient.telemetry_stream = telemetry_stream
    return True
