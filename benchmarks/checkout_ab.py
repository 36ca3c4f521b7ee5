"""Two checkouts of this server side by side: requests/s and server CPU per answer, A B A B.

    RMQ_SHARED=/work/shared python -m benchmarks.checkout_ab A_DIR B_DIR [--kind view] [--rounds 3]
                                             [--seconds 3] [--port 34200] [--writable]

For a change to the hot path, "is B cheaper than A?" on a machine shared with other work.
Each checkout's ``serve`` runs from its own directory (its code and its compiled accelerators, built
there with ``python setup.py build_ext --inplace``) on core 1, over a fresh copy of
``tests/golden/stores/java-4.9.7-a``; ``rmqblast`` (built into a temporary directory) drives it from
core 0 at 16 connections x 8 in flight, VIEW_MESSAGE_BY_ID of random records or QUERY_MESSAGE of
random keys (``--kind key``), as ``vs_java`` does. Each round runs A then B, the order flipped every
round. ``--writable`` serves both as ``serve --writable`` (the lookups where a live broker writes;
the gRPC port off). ``rmqblast.c`` is read from ``$RMQ_SHARED/tools`` (default: ``shared`` beside
the checkout's parent). Printed: every run, the medians, and the median of the per-round ratios
B / A. Requests/s swings with whatever else runs on the core; the server's CPU time per answer
(user + system from ``/proc``) swings much less, so it is the figure to read for a per-request saving.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import vs_java as vj
from clients.samples import sample_store


def run_once(
    checkout: Path,
    rmqblast: Path,
    work: Path,
    port: int,
    kind: str,
    files: dict[str, Path],
    seconds: float,
    writable: bool = False,
) -> tuple[float, float]:
    """(requests/s, server CPU µs per answer) of one ``serve`` from ``checkout``."""
    fresh = work / f"store-{port}-{time.monotonic_ns()}"
    fresh.mkdir()
    store, conf = vj.golden_copy(fresh)
    cmd = [
        "taskset",
        "-c",
        vj.SERVER_CORE,
        sys.executable,
        "-m",
        "clients.cli",
        "serve",
        "--store",
        str(store),
        "--config",
        str(conf),
        "--port",
        str(port),
        "--log-level",
        "WARNING",
    ]
    if writable:
        cmd += ["--writable", "--grpc-port", "off"]
    log = fresh / "serve.log"
    with open(log, "wb") as out:
        process = vj.subprocess.Popen(cmd, stdout=out, stderr=vj.subprocess.STDOUT, cwd=checkout)
    server = vj.Server(checkout.name, port, process)
    try:
        vj.wait_port(port, 60, process)
        time.sleep(1.0)
        vj.blast(rmqblast, port, kind, files, 16, 8, 1.0)  # warm up (page cache, first imports)
        cpu0 = vj.tree_cpu_seconds(process.pid)
        result = vj.blast(rmqblast, port, kind, files, 16, 8, seconds, warmup=0.0)
        cpu = vj.tree_cpu_seconds(process.pid) - cpu0
    finally:
        server.stop()
        vj.shutil.rmtree(fresh, ignore_errors=True)
    if result.get("errors"):
        raise RuntimeError(f"{checkout}: rmqblast reported errors: {result}")
    answers = result.get("received") or result["requests"]
    return float(result["rps"]), cpu / answers * 1e6 if answers else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A (the baseline)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("--kind", choices=["view", "key"], default="view")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--port", type=int, default=34200, help="ports used: PORT and PORT - 2")
    parser.add_argument("--writable", action="store_true", help="serve --writable (both sides)")
    args = parser.parse_args()
    if not (vj.SHARED / "tools" / "rmqblast.c").is_file():
        parser.error(
            f"{vj.SHARED / 'tools' / 'rmqblast.c'} not found: set RMQ_SHARED to the shared folder that "
            "holds tools/rmqblast.c (here: RMQ_SHARED=/work/shared)"
        )
    checkouts = [args.a.resolve(), args.b.resolve()]
    with tempfile.TemporaryDirectory(prefix="checkout-ab-") as tmp:
        work = Path(tmp)
        rmqblast = vj.build_rmqblast(work)
        samples = sample_store(vj.GOLDEN_STORES / vj.GOLDEN)
        files = {"offsets": work / "offsets", "keys": work / "keys"}
        files["offsets"].write_text("\n".join(map(str, samples.offsets)) + "\n")
        files["keys"].write_text("".join(f"{t}\t{k}\n" for t, k in samples.keys + samples.unique_keys))
        runs: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
        for round_no in range(args.rounds):
            order = [0, 1] if round_no % 2 == 0 else [1, 0]
            for which in order:
                rps, cpu_us = run_once(
                    checkouts[which], rmqblast, work, args.port, args.kind, files, args.seconds, args.writable
                )
                runs[which].append((rps, cpu_us))
                label = "AB"[which]
                print(
                    f"round {round_no + 1} {label}: {rps:,.0f} {args.kind}/s, {cpu_us:.2f} µs CPU per answer"
                )
    server = "serve --writable" if args.writable else "serve"
    print(f"| {args.kind} 16 x 8, {server} | A | B | B / A (median of rounds) |")
    print("|---|---:|---:|---:|")
    for index, name in ((0, "requests/s"), (1, "server CPU µs per answer")):
        a = [r[index] for r in runs[0]]
        b = [r[index] for r in runs[1]]
        ratio = statistics.median(y / x for x, y in zip(a, b, strict=True) if x)
        print(f"| {name} | {statistics.median(a):,.2f} | {statistics.median(b):,.2f} | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
