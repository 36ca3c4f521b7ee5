"""SEND_MESSAGE_V2 over the sockets: a base checkout, this one, Java 4.9.7, each on an empty store.

    taskset -c 0 python -m benchmarks.send_vs --base DIR [--rounds 3] [--seconds 4] [--port 35700]
        [--warmup 3] [--no-java]

Each server writes a fresh, empty store on core 1 (``taskset -c 1``): ours as ``serve --writable``
(default geometry; gRPC and HTTP off) from ``--base`` (a checkout with its accelerators built) and
from this checkout, and the real 4.9.7 broker (``vs_java.start_java``: default geometry, topics
auto-created). The load is ``send_load``'s generator, run in this process (run it on core 0): the
Java producer's SEND_MESSAGE_V2 (256-byte body, KEYS, TAGS, a fresh UNIQ_KEY; the topic created by
a warm-up at 4 x 4, 3 s by default, in which the JVM compiles its hot code) at 1 x 1 (p50) and
4 x 4 (sends/s, p50, p99). The generator is one Python process, so at 4 x 4 it may be the limit
rather than the server: the server's CPU is read from /proc around each run, and SENDs per server
CPU-second is the server's own cost. Rounds alternate the servers, the order reversed every round;
per row the median over rounds and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from benchmarks import alternating, send_load, vs_java

SHAPES = ((1, 1), (4, 4))
TOPIC = "SendVs"
#: Ours serves SENDs on its remoting port only (no gRPC or HTTP port to bind and share the core with).
QUIET_PORTS = ("--grpc-port", "0", "--http", "off")
#: (row label, shape, the result's key, larger is better)
ROWS = (
    ("1x1 p50 ms", (1, 1), "p50_ms", False),
    ("4x4 sends/s", (4, 4), "sends_per_s", True),
    ("4x4 p50 ms", (4, 4), "p50_ms", False),
    ("4x4 p99 ms", (4, 4), "p99_ms", False),
    ("4x4 SENDs per server CPU-second", (4, 4), "per_cpu", True),
)


def run_one(server: vs_java.Server, seconds: float, warmup: float) -> dict[tuple[int, int], dict]:
    """(connections, depth) -> send_load's result, with ``per_cpu`` (SENDs per server CPU-second)."""
    addr = f"127.0.0.1:{server.port}"
    asyncio.run(send_load.run(addr, TOPIC, 4, 4, warmup, 256, 4))  # creates the topic; warms the JIT
    out = {}
    for connections, depth in SHAPES:
        cpu = vs_java.tree_cpu_seconds(server.process.pid)
        result = asyncio.run(send_load.run(addr, TOPIC, connections, depth, seconds, 256, 4))
        used = vs_java.tree_cpu_seconds(server.process.pid) - cpu
        if result["errors"]:
            raise RuntimeError(f"{server.name}: SENDs refused: {result['codes']}")
        result["per_cpu"] = result["sends"] / used if used > 0 else float("nan")
        out[connections, depth] = result
        shown = f"{result['sends_per_s']:,}/s p50 {result['p50_ms']} ms p99 {result['p99_ms']} ms"
        print(
            f"  {server.name} {connections}x{depth}: {shown}, {result['per_cpu']:,.0f} per CPU-s",
            file=sys.stderr,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.send_vs", description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--port", type=int, default=35700)
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of 4 x 4 before measuring")
    parser.add_argument("--no-java", action="store_true")
    args = parser.parse_args()
    if not args.no_java and not (vs_java.JAVA_BIN / "start-broker.sh").exists():
        parser.error(
            "the Java broker is not built in /tmp/rmqjava (../shared/java-harness/README.md); --no-java"
        )
    names = ["A", "B"] + ([] if args.no_java else ["java"])

    def start(name: str, work: Path, port: int) -> vs_java.Server:
        store = work / "store"
        store.mkdir()
        if name == "java":
            return vs_java.start_java(store, port, work / "log")
        checkout = args.base if name == "A" else vs_java.REPO
        return alternating.start_writable(checkout, store, port, work / "log", *QUIET_PORTS)

    results = alternating.alternate(
        names, args.rounds, args.port, start, lambda s: run_one(s, args.seconds, args.warmup), "rmq-sendvs-"
    )
    alternating.print_header(names)
    for label, shape, key, larger in ROWS:
        cells = [statistics.median(r[shape][key] for r in results[n]) for n in names]
        row = f"| {label} | " + " | ".join(f"{c:,.0f}" if larger else f"{c:.2f}" for c in cells)
        for other in ["A"] + (["java"] if "java" in names else []):
            ratios = [
                (b[shape][key] / o[shape][key]) if larger else (o[shape][key] / b[shape][key])
                for b, o in zip(results["B"], results[other], strict=True)
            ]
            row += f" | {alternating.ratio_cell(ratios)}"
        print(row + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
