"""The official 5.x Python client's round trip, TLS on or off, as a child process of its own.

``python -m tests.support.v5_tls_round_trip ENDPOINT TOPIC GROUP tls|plaintext`` sends one message
with the Producer, receives it with a SimpleConsumer and acks it, then prints a JSON report (the
sent message id, the received ids, the first error's text) and exits 0 when all of it worked.

A process of its own because the client's TLS trusts the default roots only (it passes no
certificate to ``grpc.ssl_channel_credentials()``), which grpcio reads once per process from
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``: the test points that at the server's certificate for this
process alone. ``run_round_trip`` starts it and reads the report.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from tests.support.paths import REPO_ROOT

#: The receive's long polling: the Proxy's minimum.
AWAIT_SECONDS = 5


def round_trip(endpoint: str, topic: str, group: str, tls: bool) -> dict[str, Any]:
    import rocketmq

    report: dict[str, Any] = {"sent": None, "received": [], "acked": False, "error": None}
    config = rocketmq.ClientConfiguration(endpoint, rocketmq.Credentials(), request_timeout=3)
    producer = rocketmq.Producer(config, (topic,), tls_enable=tls)
    consumer = None
    try:
        producer.startup()
        message = rocketmq.Message()
        message.topic = topic
        message.body = b"over " + (b"TLS" if tls else b"plaintext")
        message.tag = "TagA"
        report["sent"] = producer.send(message).message_id
        consumer = rocketmq.SimpleConsumer(
            config,
            group,
            {topic: rocketmq.FilterExpression("*")},
            await_duration=AWAIT_SECONDS,
            tls_enable=tls,
        )
        consumer.startup()
        got = consumer.receive(16, 15) or []
        report["received"] = [m.message_id for m in got]
        for m in got:
            consumer.ack(m)
        report["acked"] = bool(got)
    except Exception as exc:  # the report says what failed; the exit status says that it did
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for client in (consumer, producer):
            if client is not None:
                try:
                    client.shutdown()
                except Exception:  # a client that never started may not shut down cleanly
                    pass
    return report


async def run_round_trip(
    endpoint: str, topic: str, group: str, *, tls: bool, roots: str | None, timeout: float = 40
) -> dict[str, Any]:
    """Run the round trip in a child process (``roots``: the PEM file its TLS trusts); its report."""
    env = dict(os.environ)
    if roots is not None:
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = roots
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.v5_tls_round_trip", endpoint, topic, group,
        "tls" if tls else "plaintext", cwd=REPO_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = out.decode().strip().splitlines()
    assert lines, f"the round trip printed nothing (exit status {proc.returncode})"
    report: dict[str, Any] = json.loads(lines[-1])
    report["status"] = proc.returncode
    return report


if __name__ == "__main__":
    endpoint, topic, group, mode = sys.argv[1:5]
    result = round_trip(endpoint, topic, group, mode == "tls")
    print(json.dumps(result), flush=True)
    # the client's threads may linger after shutdown: leave at once
    os._exit(0 if result["error"] is None and result["acked"] else 1)
