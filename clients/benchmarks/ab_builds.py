"""Two builds of this server side by side: throughput and server CPU per request, as ratios.

    python -m clients.benchmarks.ab_builds A_DIR B_DIR [--kind view] [--rounds 4] [--seconds 3]
                                                       [--port 34000]

A_DIR and B_DIR are checkouts of this repository (a worktree, or ``git archive`` of a commit, each
with its accelerators built in place). Each round starts ``serve`` from A, then from B (the order
flipped every round), pinned to core 1 over its own copy of ``../shared/stores/java-4.9.7-a``, and
blasts it from core 0 with ``rmqblast`` at 16 connections x 8 in flight (the issue 11 load) for
``--seconds`` after 0.5 s uncounted. Reported per build: requests/s and the server's CPU time per
answered request (user + system of the server process over the whole blast, warm-up included,
divided by the answers received). The CPU figure is the one to read on a busy machine: other work
on core 1 lowers the requests/s of whichever build it happens to meet but barely changes the CPU a
request costs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clients.benchmarks.vs_java import (
    LOAD_CORE,
    SERVER_CORE,
    Server,
    blast,
    build_rmqblast,
    golden_copy,
    tree_cpu_seconds,
    wait_port,
)
from clients.samples import sample_store


def start_build(tree: Path, store: Path, conf: Path, port: int, log: Path) -> Server:
    """``serve`` from ``tree``'s own code (run from its root, so its packages come first)."""
    cmd = ["taskset", "-c", SERVER_CORE, sys.executable, "-m", "clients.cli", "serve", "--store", str(store)]
    cmd += ["--config", str(conf), "--port", str(port), "--log-level", "WARNING"]
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tree)
    wait_port(port, 60, process)
    return Server(tree.name, port, process)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--kind", choices=["view", "key"], default="view")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--port", type=int, default=34000)
    args = parser.parse_args()
    trees = {"A": args.a.resolve(), "B": args.b.resolve()}
    results: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="ab-builds-") as tmp:
        work = Path(tmp)
        rmqblast = build_rmqblast(work)
        store, _ = golden_copy(work / "golden")
        samples = sample_store(store)
        files = {"offsets": work / "offsets", "keys": work / "keys"}
        files["offsets"].write_text("".join(f"{o}\n" for o in samples.offsets))
        files["keys"].write_text("".join(f"{t}\t{k}\n" for t, k in samples.keys + samples.unique_keys))
        port = args.port
        for round_no in range(args.rounds):
            for side in "AB" if round_no % 2 == 0 else "BA":
                copy, copy_conf = golden_copy(work / f"r{round_no}{side}")
                server = start_build(trees[side], copy, copy_conf, port, work / f"r{round_no}{side}.log")
                try:
                    blast(rmqblast, port, args.kind, files, 16, 8, 1.0, LOAD_CORE)  # warm the server up
                    cpu0 = tree_cpu_seconds(server.process.pid)
                    out = blast(rmqblast, port, args.kind, files, 16, 8, args.seconds, LOAD_CORE)
                    cpu = tree_cpu_seconds(server.process.pid) - cpu0
                finally:
                    server.stop()
                port += 1
                if out.get("errors"):
                    raise RuntimeError(f"{side} answered with errors: {out}")
                results[side].append((out["rps"], cpu / max(out["received"], 1) * 1e6))
                rps, us = results[side][-1]
                print(f"round {round_no + 1} {side}: {rps:,.0f} req/s, {us:.2f} us server CPU per request")
    print(f"\n| {args.kind} 16x8 | A {trees['A']} | B {trees['B']} | B/A, median (per round) |")
    print("|---|---:|---:|---:|")
    for index, label, unit in ((0, "requests/s", ""), (1, "server CPU per request", " us")):
        a = [r[index] for r in results["A"]]
        b = [r[index] for r in results["B"]]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        per_round = " ".join(f"{r:.2f}" for r in ratios)
        print(
            f"| {label} | {statistics.median(a):,.2f}{unit} | {statistics.median(b):,.2f}{unit} | "
            f"{statistics.median(ratios):.2f}x ({per_round}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
