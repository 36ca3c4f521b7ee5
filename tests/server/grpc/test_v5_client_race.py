"""The official 5.x Python client's Telemetry race, and the suite's workaround for it
(``tests/support/v5_client.py``, installed by ``tests/conftest.py``).

Under load a route answer's callback can run in the thread that asked, and for a new broker address
it opens the Telemetry stream there; grpc.aio needs that thread's current event loop, which a worker
thread does not have. The race itself depends on scheduling; its failing call does not: the client's
``telemetry_stream`` called from a fresh thread with no event loop, as that callback calls it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.serve_process import kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_client import V5_REQUEST_TIMEOUT, bind_telemetry_callers_to_the_io_loop

rocketmq = pytest.importorskip("rocketmq")
from rocketmq.v5.client.connection.rpc_client import RpcClient  # noqa: E402

TOPIC = "GrpcRace"


def in_a_fresh_thread(call: object) -> BaseException | None:
    """Run ``call`` in a new thread (no event loop of its own); what it raised, or None."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()  # type: ignore[operator]
        except BaseException as exc:  # handed back to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return raised[0] if raised else None


async def test_a_thread_without_an_event_loop_opens_the_telemetry_stream(tmp_path: Path) -> None:
    assert bind_telemetry_callers_to_the_io_loop()  # installed by conftest; idempotent
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, _, grpc_port = await start_writable_grpc(store)
    config = rocketmq.ClientConfiguration(
        f"127.0.0.1:{grpc_port}", rocketmq.Credentials(), request_timeout=V5_REQUEST_TIMEOUT
    )
    producer = rocketmq.Producer(config, (TOPIC,))
    try:
        producer.startup()
        endpoints = config.rpc_endpoints

        def open_stream(method: object) -> object:
            return lambda: method(producer.rpc_client, endpoints, producer, producer.sign(), True)  # type: ignore[operator]

        # the client as released: its own call fails in such a thread
        unwrapped = RpcClient.telemetry_stream.__wrapped__  # type: ignore[attr-defined]
        failed = in_a_fresh_thread(open_stream(unwrapped))
        assert isinstance(failed, RuntimeError) and "no current event loop" in str(failed)
        # with the suite's workaround the same call opens the stream
        assert in_a_fresh_thread(open_stream(RpcClient.telemetry_stream)) is None
        receipt = producer.send(_message(b"after the race"))
        assert receipt.message_id
    finally:
        producer.shutdown()
        await kill_if_running(proc)


def _message(body: bytes) -> object:
    msg = rocketmq.Message()
    msg.topic = TOPIC
    msg.body = body
    return msg
