"""PULL_MESSAGE and SEARCH_OFFSET_BY_TIMESTAMP over the sockets: a base checkout, this one, Java 4.9.7.

    taskset -c 0 python -m benchmarks.pull_vs --base DIR [--rounds 3] [--seconds 3] [--port 35600]
        [--no-java]

Each server serves a fresh copy of ``../shared/stores/java-4.9.7-a`` on core 1 (``taskset -c 1``):
ours as ``serve --writable`` (the only server whose pulls the compiled request path takes), from
``--base`` (a checkout with its accelerators built) and from this checkout, and the real 4.9.7
broker (``vs_java.start_java``). The load is ``server_load``'s generator (run this script on core 0):
the pull ``server_load`` sends (``TopicA`` queue 1 from offset 0, 32 records, 22 KB, TOOLS_CONSUMER,
tag ``*``) and its SEARCH_OFFSET_BY_TIMESTAMP, at 1 x 1 (p50) and 16 x 8 (requests/s). Server CPU
is read from /proc around each run (warm-up included), as answers per server CPU-second. Rounds
alternate the servers, the order reversed every round; per row the median over rounds and the
median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from benchmarks import alternating, server_load, vs_java

KINDS = ("PULL_MESSAGE", "SEARCH_OFFSET_BY_TIMESTAMP")
SHAPES = ((1, 1), (16, 8))
WARMUP = 0.5


def run_one(server: vs_java.Server, seconds: float) -> dict[tuple[str, int], tuple[float, float, float]]:
    """(kind, connections) -> (requests/s, p50 ms, answers per server CPU-second)."""
    out = {}
    for kind in KINDS:
        server_load.measure(server.port, kind, 16, 8, 1.0, 0.5, 1, check=True)  # warm up
        for connections, depth in SHAPES:
            cpu = vs_java.tree_cpu_seconds(server.process.pid)
            rps, p50, _ = server_load.measure(
                server.port, kind, connections, depth, seconds, WARMUP, 1, check=True
            )
            used = vs_java.tree_cpu_seconds(server.process.pid) - cpu
            per_cpu = rps * (seconds + WARMUP) / used if used > 0 else float("nan")
            out[kind, connections] = (rps, p50, per_cpu)
            print(f"  {server.name} {kind} {connections}x{depth}: {rps:,.0f}/s p50 {p50:.3f} ms, "
                  f"{per_cpu:,.0f} per CPU-s", file=sys.stderr, flush=True)  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pull_vs", description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--port", type=int, default=35600)
    parser.add_argument("--no-java", action="store_true")
    args = parser.parse_args()
    names = ["A", "B"] + ([] if args.no_java else ["java"])

    def start(name: str, work: Path, port: int) -> vs_java.Server:
        store, conf = vs_java.golden_copy(work)
        if name == "java":
            return vs_java.start_java(store, port, work / "log")
        checkout = args.base if name == "A" else vs_java.REPO
        return alternating.start_writable(checkout, store, port, work / "log", "--config", str(conf))

    results = alternating.alternate(
        names, args.rounds, args.port, start, lambda s: run_one(s, args.seconds), "rmq-pullvs-"
    )
    alternating.print_header(names)
    for kind in KINDS:
        for connections, depth in SHAPES:
            for what, index in (("requests/s", 0), ("p50 ms", 1), ("answers per server CPU-second", 2)):
                if (connections == 1 and index != 1) or (connections != 1 and index == 1):
                    continue
                cells = [statistics.median(r[kind, connections][index] for r in results[n]) for n in names]
                shown = [f"{c:,.3f}" if index == 1 else f"{c:,.0f}" for c in cells]
                row = f"| {kind} {connections}x{depth} {what} | " + " | ".join(shown)
                for other in ["A"] + (["java"] if "java" in names else []):
                    ratios = [
                        (o[kind, connections][index] / b[kind, connections][index])
                        if index == 1
                        else (b[kind, connections][index] / o[kind, connections][index])
                        for b, o in zip(results["B"], results[other], strict=True)
                    ]
                    row += f" | {alternating.ratio_cell(ratios)}"
                print(row + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
