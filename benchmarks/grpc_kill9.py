"""kill -9 of ``serve --writable`` under concurrent gRPC SendMessage calls: nothing acknowledged lost.

    python -m benchmarks.grpc_kill9 [--kills 5] [--inflight 32] [--seed 1] [--port 21000]

A server (``serve --writable``, gRPC on its port + 3, HTTP off) on one store is started, loaded by
``--inflight`` SendMessage tasks on one grpcio channel (one NORMAL message of 256 bytes a call, the
official v2 stubs), and SIGKILLed at a seeded random moment 0.5-2.5 s into the load, ``--kills``
times, each restart on the same store. Every call answered OK is journalled (its message id); a
call that failed (the kill) may or may not have stored its message. Then a last start, and every
acknowledged message id is asked for with QUERY_MESSAGE by unique key (``mqadmin
queryMsgByUniqueKey``): the JSON report lists the ids not found (``lost``, must be empty).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import vs_java

REPO = Path(__file__).resolve().parents[1]
TOPIC = "GrpcKill"
META = (("x-mq-client-id", "bench-grpc-kill9"), ("x-mq-protocol", "GRPC_V2"))


def start(store: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = ["taskset", "-c", vs_java.SERVER_CORE, sys.executable, "-m", "clients.cli", "serve", "--writable"]
    cmd += ["--store", str(store), "--port", str(port), "--grpc-port", str(port + 3), "--http", "off"]
    with open(log, "ab") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    vs_java.wait_port(port, 60, process)
    vs_java.wait_port(port + 3, 60, process)
    return process


async def load(
    port: int, inflight: int, kill_after: float, server: subprocess.Popen[bytes]
) -> tuple[set, int]:
    """Send until the server is killed (``kill_after`` seconds in): (acknowledged ids, failed calls)."""
    import grpc

    from protocol.message_id import UniqueIdGenerator
    from server.grpc.v2 import Code, MessageType, definition, service, service_grpc

    ids = UniqueIdGenerator()
    acked: set[str] = set()
    failed = 0
    resource = definition.Resource(name=TOPIC)
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port + 3}") as channel:
        stub = service_grpc.MessagingServiceStub(channel)

        async def worker() -> None:
            nonlocal failed
            while not stop.is_set():
                message = definition.Message(topic=resource, body=b"k" * 256)
                message.system_properties.message_id = ids.next_id()
                message.system_properties.message_type = MessageType.NORMAL
                try:
                    answer = await stub.SendMessage(
                        service.SendMessageRequest(messages=[message]), metadata=META, timeout=5
                    )
                except grpc.aio.AioRpcError:
                    failed += 1
                    await asyncio.sleep(0.05)
                    continue
                if answer.status.code == Code.OK:
                    acked.add(answer.entries[0].message_id)
                else:
                    failed += 1

        async def killer() -> None:
            await asyncio.sleep(kill_after)
            server.send_signal(signal.SIGKILL)
            await asyncio.sleep(0.5)
            stop.set()

        await asyncio.gather(killer(), *(worker() for _ in range(inflight)))
    return acked, failed


async def lost_ids(port: int, acked: set[str]) -> list[str]:
    from clients.admin import QueryAdmin

    lost = []
    async with QueryAdmin(f"127.0.0.1:{port}") as admin:
        for unique in sorted(acked):
            try:
                found = await admin.query_by_unique_key(TOPIC, unique)
            except Exception:
                found = []
            if not found:
                lost.append(unique)
    return lost


async def create_topic(port: int) -> None:
    from clients.producer import Producer

    async with Producer(f"127.0.0.1:{port}", timeout=10.0) as producer:
        await producer.send(TOPIC, b"create")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grpc_kill9", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=21000)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    acked: set[str] = set()
    failed = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpc-kill9-") as tmp:
        store, log = Path(tmp) / "store", Path(tmp) / "serve.log"
        store.mkdir()
        for kill in range(args.kills):
            server = start(store, args.port, log)
            if kill == 0:
                asyncio.run(create_topic(args.port))
            got, lost_calls = asyncio.run(load(args.port, args.inflight, rng.uniform(0.5, 2.5), server))
            server.wait()
            acked |= got
            failed += lost_calls
            print(f"kill {kill + 1}: {len(got)} acknowledged, {lost_calls} failed", file=sys.stderr)
        server = start(store, args.port, log)
        try:
            lost = asyncio.run(lost_ids(args.port, acked))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    report = {"kills": args.kills, "acknowledged": len(acked), "failed_calls": failed, "lost": lost}
    report["seconds"] = round(time.monotonic() - started, 1)
    report["ok"] = not lost and len(acked) > 0
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
