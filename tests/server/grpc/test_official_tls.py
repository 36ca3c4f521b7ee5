"""The official 5.x Python and Node.js clients, TLS on and off, against ``serve --writable``'s ``--grpc-tls``
modes.

The Go and Java 5.x clients dial TLS by default, the Python and Node clients plaintext; the Proxy's
default (``permissive``) takes both on one port. Each round trip (send, receive, ack:
``tests.support.v5_tls_round_trip``) runs in a child process trusting the certificate the server
presents, which is the self-signed one ``serve`` made at start (read off the port with the standard
library's ``ssl``, as a user would with ``openssl s_client``). The Node.js client (``sslEnabled``,
``tests/server/interop5/client.js``'s ``job.ssl``) is given it the same way: grpc-js reads
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` too.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from tests.support.node_client import run_node_client
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc
from tests.support.topics_json import write_topics
from tests.support.v5_tls_round_trip import run_round_trip

pytest.importorskip("rocketmq")

TOPIC = "TlsTopic"
GROUP = "TlsGroup"


async def served_certificate(port: int, into: Path) -> str:
    """The PEM certificate the gRPC port presents, written to ``into``; its path."""
    pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port), timeout=5)
    into.write_text(pem)
    return str(into)


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
    finally:
        await kill_if_running(proc)
    assert proc.returncode == 0


async def test_permissive_takes_tls_and_plaintext_clients_on_one_port(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, _, grpc_port = await start_writable_grpc(store)  # permissive: the default
    try:
        roots = await served_certificate(grpc_port, tmp_path / "served.pem")
        endpoint = f"127.0.0.1:{grpc_port}"
        over_tls, over_plaintext = await asyncio.gather(
            run_round_trip(endpoint, TOPIC, GROUP, tls=True, roots=roots),
            run_round_trip(endpoint, TOPIC, GROUP + "Plain", tls=False, roots=None),
        )
    finally:
        await stop(proc)
    for report in (over_tls, over_plaintext):
        assert report["error"] is None and report["status"] == 0, report
        assert report["sent"] is not None
    # each consumer group sees both messages; each receive got at least the one it sent... or the
    # other's: the two runs share the topic, so the ids are checked against both sends
    sent = {over_tls["sent"], over_plaintext["sent"]}
    assert set(over_tls["received"]) <= sent and set(over_plaintext["received"]) <= sent
    assert over_tls["received"] and over_plaintext["received"]


async def test_enforcing_refuses_a_plaintext_client_and_serves_tls(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    log = tmp_path / "serve.log"
    proc, _, grpc_port = await start_writable_grpc(store, "--grpc-tls", "enforcing", log=log)
    try:
        roots = await served_certificate(grpc_port, tmp_path / "served.pem")
        endpoint = f"127.0.0.1:{grpc_port}"
        refused = await run_round_trip(endpoint, TOPIC, GROUP, tls=False, roots=None)
        over_tls = await run_round_trip(endpoint, TOPIC, GROUP, tls=True, roots=roots)
    finally:
        await stop(proc)
    assert refused["status"] != 0 and refused["sent"] is None, refused
    assert refused["error"] is not None
    assert over_tls["error"] is None and over_tls["status"] == 0, over_tls
    assert over_tls["received"] == [over_tls["sent"]]
    text = log.read_text()
    refusals = [line for line in text.splitlines() if "refused a plaintext gRPC connection" in line]
    # the client retried its connection again and again: one line per burst, never a traceback
    assert len(refusals) == 1, text
    assert "--grpc-tls enforcing takes TLS clients only" in refusals[0]
    assert "Traceback" not in text


async def test_disabled_refuses_a_tls_client_and_serves_plaintext(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, _, grpc_port = await start_writable_grpc(store, "--grpc-tls", "disabled")
    try:
        with pytest.raises(ssl.SSLError):
            await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", grpc_port), timeout=5)
        endpoint = f"127.0.0.1:{grpc_port}"
        # a certificate it would trust, were one presented
        roots = tmp_path / "any.pem"
        from server.grpc.tls import self_signed

        roots.write_bytes(self_signed(["127.0.0.1"])[0])
        refused = await run_round_trip(endpoint, TOPIC, GROUP, tls=True, roots=str(roots))
        plaintext = await run_round_trip(endpoint, TOPIC, GROUP, tls=False, roots=None)
    finally:
        await stop(proc)
    assert refused["status"] != 0 and refused["sent"] is None and refused["error"] is not None, refused
    assert plaintext["error"] is None and plaintext["status"] == 0, plaintext
    assert plaintext["received"] == [plaintext["sent"]]


async def test_the_node_client_sends_with_tls_on_and_off_on_one_permissive_port(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_topics(store, {TOPIC: None})
    proc, port, grpc_port = await start_writable_grpc(store)
    try:
        roots = await served_certificate(grpc_port, tmp_path / "served.pem")

        def job(ssl_on: bool) -> dict:
            name = "tls" if ssl_on else "plaintext"
            return {
                "mode": "produce",
                "ssl": ssl_on,
                "endpoints": f"127.0.0.1:{grpc_port}",
                "topics": [TOPIC],
                "messages": [
                    {"name": name, "topic": TOPIC, "body": f"node over {name}", "keys": [f"k-{name}"]}
                ],
            }

        over_tls, over_plaintext = await asyncio.gather(
            run_node_client(job(True), timeout=30, env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": roots}),
            run_node_client(job(False), timeout=30),
        )
        async with QueryAdmin(f"127.0.0.1:{port}") as admin:
            for name, report in (("tls", over_tls), ("plaintext", over_plaintext)):
                (found,) = (await admin.query_by_key(TOPIC, f"k-{name}")).messages
                assert found.body == f"node over {name}".encode()
                assert found.properties["UNIQ_KEY"] == report["receipts"][name]["messageId"]
    finally:
        await stop(proc)
