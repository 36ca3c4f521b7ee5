"""gRPC SendMessage under concurrent calls, checkout B against a base checkout A (issue 33).

    taskset -c 0 python -m benchmarks.grpc_send --base DIR [--rounds 2] [--seconds 5] [--warmup 2]
        [--inflight 1,32] [--batch 1] [--body 1024] [--port 20900]

Each round starts ``serve --writable`` of A and of B (order reversed every round) on core 1 on a
fresh store (``--grpc-port`` = its port + 3, the default TLS-permissive relay in front, HTTP off), and
drives it from one child process on core 0: a remoting send creates the topic (auto-created from
TBW102, 4 queues), then per ``--inflight`` value, that many asyncio tasks on one grpcio channel
each sending SendMessage requests of ``--batch`` NORMAL messages (``--body`` bytes, the raw official
v2 stubs, as ``grpc_round_trip`` uses them) back to back for ``--warmup`` uncounted then ``--seconds``
counted seconds. Printed per row: messages/s and the p50 / p99 of one call, the median over rounds,
and B / A per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import alternating, vs_java

REPO = Path(__file__).resolve().parents[1]
TOPIC = "GrpcSend"
META = (("x-mq-client-id", "bench-grpc-send"), ("x-mq-protocol", "GRPC_V2"))


async def load(grpc_addr: str, remoting: str, inflight: int, args: argparse.Namespace) -> dict:
    """One row: ``inflight`` tasks sending for ``args.warmup`` + ``args.seconds`` seconds."""
    import grpc

    from clients.producer import Producer
    from protocol.message_id import UniqueIdGenerator
    from server.grpc.v2 import Code, MessageType, definition, service, service_grpc

    async with Producer(remoting, timeout=10.0) as producer:
        await producer.send(TOPIC, b"create")
    ids = UniqueIdGenerator()
    body = b"x" * args.body
    resource = definition.Resource(name=TOPIC)
    latencies: list[float] = []
    errors = messages = 0

    def request() -> service.SendMessageRequest:
        batch = []
        for _ in range(args.batch):
            m = definition.Message(topic=resource, body=body)
            m.system_properties.message_id = ids.next_id()
            m.system_properties.message_type = MessageType.NORMAL
            batch.append(m)
        return service.SendMessageRequest(messages=batch)

    async with grpc.aio.insecure_channel(grpc_addr) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        counted_from = time.monotonic() + args.warmup
        stop_at = counted_from + args.seconds

        async def worker() -> None:
            nonlocal errors, messages
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                answer = await stub.SendMessage(request(), metadata=META, timeout=10)
                took = time.perf_counter() - started
                if time.monotonic() < counted_from:
                    continue
                if answer.status.code != Code.OK:
                    errors += 1
                    continue
                latencies.append(took)
                messages += args.batch

        await asyncio.gather(*(worker() for _ in range(inflight)))
    latencies.sort()
    n = len(latencies)
    return {
        "inflight": inflight,
        "msgs_per_s": messages / args.seconds,
        "p50_ms": latencies[n // 2] * 1000 if n else float("nan"),
        "p99_ms": latencies[min(n - 1, n * 99 // 100)] * 1000 if n else float("nan"),
        "errors": errors,
    }


def run_child(server: vs_java.Server, args: argparse.Namespace) -> dict[int, dict]:
    """The load in a child on core 0 against ``server``: inflight -> its row."""
    out = {}
    for inflight in args.inflight:
        cmd = ["taskset", "-c", vs_java.LOAD_CORE, sys.executable, "-m", "benchmarks.grpc_send", "--child"]
        cmd += [f"127.0.0.1:{server.port + 3}", f"127.0.0.1:{server.port}", str(inflight)]
        cmd += ["--seconds", str(args.seconds), "--warmup", str(args.warmup), "--batch", str(args.batch)]
        cmd += ["--body", str(args.body)]
        budget = args.warmup + args.seconds + 60
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=budget, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"  {server.name} {json.dumps(row)}", file=sys.stderr)
        out[inflight] = row
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grpc_send", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--base", type=Path, help="a built checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--inflight", default="1,32", help="comma-separated calls in flight, a row each")
    parser.add_argument("--batch", type=int, default=1, help="messages per SendMessage")
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--port", type=int, default=20900)
    parser.add_argument("--child", nargs=3, metavar=("GRPC", "REMOTING", "INFLIGHT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        grpc_addr, remoting, inflight = args.child
        print(json.dumps(asyncio.run(load(grpc_addr, remoting, int(inflight), args))))
        return 0
    args.inflight = [int(k) for k in args.inflight.split(",") if k]
    names = ["B"] if args.base is None else ["A", "B"]

    def start(name: str, work: Path, port: int) -> vs_java.Server:
        checkout = REPO if name == "B" else args.base
        (work / "store").mkdir()
        server = alternating.start_writable(
            checkout, work / "store", port, work / "serve.log", "--grpc-port", str(port + 3), "--http", "off"
        )
        server.name = name
        return server

    runs = alternating.alternate(
        names, args.rounds, args.port, start, lambda s: run_child(s, args), "grpc-send-"
    )
    print(f"load average {os.getloadavg()}; cpu {alternating.cpu_model()}; {args.rounds} rounds of "
          f"{args.seconds} s a row, {args.batch} message(s) of {args.body} B per call")  # fmt: skip
    print("| row | " + " | ".join(names) + (" | B / A |" if "A" in names else " |"))
    print("|---|" + "---:|" * (len(names) + ("A" in names)))
    for inflight in args.inflight:
        for key, label, larger in (
            ("msgs_per_s", "msgs/s", True),
            ("p50_ms", "p50 ms", False),
            ("p99_ms", "p99 ms", False),
        ):
            cells = [f"{statistics.median(r[inflight][key] for r in runs[n]):,.2f}" for n in names]
            if "A" in names:
                per = [
                    (b[inflight][key] / a[inflight][key]) if larger else (a[inflight][key] / b[inflight][key])
                    for a, b in zip(runs["A"], runs["B"], strict=True)
                ]
                cells.append(alternating.ratio_cell(per))
            errors = sum(r[inflight]["errors"] for n in names for r in runs[n])
            suffix = f" ({errors} errors)" if errors else ""
            print(f"| {inflight} in flight, {label}{suffix} | " + " | ".join(cells) + " |")
    print("(B / A: larger is better; for latencies A / B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
