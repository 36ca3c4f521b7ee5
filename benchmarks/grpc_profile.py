"""Where a gRPC call's time goes: py-spy of ``serve --writable`` under ``grpc_load``'s Go generator.

    flock -o /work/bench.lock python -m benchmarks.grpc_profile --row send:32 [--checkout DIR]
        [--seconds 8] [--warmup 2] [--rate 400] [--prefill 60000] [--raw OUT.txt] [--top 25]

One server (``--checkout``, this one by default) on core 1, the generator of ``grpc_load`` on core 0,
the same row kinds (``send``, ``receive-each``, ``receive-batch``); py-spy records the server's
stacks (``--nonblocking``, raw) over the measured seconds. Printed: the generator's result, then the
share of the samples of the loop's thread (py-spy's idle samples left out) under each of the
stages named in ``STAGES`` (a sample counts for the first stage whose function is on its stack),
and the functions with the largest self and inclusive shares. The Go generator needs Go and
grpc-go from ``/usr/share/gocode`` (``grpc_load.build_go``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import shutil
import subprocess
import sys
import tempfile
import threading
from argparse import Namespace
from pathlib import Path

from benchmarks import alternating, grpc_load

REPO = Path(__file__).resolve().parents[1]

#: (label, a function's name as py-spy prints it, ``name (file)``, matched as a substring), in the
#: order a sample is given to the first that is on its stack.
STAGES = (
    ("receive: the v2 Message of each record", "to_v2_message ("),
    ("receive: the v2 Message of each record", "(server/grpc/message_bytes.py"),
    ("receive: the leases and the store read", "receive (server/broker/receive_leases.py"),
    ("ack", "ack (server/grpc/receiving.py"),
    ("send: the conversion (to_broker_message)", "to_broker_message ("),
    ("send: the conversion (to_broker_message)", "broker_messages ("),
    ("send: the store (GrpcWriter.send)", "send (server/grpc/sending.py"),
    ("the service's other Python", "(server/grpc/service.py"),
    ("the admission and the budget", "(server/grpc/admission.py"),
    ("the admission and the budget", "(server/grpc/request_budget.py"),
    ("the TLS relay", "(server/grpc/relay.py"),
    ("the receive's other Python", "(server/grpc/receiving.py"),
    ("asyncio's Python", "/asyncio/"),
    ("grpcio's Python and Cython", "grpc/"),
)


def stage_of(frames: list[str]) -> str:
    for label, needle in STAGES:
        if any(needle in frame for frame in frames):
            return label
    return "native under the loop (no Python frame of ours)"


def aggregate(raw: Path, top: int) -> str:
    """The stage table and the top self / inclusive functions of a py-spy raw file."""
    total = 0
    stages: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.strip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        # grpcio's poller and event-engine threads and the watchdog are not the loop's thread
        if "watchdog" in stack or "Thread.run" in frames[0] or "_bootstrap" in frames[0]:
            continue
        n = int(count)
        total += n
        stages[stage_of(frames)] += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return "no samples"
    lines = [f"samples of the loop's thread: {total}", "| stage | share |", "|---|---:|"]
    lines += [f"| {label} | {100 * n / total:.1f}% |" for label, n in stages.most_common()]
    lines.append("--- self")
    lines += [f"{100 * n / total:5.1f}% {f[:150]}" for f, n in own.most_common(top)]
    lines.append("--- inclusive")
    lines += [f"{100 * n / total:5.1f}% {f[:150]}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grpc_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--row", default="send:32")
    parser.add_argument("--checkout", type=Path, default=REPO)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples per second")
    parser.add_argument("--prefill", type=int, default=60_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--receive-batch", type=int, default=32)
    parser.add_argument("--grpc-tls", choices=("permissive", "disabled"), default="permissive")
    parser.add_argument("--port", type=int, default=21400)
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw stacks here")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    (row,) = grpc_load.parse_rows(args.row)
    if shutil.which("py-spy") is None:
        raise SystemExit("grpc_profile: py-spy is not on PATH")
    with tempfile.TemporaryDirectory(prefix="grpc-profile-") as tmp:
        work = Path(tmp)
        go_binary = grpc_load.build_go(work)
        if go_binary is None:
            raise SystemExit("grpc_profile: the Go generator could not be built")
        (work / "store").mkdir()
        (work / "row").mkdir()
        server = alternating.start_writable(
            args.checkout,
            work / "store",
            args.port,
            work / "serve.log",
            *("--grpc-port", str(args.port + 3), "--grpc-tls", args.grpc_tls, "--http", "off"),
        )
        server.name = "B"
        raw = args.raw or work / "raw.txt"
        spies: list[subprocess.Popen[bytes]] = []

        def spy() -> None:
            spies.append(
                subprocess.Popen(
                    [
                        *("py-spy", "record", "-p", str(server.process.pid), "-d", str(int(args.seconds))),
                        *("-r", str(args.rate), "-f", "raw", "--nonblocking", "-o", str(raw)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

        try:
            remoting = f"127.0.0.1:{server.port}"
            asyncio.run(grpc_load.prepare(remoting, grpc_load.SEND_TOPIC, 0, args.body))
            if row.kind != "send":
                # the row's topic filled here, before py-spy starts: ``run_row`` then only creates it
                topic = next(grpc_load._topics)
                grpc_load._topics = itertools.count(topic)
                asyncio.run(grpc_load.prepare(remoting, f"GrpcLoadReceive{topic}", args.prefill, args.body))
            load = Namespace(
                warmup=args.warmup, seconds=args.seconds + 1.0, body=args.body, prefill=0,
                receive_batch=args.receive_batch,
            )  # fmt: skip
            timer = threading.Timer(args.warmup + 0.5, spy)
            timer.start()
            try:
                result = grpc_load.run_row("go", go_binary, server, row, work / "row", load)
            finally:
                timer.cancel()
                for process in spies:
                    process.wait(timeout=args.seconds + 60)
        finally:
            server.stop()
        print(f"{args.checkout} {row.label}: {result}")
        print(aggregate(raw, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
